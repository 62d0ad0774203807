import { BUILD_STATUSES, FAILURE_LIMIT_MAX, FAILURE_LIMIT_MIN, INTERVAL_MAX, INTERVAL_MIN, NAME_MAX_LENGTH, WORKFLOW_KINDS } from '@orloj/common/domain';

/** Request body schemas: ajv validates with them and the OpenAPI document publishes them. */
export const credentialsBody = {
  type: 'object',
  additionalProperties: false,
  required: ['email', 'password'],
  properties: {
    email: { type: 'string', minLength: 1, maxLength: 1024 },
    password: { type: 'string', minLength: 8, maxLength: 512 },
  },
} as const;

/** `POST /auth/register`: the credentials, and an invitation when REGISTRATION=invitation asks for one. */
export const registerBody = {
  type: 'object',
  additionalProperties: false,
  required: ['email', 'password'],
  properties: {
    ...credentialsBody.properties,
    invitation: {
      type: 'string',
      minLength: 1,
      maxLength: 100,
      description: 'An invitation minted by `orloj invite` for this email; needed when the installation registers by invitation (REGISTRATION=invitation), ignored otherwise.',
    },
  },
} as const;

const name = { type: 'string', minLength: 1, maxLength: NAME_MAX_LENGTH, pattern: '\\S' } as const;
const payload = {
  type: 'string',
  minLength: 2,
  maxLength: 1_048_576,
  description:
    "A JSON object encoded as a string; fields depend on kind. CONTAINER payloads are also held to the installation's settings (allowed registries, networking, memory/CPU/timeout maxima): 400 naming the payload field otherwise.",
} as const;
const interval = { type: 'integer', minimum: INTERVAL_MIN, maximum: INTERVAL_MAX, description: 'Minutes between runs.' } as const;
const failureLimit = { type: 'integer', minimum: FAILURE_LIMIT_MIN, maximum: FAILURE_LIMIT_MAX } as const;

export const createWorkflowBody = {
  type: 'object',
  additionalProperties: false,
  required: ['name', 'payload', 'kind', 'interval', 'max_consecutive_job_failures_allowed'],
  properties: {
    name,
    payload,
    kind: { enum: [...WORKFLOW_KINDS] },
    interval,
    max_consecutive_job_failures_allowed: failureLimit,
    log_retention: { type: 'boolean' },
  },
} as const;

export const updateWorkflowBody = {
  type: 'object',
  additionalProperties: false,
  required: ['name', 'payload', 'interval', 'max_consecutive_job_failures_allowed'],
  properties: {
    name,
    payload,
    interval,
    max_consecutive_job_failures_allowed: failureLimit,
    log_retention: { type: 'boolean', description: 'Optional; keeps the current setting when absent.' },
  },
} as const;

export const updateUserBody = {
  type: 'object',
  additionalProperties: false,
  required: ['notification_preference'],
  properties: { notification_preference: { enum: ['ALL', 'NONE'] } },
} as const;

/** Ids are checked as UUIDs after the schema (so the 400 names the item); repeats are ignored. */
export const MAX_NOTIFICATION_IDS = 1000;
export const markNotificationsBody = {
  type: 'object',
  additionalProperties: false,
  required: ['ids'],
  properties: {
    ids: {
      type: 'array',
      minItems: 1,
      maxItems: MAX_NOTIFICATION_IDS,
      items: { type: 'string', maxLength: 64 },
      description: 'Notification ids (UUIDs) to mark read; a repeated id is ignored.',
    },
  },
} as const;

/** `POST /workflows/{id}/jobs/schedule`: no body, or an empty JSON object; any field is 400. */
export const scheduleJobBody = {
  type: 'object',
  additionalProperties: false,
  properties: {},
  description: 'Optional; when sent, an empty object.',
} as const;

export interface CredentialsBody {
  email: string;
  password: string;
}
export interface RegisterBody extends CredentialsBody {
  invitation?: string;
}
export interface CreateWorkflowBody {
  name: string;
  payload: string;
  kind: (typeof WORKFLOW_KINDS)[number];
  interval: number;
  max_consecutive_job_failures_allowed: number;
  log_retention?: boolean;
}
export type UpdateWorkflowBody = Omit<CreateWorkflowBody, 'kind'>;
export type ScheduleJobBody = Record<string, never>;
export interface MarkNotificationsBody {
  ids: string[];
}
export interface UpdateUserBody {
  notification_preference: 'ALL' | 'NONE';
}

export { BUILD_STATUSES, WORKFLOW_KINDS };
