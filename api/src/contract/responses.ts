import {
  BUILD_STATUSES,
  CATCH_UP_POLICIES,
  CHECK_FAILURES,
  FAILURE_LIMIT_MAX,
  FAILURE_LIMIT_MIN,
  FIRST_RUNS,
  ALERT_POLICY_MIN,
  ALERT_POLICY_MAX,
  ALERT_POLICY_DEFAULT,
  ATTENTION_STATES,
  HEALTH_STATES,
  INTERVAL_MAX,
  INTERVAL_MIN,
  JITTER_MAX_SECONDS,
  JOB_STATUSES,
  JOB_TRIGGERS,
  OVERLAP_POLICIES,
  REASON_CODES,
  RECENT_RUNS,
  WORKFLOW_KINDS,
} from '@orloj/common/domain';
import { NOTIFICATION_KINDS, TOP_WORKFLOWS } from '@orloj/common/store';
import { named, ref } from './components.js';

/**
 * The response bodies' schemas: what the document publishes and what the
 * presenters (http/present.ts) are typed from. snake_case, RFC 3339 UTC
 * timestamps, unset optionals omitted.
 */
export const dateTime = { type: 'string', format: 'date-time' } as const;
export const uuid = { type: 'string', format: 'uuid' } as const;

export const problemSchema = named('Problem', {
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
} as const);

export const userSchema = named('User', {
  type: 'object',
  required: ['email', 'notification_preference', 'created_at', 'updated_at'],
  properties: {
    email: { type: 'string', format: 'email' },
    notification_preference: { enum: ['ALL', 'NONE'] },
    created_at: dateTime,
    updated_at: dateTime,
  },
  additionalProperties: false,
} as const);

export const checkSchema = named('Check', {
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
} as const);

export const runSchema = named('Run', {
  type: 'object',
  description: 'A finished run.',
  required: ['job_id', 'status', 'scheduled_at'],
  properties: {
    job_id: uuid,
    status: { enum: ['COMPLETED', 'FAILED', 'CANCELED'] },
    scheduled_at: dateTime,
    completed_at: dateTime,
    check: ref(checkSchema),
  },
  additionalProperties: false,
} as const);

export const workflowHealthSchema = named('WorkflowHealth', {
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
    last_run: ref(runSchema, { description: 'The latest run that COMPLETED or FAILED.' }),
    next_run_at: { ...dateTime, description: 'When the next run is due; absent when none will be. In the past when late.' },
    recent_runs: { type: 'array', maxItems: RECENT_RUNS, items: ref(runSchema), description: 'Newest first.' },
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
} as const);

export const workflowSchema = named('Workflow', {
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
    interval: { type: 'integer', minimum: INTERVAL_MIN, maximum: INTERVAL_MAX },
    consecutive_job_failures_count: { type: 'integer', minimum: 0 },
    max_consecutive_job_failures_allowed: { type: 'integer', minimum: FAILURE_LIMIT_MIN, maximum: FAILURE_LIMIT_MAX },
    created_at: dateTime,
    updated_at: dateTime,
    terminated_at: dateTime,
    log_retention: { type: 'boolean' },
    generation: { type: 'integer', minimum: 0, description: 'Only in the single-workflow read; +1 on every PUT.' },
    health: ref(workflowHealthSchema, { description: 'Only with include=health.' }),
    skipped_slots: {
      type: 'integer',
      minimum: 0,
      description:
        'Only in the single-workflow read: due slots that never got a job of their own (the previous job still ran, the runners were behind, or orloj was down; only the most recent missed slot runs).',
    },
    last_slot_skipped_at: { ...dateTime, description: 'Only in the single-workflow read, once a slot was skipped: when the last one was.' },
    // ---- issue 26: build errors, alert policy (additions to the contract) ----
    build_error: {
      type: ['string', 'null'],
      description: 'Why the current generation\'s build failed (a fixed, user-safe sentence, e.g. "The container image could not be found or pulled."); null unless `build_status` is FAILED. An addition to the contract.',
    },
    build_error_code: {
      type: ['string', 'null'],
      description: 'The reason code of `build_error` (e.g. IMAGE_PULL_FAILED, SYSTEM_ERROR); null with it.',
    },
    alert_after_failures: {
      type: 'integer',
      minimum: ALERT_POLICY_MIN,
      maximum: ALERT_POLICY_MAX,
      description: `Alert policy: the workflow is down (a state change, an incident) after this many consecutive failed runs. Default ${ALERT_POLICY_DEFAULT}. An addition to the contract.`,
    },
    recover_after_successes: {
      type: 'integer',
      minimum: ALERT_POLICY_MIN,
      maximum: ALERT_POLICY_MAX,
      description: `Alert policy: a down workflow is up again (its incident closes) after this many consecutive completed runs. Default ${ALERT_POLICY_DEFAULT}. An addition to the contract.`,
    },
    cron: { type: ['string', 'null'], description: 'The cron expression the workflow runs on (read in `timezone`), or null: every `interval` minutes.' },
    timezone: { type: 'string', description: 'IANA time zone of `cron`.' },
    jitter_seconds: { type: 'integer', minimum: 0, maximum: JITTER_MAX_SECONDS },
    paused_at: { type: ['string', 'null'], format: 'date-time', description: 'When the workflow was paused (no automatic runs until resumed), or null.' },
    overlap_policy: { enum: [...OVERLAP_POLICIES], description: 'A slot that comes while the previous run still goes: run once right after it (`run_after`) or not at all (`skip`). An addition to the contract.' },
    catch_up_policy: { enum: [...CATCH_UP_POLICIES], description: 'After downtime: run the most recent missed slot (`latest`) or none (`none`). An addition to the contract.' },
    first_run: { enum: [...FIRST_RUNS], description: 'The first run: at the first slot after the build (`at_first_slot`) or right after each build (`now`). An addition to the contract.' },
    attention: {
      enum: [...ATTENTION_STATES],
      description: 'How much the workflow needs attention, by its alert policy as the bell (docs/api.md, "Attention"); what sort=attention orders by. An addition to the contract.',
    },
  },
  additionalProperties: false,
} as const);

