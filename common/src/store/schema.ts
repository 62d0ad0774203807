import type { Generated, GeneratedAlways, Selectable } from 'kysely';
import type { CatchUpPolicy, FirstRun, OverlapPolicy } from '../domain/run-policy.js';

/**
 * Table shapes as both engines store them. Timestamps are integer epoch
 * milliseconds and booleans are 0/1 integers in both PostgreSQL and SQLite, so
 * one query and one row mapping serve both (see docs/adr/0002).
 */
export interface UsersTable {
  id: string;
  email: string;
  password_hash: string;
  notification_preference: 'ALL' | 'NONE';
  created_at: number;
  updated_at: number;
  /** Rows in `workflows` with this user_id, kept by createWorkflow and deleteWorkflow (lifecycle.ts). */
  workflow_count: Generated<number>;
}

export interface SessionsTable {
  id: string;
  user_id: string;
  created_at: number;
  expires_at: number;
  revoked_at: number | null;
}

export interface WorkflowsTable {
  id: string;
  user_id: string;
  name: string;
  /** lower-cased name for case-insensitive substring search */
  name_folded: string;
  payload: string;
  kind: 'HEARTBEAT' | 'CONTAINER';
  build_status: 'QUEUED' | 'STARTED' | 'COMPLETED' | 'FAILED' | 'CANCELED';
  interval_minutes: number;
  consecutive_job_failures_count: number;
  max_consecutive_job_failures_allowed: number;
  log_retention: number;
  generation: number;
  created_at: number;
  updated_at: number;
  terminated_at: number | null;
  build_completed_at: number | null;
  next_due_at: number | null;
  build_token: Generated<number>;
  build_requested_at: number | null;
  skipped_slots: Generated<number>;
  last_slot_skipped_at: Generated<number | null>;
  // ---- issue 26 (migration 0018): build errors, alert policy ----
  /** Why the current generation's build failed; null unless it did. */
  build_error_code: Generated<string | null>;
  build_error_message: Generated<string | null>;
  /** Down after this many consecutive failed runs, up after `recover_after_successes` completed ones. */
  alert_after_failures: Generated<number>;
  recover_after_successes: Generated<number>;
  /** 1 while down by that policy. */
  alert_down: Generated<number>;
  cron: Generated<string | null>;
  timezone: Generated<string>;
  jitter_seconds: Generated<number>;
  /** Migration 0029: the offset its slots move by, in ms (domain/jitter.ts). */
  jitter_offset_ms: Generated<number>;
  paused_at: Generated<number | null>;
  /** Migration 0021: the run policy (domain/run-policy.ts). */
  overlap_policy: Generated<OverlapPolicy>;
  catch_up_policy: Generated<CatchUpPolicy>;
  first_run: Generated<FirstRun>;
  /** Migration 0019: generated from the columns above (domain/attention.ts); never written. */
  attention: GeneratedAlways<number>;
}

export interface JobsTable {
  id: string;
  workflow_id: string;
  user_id: string;
  generation: number;
  trigger: 'AUTOMATIC' | 'MANUAL';
  status: 'PENDING' | 'QUEUED' | 'RUNNING' | 'COMPLETED' | 'FAILED' | 'CANCELED';
  slot_at: number;
  scheduled_at: number;
  attempts: number;
  queued_at: number | null;
  dispatched_at: Generated<number | null>;
  runner_id: string | null;
  lease_expires_at: number | null;
  stop_requested_at: number | null;
  container_id: string | null;
  started_at: number | null;
  completed_at: number | null;
  status_reason_code: string | null;
  status_reason_message: string | null;
  created_at: number;
  updated_at: number;
  /** 1 once the job's log reached the per-job cap (migration 0009). */
  log_truncated: Generated<number>;
  /** HEARTBEAT jobs: what the request did (migration 0012). */
  check_status_code: number | null;
  check_response_ms: number | null;
  check_failure: string | null;
  /** MANUAL jobs: the api request that created them (migration 0014). */
  request_id: string | null;
}

export interface JobLogsTable {
  job_id: string;
  attempt: number;
  sequence_num: number;
  stream: 'stdout' | 'stderr';
  message: string;
  timestamp: number;
}

export interface JobLogCountsTable {
  job_id: string;
  attempt: number;
  workflow_id: string;
  user_id: string;
  lines: number;
}

/** The log search skip index (migration 0013, docs/adr/0007). */
export interface JobLogBlocksTable {
  job_id: string;
  attempt: number;
  block_num: number;
  seq_from: number;
  seq_to: number;
  bloom: Uint8Array;
}

export interface LeasesTable {
  name: string;
  holder: string;
  fencing_token: number;
  expires_at: number;
}

export interface IdempotencyKeysTable {
  user_id: string;
  key: string;
  fingerprint: string;
  response_status: number | null;
  response_body: string | null;
  created_at: number;
  expires_at: number;
}

