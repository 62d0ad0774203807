import { WINDOW_DURATION_MAX_MINUTES, WINDOW_MODES, WINDOW_NAME_MAX_LENGTH } from '@orloj/common/domain';
import { named, ref } from './components.js';
import { dateTime, uuid } from './responses.js';

/**
 * Maintenance windows and snooze (issue 25, docs/api.md "Maintenance windows
 * and snooze", docs/adr/0019-maintenance-windows.md): additions to the contract.
 */

const definition = {
  name: { type: 'string', minLength: 1, maxLength: WINDOW_NAME_MAX_LENGTH, description: 'What the window is for, as its owner reads it.' },
  mode: { enum: [...WINDOW_MODES], description: '`skip`: slots inside it get no job (their fate reads skipped, maintenance) and nothing alerts; `mute`: runs go on, nothing alerts.' },
  workflow_id: { ...uuid, description: 'The one workflow it covers (one of yours). Exactly one of workflow_id and workflow_query.' },
  workflow_query: {
    type: 'string',
    minLength: 1,
    maxLength: WINDOW_NAME_MAX_LENGTH,
    description: 'It covers each of your workflows whose name contains this, case-insensitively (as GET /workflows?query=), read whenever the window applies.',
  },
  starts_at: { ...dateTime, maxLength: 64, description: 'A one-off window: RFC 3339, with ends_at.' },
  ends_at: { ...dateTime, maxLength: 64, description: 'A one-off window: after starts_at, at most a year later.' },
  cron: { type: 'string', maxLength: 200, description: 'A recurring window: it starts at each instant of this cron expression (as a workflow\'s cron), in timezone, and lasts duration_minutes.' },
  timezone: { type: 'string', maxLength: 64, description: 'A recurring window: the IANA zone of cron (default UTC).' },
  duration_minutes: { type: 'integer', minimum: 1, maximum: WINDOW_DURATION_MAX_MINUTES, description: 'A recurring window: how long each occurrence lasts.' },
} as const;

export const createWindowBody = named('MaintenanceWindowCreate', {
  type: 'object',
  additionalProperties: false,
  required: ['name', 'mode'],
  properties: definition,
} as const);

export const updateWindowBody = named('MaintenanceWindowUpdate', {
  type: 'object',
  additionalProperties: false,
  description: 'Any of the fields of a create body. Giving workflow_id or workflow_query replaces the other; giving a one-off field or a recurring one replaces the timing of the other kind.',
  properties: definition,
} as const);

export const windowSchema = named('MaintenanceWindow', {
  type: 'object',
  required: ['id', 'name', 'mode', 'active', 'created_at', 'updated_at'],
  properties: {
    id: uuid,
    ...definition,
    timezone: { type: 'string', description: 'A recurring window: the IANA zone of cron.' },
    active: { type: 'boolean', description: 'It applies now (to the workflows it covers).' },
    next_starts_at: { ...dateTime, description: 'The current occurrence, or else the next one: when it starts. Absent once a one-off window is over.' },
    next_ends_at: { ...dateTime, description: 'And when it ends.' },
    created_at: dateTime,
    updated_at: dateTime,
  },
  additionalProperties: false,
} as const);

export const windowPageSchema = named('MaintenanceWindowPage', {
  type: 'object',
  required: ['windows', 'cursor'],
  properties: {
    windows: { type: 'array', items: ref(windowSchema) },
    cursor: { type: 'string', description: 'Empty when there is no further page.' },
  },
  additionalProperties: false,
} as const);

export const workflowSnoozeSchema = named('WorkflowSnooze', {
  type: 'object',
  required: ['workflow_id', 'snoozed'],
  properties: {
    workflow_id: uuid,
    snoozed: { type: 'boolean', description: 'snoozed_until is in the future: its failures alert nobody.' },
    snoozed_until: { ...dateTime, description: 'Until when its alerts are (or were) muted; absent when it was never snoozed or the snooze was ended.' },
  },
  additionalProperties: false,
} as const);
