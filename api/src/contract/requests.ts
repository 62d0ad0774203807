import {
  containerPayloadSchema,
  ALERT_POLICY_MAX,
  ALERT_POLICY_DEFAULT,
  ALERT_POLICY_MIN,
  CATCH_UP_GRACE_MS,
  CATCH_UP_POLICIES,
  FAILURE_LIMIT_MAX,
  FAILURE_LIMIT_MIN,
  FIRST_RUNS,
  heartbeatPayloadSchema,
  INTERVAL_MAX,
  INTERVAL_MIN,
  JITTER_MAX_SECONDS,
  NAME_MAX_LENGTH,
  OVERLAP_POLICIES,
  WORKFLOW_KINDS,
} from '@orloj/common/domain';
import { named, type Wire } from './components.js';
import { uuid } from './responses.js';

/** An account's rules, checked once the body is read (http/accounts.ts): the normalised email's bytes and the password's characters. */
export const EMAIL_MAX_BYTES = 254;
export const PASSWORD_MIN = 8;
export const PASSWORD_MAX = 128;

/**
 * Request body schemas: ajv validates with them and the OpenAPI document
 * publishes them (where the published one says more, both are here).
 */
export const credentialsBody = {
  type: 'object',
  additionalProperties: false,
  required: ['email', 'password'],
  properties: {
    email: { type: 'string', minLength: 1, maxLength: 1024 },
    password: { type: 'string', minLength: PASSWORD_MIN, maxLength: 512 },
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
const interval = {
  type: 'integer',
  minimum: INTERVAL_MIN,
  maximum: INTERVAL_MAX,
  description: 'Minutes between runs. Required unless `cron` is set; a cron workflow ignores it (its `interval` then shows the longest gap between its runs).',
} as const;
/** The schedule's optional fields (ADR 0015); cron and timezone are checked after the schema (cronProblem, timeZoneProblem). */
const scheduleFields = {
  cron: {
    type: ['string', 'null'],
    maxLength: 200,
    description: 'A cron expression (five fields, or @hourly, @daily, @weekly, @monthly, @yearly, @annually, @midnight) read in `timezone`; null or absent: every `interval` minutes.',
  },
  timezone: { type: 'string', minLength: 1, maxLength: 64, description: 'IANA time zone of `cron`, default UTC.' },
  jitter_seconds: {
    type: 'integer',
    minimum: 0,
    maximum: JITTER_MAX_SECONDS,
    description: 'Every slot moves later by the same offset in [0, jitter_seconds] seconds (to the millisecond), derived from the workflow id when jitter_seconds is set and kept while it stays the same; default 0.',
  },
  // The run policy (ADR 0020); on PUT each is kept when absent.
  overlap_policy: {
    enum: [...OVERLAP_POLICIES],
    description: 'A slot that comes while the previous run still goes: `run_after` (default) runs the most recent such slot once, as soon as that run ends; `skip` runs none of them.',
  },
  catch_up_policy: {
    enum: [...CATCH_UP_POLICIES],
    description: `Slots missed while orloj was down (taken more than ${CATCH_UP_GRACE_MS / 1000} s after they fell due): \`latest\` (default) runs the most recent one; \`none\` runs none.`,
  },
  first_run: {
    enum: [...FIRST_RUNS],
    description: '`at_first_slot` (default): the first run is the schedule\'s first slot after the build; `now`: a run right after each build too.',
  },
} as const;
const failureLimit = { type: 'integer', minimum: FAILURE_LIMIT_MIN, maximum: FAILURE_LIMIT_MAX } as const;
// ---- issue 26: the alert policy (optional; additions to the contract) ----
const alertPolicy = {
  alert_after_failures: {
    type: 'integer',
    minimum: ALERT_POLICY_MIN,
    maximum: ALERT_POLICY_MAX,
    description: `Down (a state change, an incident) after this many consecutive failed runs; default ${ALERT_POLICY_DEFAULT} (on PUT: kept when absent). Independent of max_consecutive_job_failures_allowed, which terminates.`,
  },
  recover_after_successes: {
    type: 'integer',
    minimum: ALERT_POLICY_MIN,
    maximum: ALERT_POLICY_MAX,
    description: `Up again (the incident closes) after this many consecutive completed runs; default ${ALERT_POLICY_DEFAULT} (on PUT: kept when absent).`,
  },
} as const;

export const createWorkflowBody = named('CreateWorkflow', {
  type: 'object',
  additionalProperties: false,
  required: ['name', 'payload', 'kind', 'max_consecutive_job_failures_allowed'],
  properties: {
    name,
    payload,
    kind: { enum: [...WORKFLOW_KINDS] },
    interval,
    max_consecutive_job_failures_allowed: failureLimit,
    log_retention: { type: 'boolean' },
    ...alertPolicy,
    ...scheduleFields,
  },
} as const);

export const updateWorkflowBody = named('UpdateWorkflow', {
  type: 'object',
  additionalProperties: false,
  required: ['name', 'payload', 'max_consecutive_job_failures_allowed'],
  properties: {
    name,
    payload,
    interval,
    max_consecutive_job_failures_allowed: failureLimit,
    log_retention: { type: 'boolean', description: 'Optional; keeps the current setting when absent.' },
    ...alertPolicy,
    ...scheduleFields,
  },
} as const);

export const updateUserBody = named('UpdateUser', {
  type: 'object',
  additionalProperties: false,
  required: ['notification_preference'],
  properties: { notification_preference: { enum: ['ALL', 'NONE'] } },
} as const);

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
export const scheduleJobBody = named('ScheduleJob', {
  type: 'object',
  additionalProperties: false,
  properties: {},
  description: 'Optional; when sent, an empty object.',
} as const);

export type CredentialsBody = Wire<typeof credentialsBody>;
export type RegisterBody = Wire<typeof registerBody>;
export type CreateWorkflowBody = Wire<typeof createWorkflowBody>;
export type UpdateWorkflowBody = Wire<typeof updateWorkflowBody>;
export type ScheduleJobBody = Record<string, never>;
export type MarkNotificationsBody = Wire<typeof markNotificationsBody>;
export type UpdateUserBody = Wire<typeof updateUserBody>;

// As published: the rules checked after the validator too, and the ids as UUIDs.
const publishedEmail = { type: 'string', format: 'email', maxLength: EMAIL_MAX_BYTES, description: `Trimmed and lower-cased; at most ${EMAIL_MAX_BYTES} bytes.` } as const;
const publishedPassword = { type: 'string', minLength: PASSWORD_MIN, maxLength: PASSWORD_MAX } as const;
export const credentialsDocument = named('Credentials', { ...credentialsBody, properties: { email: publishedEmail, password: publishedPassword } });
export const registrationDocument = named('Registration', {
  ...registerBody,
  properties: { email: publishedEmail, password: publishedPassword, invitation: registerBody.properties.invitation },
});
export const markNotificationsDocument = named('MarkNotifications', {
  ...markNotificationsBody,
  properties: { ids: { ...markNotificationsBody.properties.ids, items: uuid } },
});
named('HeartbeatPayload', heartbeatPayloadSchema);
named('ContainerPayload', containerPayloadSchema);
