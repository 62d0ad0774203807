/**
 * The OpenAPI document of the HTTP API, as data. Its schemas are
 * built from the domain's own constants and payload schemas, so the document
 * cannot drift from what the routes accept (served at /openapi.json).
 */
import {
  BUILD_STATUSES,
  CHECK_FAILURES,
  containerPayloadSchema,
  HEALTH_STATES,
  heartbeatPayloadSchema,
  JOB_STATUSES,
  JOB_TRIGGERS,
  REASON_CODES,
  WORKFLOW_KINDS,
} from '@orloj/common/domain';
import { NOTIFICATION_KINDS, NOTIFICATION_STATE_CHANGES } from '@orloj/common/store';
import { createWorkflowBody, credentialsBody, markNotificationsBody, registerBody, scheduleJobBody, updateUserBody, updateWorkflowBody } from './schemas.js';

/**
 * The OpenAPI 3.1 description of every implemented route, built from the same
 * schemas the validators use. api/test/openapi.test.ts validates real
 * responses against it, so it cannot drift from the code.
 */
const dateTime = { type: 'string', format: 'date-time' } as const;
const uuid = { type: 'string', format: 'uuid' } as const;
const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const json = (schema: object) => ({ 'application/json': { schema } });
const problem = (description: string) => ({ description, content: { 'application/problem+json': { schema: ref('Problem') } } });

const includeParam = {
  name: 'include',
  in: 'query',
  description: 'health: each workflow carries its `health` (state, recent runs, uptime), read fresh.',
  schema: { enum: ['health'] },
} as const;

const setCookies = {
  'Set-Cookie': {
    description: 'The `session` and `csrf` cookies (HttpOnly, Path=/).',
    required: true,
    schema: { type: 'string' },
  },
};
const rateLimited = {
  description: 'Rate limit exceeded (every route, checked before authentication).',
  headers: {
    'Retry-After': { description: 'Whole seconds until a request would be accepted.', required: true, schema: { type: 'integer', minimum: 1 } },
  },
  content: { 'application/problem+json': { schema: ref('Problem') } },
};
const replayed = {
  'Idempotent-Replayed': {
    description: '`true` when this is the stored response of an earlier request with the same Idempotency-Key.',
    schema: { const: 'true' },
  },
};

// Responses every session route can give (there is no 400 unless the route reads input).
const common = {
  '401': problem('Missing, expired or revoked session.'),
  '429': rateLimited,
};
const mutating = { ...common, '403': problem('Missing or invalid CSRF cookie, or a cross-site origin.') };
const invalid = { '400': problem('Invalid input; every offending field is listed in `errors`.') };
const tooLarge = { '413': problem('Body over 4 MiB.') };

const idempotencyKey = {
  name: 'Idempotency-Key',
  in: 'header',
  required: true,
  description:
    'Valid UTF-8, 1 to 255 bytes after trimming outer ASCII spaces, no control characters. A retry with the same key and request replays the original response; the same key with a different request is 409. Keys are kept 24 hours.',
  schema: { type: 'string', minLength: 1 },
};
const workflowIdParam = { name: 'workflow_id', in: 'path', required: true, schema: uuid };
const jobIdParam = { name: 'job_id', in: 'path', required: true, schema: uuid };
const cursorParam = {
  name: 'cursor',
  in: 'query',
  description: 'Opaque cursor from the previous page; empty or absent for the first page.',
  schema: { type: 'string' },
};

const logLimitParam = { name: 'limit', in: 'query', schema: { type: 'integer', minimum: 1, maximum: 1000, default: 100 } };
const logStreamParam = { name: 'stream', in: 'query', description: 'Exact match.', schema: { enum: ['stdout', 'stderr'] } };
const logQueryParam = (more: string) => ({
  name: 'q',
  in: 'query',
  description: `Case-insensitive literal substring of the message (no pattern characters: % _ \\ * are plain). Omit it to filter by stream only. ${more}`,
  schema: { type: 'string', minLength: 1, maxLength: 1000 },
});

