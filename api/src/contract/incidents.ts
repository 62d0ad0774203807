import { INCIDENT_RESOLUTIONS } from '@orloj/common/store';
import { named, ref } from './components.js';
import { dateTime, uuid } from './responses.js';

/** Incidents (issue 26, docs/api.md "Incidents", docs/adr/0016-incidents.md): additions to the contract. */

export const incidentSchema = named('Incident', {
  type: 'object',
  required: ['id', 'workflow_id', 'workflow_name', 'status', 'started_at', 'opened_at', 'duration_ms', 'failed_runs', 'first_failure'],
  properties: {
    id: uuid,
    workflow_id: uuid,
    workflow_name: { type: 'string' },
    status: { enum: ['open', 'closed'] },
    started_at: { ...dateTime, description: 'When the first failed run of the streak that turned the workflow down finished.' },
    opened_at: { ...dateTime, description: "When the alert policy's N-th failure turned the workflow down." },
    closed_at: { ...dateTime, description: 'Once closed: when the workflow recovered (M completed runs) or was terminated.' },
    resolution: { enum: [...INCIDENT_RESOLUTIONS], description: 'Once closed: recovered or terminated.' },
    duration_ms: { type: 'integer', minimum: 0, description: 'closed_at (or now, while open) − started_at.' },
    failed_runs: { type: 'integer', minimum: 1, description: 'Failed runs in this down period, the ones that turned it down included.' },
    first_failure: {
      type: 'object',
      required: ['job_id'],
      properties: {
        job_id: uuid,
        reason_code: { type: 'string' },
        reason_message: { type: 'string' },
      },
      additionalProperties: false,
    },
    acknowledged_by: { type: 'string', description: 'Once acknowledged: the email of who did.' },
    acknowledged_at: dateTime,
    snoozed_until: { ...dateTime, description: 'Once snoozed: until when (the dashboard leaves it out of its count until then).' },
    snoozed: { type: 'boolean', description: 'snoozed_until is in the future.' },
  },
  additionalProperties: false,
} as const);

export const incidentPageSchema = named('IncidentPage', {
  type: 'object',
  required: ['incidents', 'cursor'],
  properties: {
    incidents: { type: 'array', items: ref(incidentSchema) },
    cursor: { type: 'string', description: 'Empty when there is no further page.' },
  },
  additionalProperties: false,
} as const);

export const snoozeIncidentBody = named('SnoozeIncident', {
  type: 'object',
  additionalProperties: false,
  required: ['until'],
  properties: {
    until: { type: 'string', format: 'date-time', maxLength: 64, description: 'RFC 3339; in the future and at most 30 days ahead.' },
  },
} as const);