/** `GET /workflows/{id}/slots` (ADR 0015): each automatic slot in a range and what became of it. */
export const attentionSummarySchema = named('AttentionSummary', {
  type: 'object',
  required: ['attention', 'total'],
  properties: {
    attention: {
      type: 'object',
      description: 'Workflows per attention state.',
      required: [...ATTENTION_STATES],
      properties: Object.fromEntries(ATTENTION_STATES.map((s) => [s, { type: 'integer', minimum: 0 }])) as Record<(typeof ATTENTION_STATES)[number], { type: 'integer'; minimum: 0 }>,
      additionalProperties: false,
    },
    total: { type: 'integer', minimum: 0, description: 'All of the user\'s workflows, terminated ones included.' },
  },
  additionalProperties: false,
} as const);

export const workflowPageSchema = named('WorkflowPage', {
  type: 'object',
  required: ['workflows', 'cursor'],
  properties: {
    workflows: { type: 'array', items: ref(workflowSchema) },
    cursor: { type: 'string', description: 'Empty when there is no further page.' },
  },
  additionalProperties: false,
} as const);

export const createdSchema = named('Created', { type: 'object', required: ['id'], properties: { id: uuid }, additionalProperties: false } as const);
export const jobSchema = named('Job', {
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
    check: ref(checkSchema, { description: 'HEARTBEAT jobs that ran their request.' }),
  },
  additionalProperties: false,
  // The reason fields are present exactly when the job FAILED or was CANCELED.
  if: { properties: { status: { enum: ['FAILED', 'CANCELED'] } } },
  then: { required: ['status_reason_code', 'status_reason_message'] },
  else: { not: { anyOf: [{ required: ['status_reason_code'] }, { required: ['status_reason_message'] }] } },
} as const);

export const jobPageSchema = named('JobPage', {
  type: 'object',
  required: ['jobs', 'cursor'],
  properties: {
    jobs: { type: 'array', items: { allOf: [ref(jobSchema), { required: ['attempts'] }] } },
    cursor: { type: 'string', description: 'Empty when there is no further page.' },
  },
  additionalProperties: false,
} as const);

export const logEntrySchema = named('LogEntry', {
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
} as const);

export const logPageSchema = named('LogPage', {
  type: 'object',
  required: ['id', 'workflow_id', 'logs', 'cursor', 'highlight_token'],
  properties: {
    id: { ...uuid, description: 'The job id.' },
    workflow_id: uuid,
    logs: { type: 'array', items: ref(logEntrySchema), description: 'Newest first (sequence_num descending).' },
    cursor: { type: 'string', description: 'Empty when there is no further page.' },
    highlight_token: {
      type: 'string',
      pattern: '^[0-9a-f]{32}$',
      description: 'Fresh per response, and found in none of the page\'s stored messages. In search results every match is wrapped as `__CV_HL_START_<token>__match__CV_HL_END_<token>__`; nothing else is inserted.',
    },
  },
  additionalProperties: false,
} as const);

export const logRangeSchema = named('LogRange', {
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
    logs: { type: 'array', items: ref(logEntrySchema), description: 'Oldest first (sequence_num ascending), from `from`, at most `limit`; messages as stored (no highlights).' },
  },
  additionalProperties: false,
} as const);

export const logDownloadEntrySchema = named('LogDownloadEntry', {
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
} as const);

export const logDownloadSchema = named('LogDownload', {
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
    logs: { type: 'array', items: ref(logDownloadEntrySchema), description: 'Oldest first (sequence_num ascending).' },
  },
  additionalProperties: false,
} as const);

export const notificationSchema = named('Notification', {
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
} as const);

export const notificationPageSchema = named('NotificationPage', {
  type: 'object',
  required: ['notifications', 'cursor'],
  properties: {
    notifications: { type: 'array', items: ref(notificationSchema), description: 'Newest first; empty while the notification preference is NONE.' },
    cursor: { type: 'string', description: 'Empty when there is no further page.' },
  },
  additionalProperties: false,
} as const);

export const userAnalyticsSchema = named('UserAnalytics', {
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
      maxItems: TOP_WORKFLOWS,
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
} as const);

export const workflowAnalyticsSchema = named('WorkflowAnalytics', {
  type: 'object',
  required: ['workflow_id', 'total_jobs', 'total_joblogs', 'total_job_execution_duration'],
  properties: {
    workflow_id: uuid,
    total_jobs: { type: 'integer', minimum: 0 },
    total_joblogs: { type: 'integer', minimum: 0 },
    total_job_execution_duration: { type: 'integer', minimum: 0 },
  },
  additionalProperties: false,
} as const);