export const openApiDocument = {
  openapi: '3.1.0',
  info: {
    title: 'orloj',
    version: '0.1.0',
    description:
      'Self-hosted workflow scheduling. Every route is also served below /api. Authentication is by the `session` cookie; mutating routes also need the `csrf` cookie.',
  },
  servers: [{ url: '/' }, { url: '/api' }],
  components: {
    securitySchemes: {
      session: { type: 'apiKey', in: 'cookie', name: 'session' },
      csrf: { type: 'apiKey', in: 'cookie', name: 'csrf' },
    },
    schemas: {
      Problem: {
        type: 'object',
        required: ['type', 'title', 'status', 'detail', 'code'],
        properties: {
          type: { type: 'string' },
          title: { type: 'string' },
          status: { type: 'integer' },
          detail: { type: 'string' },
          code: { type: 'string' },
          errors: {
            type: 'array',
            items: {
              type: 'object',
              required: ['field', 'message'],
              properties: { field: { type: 'string' }, message: { type: 'string' } },
              additionalProperties: false,
            },
          },
        },
        additionalProperties: false,
      },
      User: {
        type: 'object',
        required: ['email', 'notification_preference', 'created_at', 'updated_at'],
        properties: {
          email: { type: 'string', format: 'email' },
          notification_preference: { enum: ['ALL', 'NONE'] },
          created_at: dateTime,
          updated_at: dateTime,
        },
        additionalProperties: false,
      },
      Workflow: {
        type: 'object',
        required: [
          'id',
          'name',
          'payload',
          'kind',
          'build_status',
          'interval',
          'consecutive_job_failures_count',
          'max_consecutive_job_failures_allowed',
          'created_at',
          'updated_at',
          'log_retention',
        ],
        properties: {
          id: uuid,
          name: { type: 'string' },
          payload: { type: 'string' },
          kind: { enum: [...WORKFLOW_KINDS] },
          build_status: { enum: [...BUILD_STATUSES] },
          interval: { type: 'integer', minimum: 1, maximum: 10080 },
          consecutive_job_failures_count: { type: 'integer', minimum: 0 },
          max_consecutive_job_failures_allowed: { type: 'integer', minimum: 3, maximum: 100 },
          created_at: dateTime,
          updated_at: dateTime,
          terminated_at: dateTime,
          log_retention: { type: 'boolean' },
          generation: { type: 'integer', minimum: 0, description: 'Only in the single-workflow read; +1 on every PUT.' },
          health: { ...ref('WorkflowHealth'), description: 'Only with include=health.' },
          skipped_slots: {
            type: 'integer',
            minimum: 0,
            description:
              'Only in the single-workflow read: due slots that never got a job of their own (the previous job still ran, the runners were behind, or orloj was down; only the most recent missed slot runs).',
          },
          last_slot_skipped_at: { ...dateTime, description: 'Only in the single-workflow read, once a slot was skipped: when the last one was.' },
        },
        additionalProperties: false,
      },
      Check: {
        type: 'object',
        description: 'What a HEARTBEAT job\'s request did.',
        required: ['response_time_ms'],
        properties: {
          status_code: { type: 'integer', minimum: 100, maximum: 999, description: 'The response\'s status; absent when no response came.' },
          response_time_ms: { type: 'integer', minimum: 0, description: 'From sending the request to the end of the response, or to the failure.' },
          failure: {
            enum: [...CHECK_FAILURES],
            description: 'Why the check failed; absent when it passed. dns, connect, tls, timeout, status (unexpected code), body (text missing), address (target not allowed), request (anything else).',
          },
        },
        additionalProperties: false,
      },
      Run: {
        type: 'object',
        description: 'A finished run.',
        required: ['job_id', 'status', 'scheduled_at'],
        properties: {
          job_id: uuid,
          status: { enum: ['COMPLETED', 'FAILED', 'CANCELED'] },
          scheduled_at: dateTime,
          completed_at: dateTime,
          check: ref('Check'),
        },
        additionalProperties: false,
      },
      WorkflowHealth: {
        type: 'object',
        description: 'The workflow as a monitoring user reads it (docs/api.md, "Checks and health").',
        required: ['state', 'auto_terminated', 'recent_runs', 'uptime', 'skipped_slots'],
        properties: {
          state: { enum: [...HEALTH_STATES] },
          auto_terminated: { type: 'boolean', description: 'Terminated by the failure limit rather than by its owner.' },
          running: {
            type: 'object',
            required: ['job_id', 'status', 'scheduled_at'],
            properties: { job_id: uuid, status: { enum: ['RUNNING'] }, scheduled_at: dateTime },
            additionalProperties: false,
          },
          last_run: { ...ref('Run'), description: 'The latest run that COMPLETED or FAILED.' },
          next_run_at: { ...dateTime, description: 'When the next run is due; absent when none will be. In the past when late.' },
          recent_runs: { type: 'array', maxItems: 20, items: ref('Run'), description: 'Newest first.' },
          uptime: {
            type: 'object',
            required: ['window_hours', 'completed', 'failed', 'canceled'],
            properties: {
              window_hours: { type: 'number', minimum: 0 },
              completed: { type: 'integer', minimum: 0 },
              failed: { type: 'integer', minimum: 0 },
              canceled: { type: 'integer', minimum: 0 },
              ratio: { type: 'number', minimum: 0, maximum: 1, description: 'completed / (completed + failed); absent when neither.' },
            },
            additionalProperties: false,
          },
          skipped_slots: {
            type: 'integer',
            minimum: 0,
            description: 'Missed runs: the workflow\'s skipped_slots (as the single read has them), here on list items too.',
          },
          last_slot_skipped_at: { ...dateTime, description: 'Once a slot was skipped: when the last one was (as the single read has it).' },
        },
        additionalProperties: false,
      },
      WorkflowPage: {
        type: 'object',
        required: ['workflows', 'cursor'],
        properties: {
          workflows: { type: 'array', items: ref('Workflow') },
          cursor: { type: 'string', description: 'Empty when there is no further page.' },
        },
        additionalProperties: false,
      },
      Created: { type: 'object', required: ['id'], properties: { id: uuid }, additionalProperties: false },
      Job: {
        type: 'object',
        required: ['id', 'workflow_id', 'status', 'trigger', 'scheduled_at', 'created_at', 'updated_at'],
        properties: {
          id: uuid,
          workflow_id: uuid,
          container_id: { type: 'string', description: 'Only in job lists, once a container was started for the job.' },
          status: { enum: [...JOB_STATUSES] },
          trigger: { enum: [...JOB_TRIGGERS] },
          attempts: { type: 'integer', minimum: 0, description: 'Runner attempts; only in job lists.' },
          scheduled_at: dateTime,
          started_at: dateTime,
          completed_at: dateTime,
          created_at: dateTime,
          updated_at: dateTime,
          status_reason_code: { enum: [...REASON_CODES], description: 'Only for FAILED and CANCELED jobs.' },
          status_reason_message: { type: 'string', description: 'A fixed, user-safe sentence; only for FAILED and CANCELED jobs.' },
          log_truncated: {
            const: true,
            description:
              "Only when the job's log reached the installation's per-job cap (JOB_LOG_MAX_LINES / JOB_LOG_MAX_MB): the stored log ends with one marker line, and the rest of the output was counted (analytics) but not stored.",
          },
          check: { ...ref('Check'), description: 'HEARTBEAT jobs that ran their request.' },
        },
        additionalProperties: false,
        // The reason fields are present exactly when the job FAILED or was CANCELED.
        if: { properties: { status: { enum: ['FAILED', 'CANCELED'] } } },
        then: { required: ['status_reason_code', 'status_reason_message'] },
        else: { not: { anyOf: [{ required: ['status_reason_code'] }, { required: ['status_reason_message'] }] } },
      },
      JobPage: {
        type: 'object',
        required: ['jobs', 'cursor'],
        properties: {
          jobs: { type: 'array', items: { allOf: [ref('Job'), { required: ['attempts'] }] } },
          cursor: { type: 'string', description: 'Empty when there is no further page.' },
        },
        additionalProperties: false,
      },
      LogEntry: {
        type: 'object',
        required: ['timestamp', 'message', 'sequence_num', 'stream', 'event_id'],
        properties: {
          timestamp: dateTime,
          message: {
            type: 'string',
            description: 'The line as captured. In search results every match is wrapped as `__CV_HL_START_<highlight_token>__match__CV_HL_END_<highlight_token>__` (the page\'s token), as the reference implementation does.',
          },
          sequence_num: { type: 'integer', minimum: 0, description: 'Order of the line within the job attempt, from 0, shared by both streams.' },
          stream: { enum: ['stdout', 'stderr'] },
          event_id: { type: 'string', description: '`<job_id>:<attempt>:<sequence_num>`: stable and unique.' },
        },
        additionalProperties: false,
      },
      LogPage: {
        type: 'object',
        required: ['id', 'workflow_id', 'logs', 'cursor', 'highlight_token'],
        properties: {
          id: { ...uuid, description: 'The job id.' },
          workflow_id: uuid,
          logs: { type: 'array', items: ref('LogEntry'), description: 'Newest first (sequence_num descending).' },
          cursor: { type: 'string', description: 'Empty when there is no further page.' },
          highlight_token: {
            type: 'string',
            pattern: '^[0-9a-f]{32}$',
            description: 'Fresh per response, and found in none of the page\'s stored messages. In search results every match is wrapped as `__CV_HL_START_<token>__match__CV_HL_END_<token>__`; nothing else is inserted.',
          },
        },
        additionalProperties: false,
      },
      LogRange: {
        type: 'object',
        required: ['id', 'workflow_id', 'from', 'total', 'logs'],
        properties: {
          id: { ...uuid, description: 'The job id.' },
          workflow_id: uuid,
          from: { type: 'integer', minimum: 0, description: 'The first sequence_num asked for.' },
          total: {
            type: 'integer',
            minimum: 0,
            description: "Lines of the current attempt stored so far (its newest sequence_num + 1; 0 when none): sequence numbers 0 … total − 1 exist. Grows while the job runs.",
          },
          logs: { type: 'array', items: ref('LogEntry'), description: 'Oldest first (sequence_num ascending), from `from`, at most `limit`; messages as stored (no highlights).' },
        },
        additionalProperties: false,
      },
      LogDownloadEntry: {
        type: 'object',
        required: ['timestamp', 'sequence_num', 'stream', 'event_id', 'message_raw'],
        properties: {
          timestamp: dateTime,
          sequence_num: { type: 'integer', minimum: 0 },
          stream: { enum: ['stdout', 'stderr'] },
          event_id: { type: 'string' },
          message_raw: { type: 'string', description: 'The line exactly as captured.' },
          message_json: { description: 'Present when message_raw is valid JSON (any JSON value): that value.' },
        },
        additionalProperties: false,
      },
      LogDownload: {
        type: 'object',
        required: ['id', 'workflow_id', 'filters', 'logs'],
        properties: {
          id: { ...uuid, description: 'The job id.' },
          workflow_id: uuid,
          filters: {
            type: 'object',
            required: ['q', 'stream'],
            properties: {
              q: { type: 'string', description: 'The text filter; empty when none was given.' },
              stream: { enum: ['all', 'stdout', 'stderr'] },
            },
            additionalProperties: false,
          },
          logs: { type: 'array', items: ref('LogDownloadEntry'), description: 'Oldest first (sequence_num ascending).' },
        },
        additionalProperties: false,
      },
      Notification: {
        type: 'object',
        required: ['id', 'kind', 'payload', 'created_at', 'updated_at'],
        properties: {
          id: uuid,
          kind: {
            enum: [...NOTIFICATION_KINDS],
            description:
              'WEB_SUCCESS, WEB_INFO: routine (a build or job completed, a job canceled, a workflow terminated by its owner, a workflow recovered). WEB_ERROR, WEB_ALERT: something went wrong (a job or build failed, a workflow terminated automatically). Which of them change the workflow\'s state is said by the payload\'s `state_change`, not by the kind.',
          },
          payload: {
            type: 'string',
            description:
              'A JSON object encoded as a string: `title`, `message`, `entity_type` (`WORKFLOW` or `JOB`), `entity_id`, `workflow_id` and `action_url` (`/workflows/<id>` or `/workflows/<id>/jobs/<job id>`); on a state change also `state_change` (an addition to the contract): `down` (the failed job that turned the workflow down), `recovered` ("Workflow recovered": a job completed right after a failed run), `terminated` (terminated automatically at the failure limit) or `build_failed`. Absent on every other notification.',
          },
          read_at: { ...dateTime, description: 'Set once the notification was marked read (the first time).' },
          created_at: { ...dateTime, description: 'When the event it tells of happened.' },
          updated_at: dateTime,
        },
        additionalProperties: false,
      },
      NotificationPage: {
        type: 'object',
        required: ['notifications', 'cursor'],
        properties: {
          notifications: { type: 'array', items: ref('Notification'), description: 'Newest first; empty while the notification preference is NONE.' },
          cursor: { type: 'string', description: 'Empty when there is no further page.' },
        },
        additionalProperties: false,
      },
      MarkNotifications: {
        ...markNotificationsBody,
        properties: { ids: { ...markNotificationsBody.properties.ids, items: uuid } },
      },
      UserAnalytics: {
        type: 'object',
        required: ['total_workflows', 'total_jobs', 'total_joblogs', 'total_job_execution_duration', 'workflow_kinds', 'top_workflows'],
        properties: {
          total_workflows: { type: 'integer', minimum: 0, description: 'Workflows created, deleted ones included (their history stays).' },
          total_jobs: { type: 'integer', minimum: 0 },
          total_joblogs: { type: 'integer', minimum: 0 },
          total_job_execution_duration: { type: 'integer', minimum: 0 },
          workflow_kinds: {
            type: 'array',
            items: {
              type: 'object',
              required: ['kind', 'total_workflows', 'total_jobs', 'total_joblogs', 'total_job_execution_duration'],
              properties: {
                kind: { enum: [...WORKFLOW_KINDS] },
                total_workflows: { type: 'integer', minimum: 0 },
                total_jobs: { type: 'integer', minimum: 0 },
                total_joblogs: { type: 'integer', minimum: 0 },
                total_job_execution_duration: { type: 'integer', minimum: 0 },
              },
              additionalProperties: false,
            },
          },
          top_workflows: {
            type: 'array',
            maxItems: 10,
            description: 'By total_jobs, most first; ties by name.',
            items: {
              type: 'object',
              required: ['workflow_id', 'workflow_name', 'kind', 'total_jobs', 'total_joblogs', 'total_job_execution_duration'],
              properties: {
                workflow_id: uuid,
                workflow_name: { type: 'string', description: 'The current name, or `Deleted workflow` once the workflow was deleted.' },
                kind: { enum: [...WORKFLOW_KINDS] },
                total_jobs: { type: 'integer', minimum: 0 },
                total_joblogs: { type: 'integer', minimum: 0 },
                total_job_execution_duration: { type: 'integer', minimum: 0 },
              },
              additionalProperties: false,
            },
          },
        },
        additionalProperties: false,
      },
      WorkflowAnalytics: {
        type: 'object',
        required: ['workflow_id', 'total_jobs', 'total_joblogs', 'total_job_execution_duration'],
        properties: {
          workflow_id: uuid,
          total_jobs: { type: 'integer', minimum: 0 },
          total_joblogs: { type: 'integer', minimum: 0 },
          total_job_execution_duration: { type: 'integer', minimum: 0 },
        },
        additionalProperties: false,
      },
      ScheduleJob: scheduleJobBody,
      HeartbeatPayload: heartbeatPayloadSchema,
      ContainerPayload: containerPayloadSchema,
      // The validator's schema plus the rules checked after it (normalised email, 8 to 128 characters).
      Credentials: {
        ...credentialsBody,
        properties: {
          email: { type: 'string', format: 'email', maxLength: 254, description: 'Trimmed and lower-cased; at most 254 bytes.' },
          password: { type: 'string', minLength: 8, maxLength: 128 },
        },
      },
      Registration: {
        ...registerBody,
        properties: {
          email: { type: 'string', format: 'email', maxLength: 254, description: 'Trimmed and lower-cased; at most 254 bytes.' },
          password: { type: 'string', minLength: 8, maxLength: 128 },
          invitation: registerBody.properties.invitation,
        },
      },
      CreateWorkflow: createWorkflowBody,
      UpdateWorkflow: updateWorkflowBody,
      UpdateUser: updateUserBody,
    },
  },
  paths: {
    '/auth/register': {
      post: {
        summary: 'Create an account and sign in',
        requestBody: { required: true, content: json(ref('Registration')) },
        responses: {
          '201': { description: 'Created; sets the session and csrf cookies.', headers: setCookies, content: json(ref('User')) },
          ...invalid,
          '403': problem(
            'A cross-site origin (forbidden_origin); registration closed on this installation (registration_closed); or, when it registers by invitation, no invitation, or one not valid for this email or expired (invitation_invalid). The first account of an empty installation is always accepted.',
          ),
          '409': problem('The email is already registered.'),
          ...tooLarge,
          '429': rateLimited,
        },
      },
    },
    '/auth/login': {
      post: {
        summary: 'Sign in',
        requestBody: { required: true, content: json(ref('Credentials')) },
        responses: {
          '200': { description: 'Signed in; sets fresh cookies.', headers: setCookies, content: json(ref('User')) },
          ...invalid,
          '401': problem('Invalid credentials (identical for unknown email and wrong password).'),
          ...tooLarge,
          '429': rateLimited,
        },
      },
    },
    '/auth/validate': {
      post: {
        summary: 'Check the session and CSRF state',
        security: [{ session: [], csrf: [] }],
        responses: {
          '200': {
            description: 'Both are valid.',
            content: json({ type: 'object', required: ['email'], properties: { email: { type: 'string' } }, additionalProperties: false }),
          },
          ...mutating,
        },
      },
    },
    '/auth/logout': {
      post: {
        summary: 'Sign out: revokes the session and removes both cookies',
        security: [{ session: [], csrf: [] }],
        responses: {
          '204': { description: 'Signed out; both cookies are expired (Max-Age=0).', headers: setCookies },
          ...mutating,
        },
      },
    },
    '/users': {
      get: {
        summary: 'The signed-in user',
        security: [{ session: [] }],
        responses: { '200': { description: 'The user.', content: json(ref('User')) }, ...common },
      },
      put: {
        summary: 'Update the notification preference',
        security: [{ session: [], csrf: [] }],
        requestBody: { required: true, content: json(ref('UpdateUser')) },
        responses: { '204': { description: 'Updated.' }, ...invalid, ...mutating, ...tooLarge },
      },
    },
    '/workflows': {
      post: {
        summary: 'Create a workflow',
        security: [{ session: [], csrf: [] }],
        parameters: [idempotencyKey],
        requestBody: { required: true, content: json(ref('CreateWorkflow')) },
        responses: {
          '201': { description: 'Created.', headers: replayed, content: json(ref('Created')) },
          ...invalid,
          ...mutating,
          '409': problem(
            'Idempotency-Key reused for a different request, or (code `workflow_limit_reached`) the user already owns MAX_WORKFLOWS_PER_USER workflows.',
          ),
          ...tooLarge,
        },
      },
      get: {
        summary: 'List workflows, newest first',
        security: [{ session: [] }],
        parameters: [
          cursorParam,
          { name: 'query', in: 'query', description: 'Case-insensitive literal substring of the name.', schema: { type: 'string' } },
          { name: 'kind', in: 'query', schema: { enum: [...WORKFLOW_KINDS] } },
          { name: 'build_status', in: 'query', schema: { enum: [...BUILD_STATUSES] } },
          { name: 'terminated', in: 'query', schema: { type: 'boolean', default: false } },
          {
            name: 'include_terminated',
            in: 'query',
            description: 'true: active and terminated workflows together; not combined with terminated.',
            schema: { type: 'boolean', default: false },
          },
          includeParam,
          { name: 'interval_min', in: 'query', schema: { type: 'integer', minimum: 0, maximum: 2147483647 } },
          { name: 'interval_max', in: 'query', schema: { type: 'integer', minimum: 0, maximum: 2147483647 } },
          { name: 'limit', in: 'query', schema: { type: 'integer', minimum: 1, maximum: 100, default: 20 } },
        ],
        responses: { '200': { description: 'A page.', content: json(ref('WorkflowPage')) }, ...invalid, ...common },
      },
    },
    '/workflows/{workflow_id}': {
      parameters: [workflowIdParam],
      get: {
        summary: 'Read a workflow',
        security: [{ session: [] }],
        parameters: [includeParam],
        responses: {
          '200': { description: 'The workflow, with generation.', content: json(ref('Workflow')) },
          ...invalid,
          ...common,
          '404': problem('No such workflow of yours.'),
        },
      },
      put: {
        summary: 'Update (and reactivate) a workflow',
        security: [{ session: [], csrf: [] }],
        parameters: [idempotencyKey],
        requestBody: { required: true, content: json(ref('UpdateWorkflow')) },
        responses: {
          '204': { description: 'Updated.', headers: replayed },
          ...invalid,
          ...mutating,
          '404': problem('No such workflow of yours.'),
          '409': problem('Idempotency-Key reused for a different request.'),
          ...tooLarge,
        },
      },
      patch: {
        summary: 'Terminate a workflow',
        security: [{ session: [], csrf: [] }],
        responses: {
          '204': { description: 'Terminated.' },
          ...invalid,
          ...mutating,
          '404': problem('No such workflow of yours.'),
          '412': problem('Already terminated (code workflow_terminated).'),
        },
      },
      delete: {
        summary: 'Delete a terminated workflow',
        security: [{ session: [], csrf: [] }],
        responses: {
          '204': { description: 'Deleted.' },
          ...invalid,
          ...mutating,
          '404': problem('No such workflow of yours.'),
          '412': problem('Still active (workflow_active) or has a running job (workflow_has_running_jobs).'),
        },
      },
    },
    '/workflows/{workflow_id}/jobs': {
      parameters: [workflowIdParam],
      get: {
        summary: "List a workflow's jobs, newest first (scheduled_at, then id)",
        security: [{ session: [] }],
        parameters: [
          cursorParam,
          { name: 'status', in: 'query', description: 'Exact match.', schema: { enum: [...JOB_STATUSES] } },
          { name: 'trigger', in: 'query', description: 'Exact match.', schema: { enum: [...JOB_TRIGGERS] } },
          { name: 'limit', in: 'query', schema: { type: 'integer', minimum: 1, maximum: 100, default: 20 } },
        ],
        responses: {
          '200': { description: 'A page; jobs carry attempts, and container_id once set.', content: json(ref('JobPage')) },
          ...invalid,
          ...common,
          '404': problem('No such workflow of yours.'),
        },
      },
    },
    '/workflows/{workflow_id}/jobs/schedule': {
      parameters: [workflowIdParam],
      post: {
        summary: 'Schedule a manual run now',
        description:
          'Creates a PENDING MANUAL job due now. It waits while another job of the workflow runs, and does not move the automatic schedule.',
        security: [{ session: [], csrf: [] }],
        parameters: [idempotencyKey],
        requestBody: { required: false, content: json(ref('ScheduleJob')) },
        responses: {
          '201': { description: 'Scheduled; the id of the new job.', headers: replayed, content: json(ref('Created')) },
          ...invalid,
          ...mutating,
          '404': problem('No such workflow of yours.'),
          '409': problem('Idempotency-Key reused for a different request.'),
          '412': problem('The workflow is terminated (workflow_terminated) or its build failed (workflow_build_failed).'),
          ...tooLarge,
        },
      },
    },
    '/workflows/{workflow_id}/jobs/{job_id}': {
      parameters: [workflowIdParam, jobIdParam],
      get: {
        summary: 'Read a job',
        security: [{ session: [] }],
        responses: {
          '200': {
            description: 'The job, without container_id and attempts.',
            content: json({ allOf: [ref('Job'), { not: { anyOf: [{ required: ['container_id'] }, { required: ['attempts'] }] } }] }),
          },
          ...invalid,
          ...common,
          '404': problem('No such job of this workflow of yours.'),
        },
      },
    },
    '/workflows/{workflow_id}/jobs/{job_id}/logs': {
      parameters: [workflowIdParam, jobIdParam],
      get: {
        summary: "List a job's log lines, newest first",
        description: "The lines of the job's current attempt. Cursors are bound to the job and that attempt.",
        security: [{ session: [] }],
        parameters: [cursorParam, logLimitParam],
        responses: {
          '200': { description: 'A page.', content: json(ref('LogPage')) },
          ...invalid,
          ...common,
          '404': problem('No such job of this workflow of yours.'),
          '412': problem('The workflow does not retain logs (log_retention_disabled): every HEARTBEAT workflow, CONTAINER with log_retention off.'),
        },
      },
    },
    '/workflows/{workflow_id}/jobs/{job_id}/logs/search': {
      parameters: [workflowIdParam, jobIdParam],
      get: {
        summary: "Search a job's log lines, newest first, with highlights",
        security: [{ session: [] }],
        parameters: [cursorParam, logLimitParam, logQueryParam('Each match is wrapped in `__CV_HL_START_<highlight_token>__` and `__CV_HL_END_<highlight_token>__`.'), logStreamParam],
        responses: {
          '200': { description: 'A page of matching lines; every match is wrapped in the start and end markers built from highlight_token.', content: json(ref('LogPage')) },
          ...invalid,
          ...common,
          '404': problem('No such job of this workflow of yours.'),
          '412': problem('The workflow does not retain logs (log_retention_disabled).'),
        },
      },
    },
    '/workflows/{workflow_id}/jobs/{job_id}/logs/lines': {
      parameters: [workflowIdParam, jobIdParam],
      get: {
        summary: "Read a job's log lines by position, oldest first",
        description:
          "An addition to the contract: the lines of the job's current attempt from sequence_num `from`, with the number stored so far, so a viewer can open a log at its end, jump to any line, or show a search hit among the lines around it. Works while the job runs.",
        security: [{ session: [] }],
        parameters: [
          { name: 'from', in: 'query', description: 'The first sequence_num to return.', schema: { type: 'integer', minimum: 0, maximum: 2147483647, default: 0 } },
          logLimitParam,
        ],
        responses: {
          '200': { description: 'The lines from `from` (fewer than `limit`, or none, past the end) and `total`.', content: json(ref('LogRange')) },
          ...invalid,
          ...common,
          '404': problem('No such job of this workflow of yours.'),
          '412': problem('The workflow does not retain logs (log_retention_disabled).'),
        },
      },
    },
    '/workflows/{workflow_id}/jobs/{job_id}/logs/raw': {
      parameters: [workflowIdParam, jobIdParam],
      get: {
        summary: "Download a finished job's log, oldest first",
        description:
          'Streamed from the store in sequence_num order. txt: each message followed by a line feed; jsonl: one LogDownloadEntry per line, each followed by a line feed; json: one LogDownload document.',
        security: [{ session: [] }],
        parameters: [
          { name: 'format', in: 'query', schema: { enum: ['txt', 'json', 'jsonl'], default: 'txt' } },
          logStreamParam,
          logQueryParam('No highlights in downloads.'),
        ],
        responses: {
          '200': {
            description:
              'The log, as an attachment named `<job_id>.<format>`: text/plain for txt, application/x-ndjson (one LogDownloadEntry per line) for jsonl, application/json (a LogDownload) for json.',
            headers: {
              'Content-Disposition': {
                description: '`attachment; filename="<job_id>.<format>"`',
                required: true,
                schema: { type: 'string', pattern: '^attachment; filename="[0-9a-f-]{36}\\.(txt|json|jsonl)"$' },
              },
            },
            content: {
              'text/plain': {},
              'application/json': { schema: ref('LogDownload') },
              'application/x-ndjson': {},
            },
          },
          '400': problem('Invalid format, stream, q or path parameter; or the job is not terminal yet (job_not_terminal).'),
          ...common,
          '404': problem('No such job of this workflow of yours.'),
          '412': problem('The workflow does not retain logs (log_retention_disabled).'),
        },
      },
    },
    '/workflows/{workflow_id}/jobs/{job_id}/events': {
      parameters: [workflowIdParam, jobIdParam],
      get: {
        summary: "Live tail of a job's log (server-sent events)",
        description: [
          'Events: `connected` (first; data `{id, workflow_id}`), one `log` per line (`id:` = sequence_num, data = a LogEntry),',
          '`end` once the job is terminal and every line was sent (data `{id, workflow_id, status}`), then the stream closes.',
          'A refused open is a 200 stream with a single `error` event whose data is a problem document',
          '(404 `not_found`, 412 `log_retention_disabled`), then the stream closes.',
          'Lines after `Last-Event-ID` (or else `since`) are replayed from the store first; without either, every stored line is.',
          'Comment lines keep the stream alive every 15 s. At most 5 concurrent streams per client address (the sixth is 429).',
        ].join(' '),
        security: [{ session: [] }],
        parameters: [
          {
            name: 'since',
            in: 'query',
            description: 'Replay lines with a sequence_num above this one. Last-Event-ID wins when both are sent.',
            schema: { type: 'integer', minimum: 0, maximum: 2147483647 },
          },
          {
            name: 'lastEventId',
            in: 'query',
            description: 'The same as Last-Event-ID, for EventSource polyfills that send it in the URL. Last-Event-ID wins when both are sent; this wins over since.',
            schema: { type: 'integer', minimum: 0, maximum: 2147483647 },
          },
          {
            name: 'Last-Event-ID',
            in: 'header',
            description: 'The id of the last `log` event received (EventSource sends it when it reconnects).',
            schema: { type: 'string', pattern: '^\\d{1,10}$' },
          },
        ],
        responses: {
          '200': { description: 'The event stream.', content: { 'text/event-stream': {} } },
          '204': {
            description:
              'A reconnect (Last-Event-ID or lastEventId) to a job that has ended, with no line after that id: nothing to send. EventSource stops reconnecting on 204. The `end` event carries the id of the last line (0 when there are none) for this.',
          },
          '400': problem('Invalid path parameter, since, lastEventId or Last-Event-ID.'),
          '401': common['401'],
          '429': {
            ...rateLimited,
            description: 'Rate limit exceeded, or 5 streams from this client address are open already.',
          },
        },
      },
    },
    '/notifications': {
      get: {
        summary: 'List notifications, newest first',
        description:
          'Unread ones only, as the reference implementation lists them, unless include_read=true (then read ones too, carrying read_at). Empty while the notification preference is NONE (they are still recorded).',
        security: [{ session: [] }],
        parameters: [
          cursorParam,
          {
            name: 'include_read',
            in: 'query',
            description: 'An addition to the contract. true: read notifications too (a history); false or absent: unread ones only.',
            schema: { type: 'boolean', default: false },
          },
          {
            name: 'unread',
            in: 'query',
            description: 'true: unread ones only (the default, accepted as such); false: read ones too, like include_read=true. Contradicting include_read is 400.',
            schema: { type: 'boolean', default: true },
          },
          {
            name: 'kind',
            in: 'query',
            description: `Only these kinds, comma-separated (e.g. WEB_ALERT,WEB_ERROR); every kind when absent. Kinds: ${NOTIFICATION_KINDS.join(', ')}.`,
            schema: { type: 'string', pattern: `^(${NOTIFICATION_KINDS.join('|')})(,(${NOTIFICATION_KINDS.join('|')}))*$` },
          },
          {
            name: 'state_change',
            in: 'query',
            description: `An addition to the contract. true: only state changes (payload \`state_change\` one of ${NOTIFICATION_STATE_CHANGES.join(', ')}); false: only the other notifications; both when absent. Combines with include_read, unread, kind and the cursor.`,
            schema: { type: 'boolean' },
          },
          { name: 'limit', in: 'query', schema: { type: 'integer', minimum: 1, maximum: 100, default: 50 } },
        ],
        responses: { '200': { description: 'A page.', content: json(ref('NotificationPage')) }, ...invalid, ...common },
      },
      put: {
        summary: 'Mark notifications read, all or none',
        description: 'A repeated id is ignored. Already-read notifications keep their first read_at.',
        security: [{ session: [], csrf: [] }],
        requestBody: { required: true, content: json(ref('MarkNotifications')) },
        responses: {
          '204': { description: 'Every listed notification is read.' },
          ...invalid,
          ...mutating,
          '404': problem('An id is missing or another user\'s; no notification was changed.'),
          ...tooLarge,
        },
      },
    },
    '/analytics': {
      get: {
        summary: "The signed-in user's analytics",
        description: 'Counters kept from domain events; eventually consistent (docs/notifications.md).',
        security: [{ session: [] }],
        responses: { '200': { description: 'The totals.', content: json(ref('UserAnalytics')) }, ...common },
      },
    },
    '/analytics/{workflow_id}': {
      parameters: [workflowIdParam],
      get: {
        summary: "A workflow's analytics",
        description: 'A deleted workflow of yours still answers with its final totals.',
        security: [{ session: [] }],
        responses: {
          '200': { description: 'The totals.', content: json(ref('WorkflowAnalytics')) },
          ...invalid,
          ...common,
          '404': problem('The workflow never was yours.'),
        },
      },
    },
    '/openapi.json': {
      get: {
        summary: 'This document',
        responses: {
          '200': {
            description: 'OpenAPI 3.1 document.',
            content: json({ type: 'object', required: ['openapi', 'info', 'paths'], properties: { openapi: { const: '3.1.0' } } }),
          },
          '429': rateLimited,
        },
      },
    },
  },
} as const;