/** The outbox: events written with the state change that caused them (docs/notifications.md). */
export interface DomainEventsTable {
  /** The event's deterministic identity, e.g. `job.failed:<job id>`. */
  id: string;
  kind: string;
  user_id: string;
  workflow_id: string;
  /** JSON of the kind's details (DomainEventData). */
  data: string;
  occurred_at: number;
  next_attempt_at: number;
  published_at: number | null;
}

export interface AppliedEventsTable {
  id: string;
  applied_at: number;
}

export interface NotificationsTable {
  id: string;
  user_id: string;
  workflow_id: string;
  dedupe_key: string;
  kind: string;
  /** down, recovered, terminated, build_failed; null when not a state change (migration 0015) */
  state_change: string | null;
  payload: string;
  read_at: number | null;
  created_at: number;
  updated_at: number;
}

export interface WorkflowStatsTable {
  workflow_id: string;
  user_id: string;
  kind: 'HEARTBEAT' | 'CONTAINER';
  total_jobs: Generated<number>;
  total_duration_s: Generated<number>;
  deleted_at: number | null;
}

/** Moved by triggers whenever a user's workflow list would read differently (migration 0007). */
export interface WorkflowListVersionsTable {
  user_id: string;
  version: number;
}

/** A down period of a workflow (migration 0018, docs/adr/0016-incidents.md). */
export interface IncidentsTable {
  id: string;
  user_id: string;
  workflow_id: string;
  opened_by_job_id: string;
  /** When the first failed run of the streak that turned the workflow down finished. */
  started_at: number;
  opened_at: number;
  closed_at: number | null;
  /** 'recovered' or 'terminated' once closed. */
  resolution: string | null;
  first_failure_job_id: string;
  first_failure_code: string | null;
  first_failure_message: string | null;
  failed_runs: number;
  acknowledged_by: string | null;
  acknowledged_at: number | null;
  snoozed_until: number | null;
  updated_at: number;
}

/** Per workflow and UTC hour: its finished runs, failures and response-time histogram up to the end of that hour, running totals (migrations 0018, 0023; repos/rollups.repo.ts). */
export interface WorkflowRollupsTable extends Record<RollupBucketColumn, number> {
  workflow_id: string;
  hour_at: number;
  user_id: string;
  runs: number;
  failures: number;
}

/** A histogram bucket's index: one per bound of ROLLUP_BOUNDS_MS, and one past the last. */
export type RollupBucket = 0 | 1 | 2 | 3 | 4 | 5 | 6 | 7 | 8 | 9 | 10 | 11 | 12 | 13 | 14 | 15 | 16 | 17 | 18 | 19 | 20 | 21 | 22 | 23 | 24 | 25 | 26;

/** The histogram, one count a bucket (migration 0026; JSON text before). */
export type RollupBucketColumn = `bucket_${RollupBucket}`;

/** An attempt that ended without ending its job (migration 0022, repos/job-attempts.repo.ts). */
export interface JobAttemptsTable {
  job_id: string;
  attempt: number;
  runner_id: string | null;
  started_at: number | null;
  ended_at: number;
  /** Why the attempt was given up: an AttemptEndCode (domain/job-attempts.ts). */
  end_code: string;
  end_message: string;
}

/** A period the scheduler leader ran (migration 0022, repos/uptime.repo.ts). */
export interface OrlojUptimeTable {
  started_at: number;
  last_seen_at: number;
}

/** A maintenance window or a workflow's snooze (migration 0020, domain/maintenance-window.ts). */
export interface MaintenanceWindowsTable {
  id: string;
  user_id: string;
  name: string;
  /** 'skip' or 'mute'. */
  mode: string;
  /** 1 for a workflow's snooze (at most one a workflow). */
  snooze: Generated<number>;
  /** Exactly one of workflow_id and workflow_query is set. */
  workflow_id: string | null;
  workflow_query: string | null;
  /** A one-off window's span; null for a recurring one. */
  starts_at: number | null;
  ends_at: number | null;
  /** A recurring window's start instants (cron in time_zone) and length; null for a one-off one. */
  cron: string | null;
  time_zone: string | null;
  duration_minutes: number | null;
  created_at: number;
  updated_at: number;
}

export interface Database {
  users: UsersTable;
  sessions: SessionsTable;
  workflows: WorkflowsTable;
  idempotency_keys: IdempotencyKeysTable;
  jobs: JobsTable;
  job_logs: JobLogsTable;
  job_log_counts: JobLogCountsTable;
  job_log_blocks: JobLogBlocksTable;
  leases: LeasesTable;
  domain_events: DomainEventsTable;
  applied_events: AppliedEventsTable;
  notifications: NotificationsTable;
  workflow_stats: WorkflowStatsTable;
  workflow_list_versions: WorkflowListVersionsTable;
  incidents: IncidentsTable;
  workflow_rollups: WorkflowRollupsTable;
  job_attempts: JobAttemptsTable;
  orloj_uptime: OrlojUptimeTable;
  maintenance_windows: MaintenanceWindowsTable;
}

export type { Generated, Selectable };
