import { ATTEMPT_END_CODES, JOB_STATUSES, REASON_CODES } from '@orloj/common/domain';
import { named } from './components.js';
import { dateTime, uuid } from './responses.js';

/**
 * `GET /workflows/{workflow_id}/jobs/{job_id}/attempts` (issue 26): a job's
 * attempts, each with why it was given up and the lines its log holds, so a
 * job page can show every attempt's own log (`attempt` on the log reads).
 */
export const attemptListSchema = named('JobAttemptList', {
  type: 'object',
  required: ['id', 'workflow_id', 'attempts'],
  properties: {
    id: uuid,
    workflow_id: uuid,
    attempts: {
      type: 'array',
      description: 'Oldest first; the last one is the job\'s current attempt. Empty while the job waits for its first.',
      items: {
        type: 'object',
        required: ['attempt', 'outcome'],
        properties: {
          attempt: { type: 'integer', minimum: 1 },
          outcome: {
            enum: ['RETRIED', ...JOB_STATUSES],
            description: "RETRIED: given up and the job handed out again (reason says why); otherwise the job's status, on its current attempt.",
          },
          runner_id: { type: 'string', description: 'The runner that started it, when one did.' },
          started_at: dateTime,
          ended_at: dateTime,
          reason: {
            type: 'object',
            required: ['code', 'message'],
            properties: {
              code: { enum: [...ATTEMPT_END_CODES, ...REASON_CODES] },
              message: { type: 'string' },
            },
            additionalProperties: false,
            description: 'Why a RETRIED attempt was given up (lease_lost, not_started, orloj_restart, runner_failure), or the job\'s own reason on its current attempt.',
          },
          log_lines: { type: 'integer', minimum: 0, description: 'Lines of this attempt stored; only when the workflow keeps logs.' },
        },
        additionalProperties: false,
      },
    },
  },
  additionalProperties: false,
} as const);
