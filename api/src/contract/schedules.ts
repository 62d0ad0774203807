import { SKIP_REASONS, SLOT_FATES } from '@orloj/common/domain';
import { named } from './components.js';
import { dateTime, uuid } from './responses.js';

/** Schedules' slot listing (issue 25, docs/api.md "Schedules", docs/adr/0015): an addition to the contract. */

export const slotListSchema = named('SlotList', {
  type: 'object',
  required: ['from', 'to', 'slots', 'downtime'],
  properties: {
    from: dateTime,
    to: dateTime,
    slots: {
      type: 'array',
      items: {
        type: 'object',
        required: ['slot_at', 'fate'],
        properties: {
          slot_at: { ...dateTime, description: 'The slot: when its run was due (jitter included).' },
          fate: { enum: [...SLOT_FATES] },
          job_id: { ...uuid, description: 'Where the slot has a job of its own.' },
          late_ms: { type: 'integer', minimum: 0, description: 'Where its job started: how long after the slot.' },
          reason: { enum: [...SKIP_REASONS], description: 'Only for skipped slots: docs/api.md, "Schedules", says what each reason means.' },
          after_overlap: { const: true, description: 'On ran, running and pending slots whose run waited for the previous one to end (overlap_policy run_after).' },
        },
        additionalProperties: false,
      },
    },
    downtime: {
      type: 'array',
      description: "The times orloj itself was not running (no scheduler leader) that reach into the range, oldest first (docs/adr/0021).",
      items: { type: 'object', required: ['from', 'to'], properties: { from: dateTime, to: dateTime }, additionalProperties: false },
    },
  },
  additionalProperties: false,
} as const);
