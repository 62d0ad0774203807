import { toIso } from '@orloj/common/core';
import {
  attentionOf,
  checkToMessage,
  reasons,
  type AttemptView,
  type CheckResult,
  type Job,
  type RunSummary,
  type WorkflowHealth,
  type WorkflowSummary,
} from '@orloj/common/domain';
import { logEventId } from '@orloj/common/messages';
import { DELETED_WORKFLOW_NAME, type LogLine, type Notification, type User, type UserTotals, type WorkflowTotals } from '@orloj/common/store';
import type { Wire } from '../contract/components.js';
import type { attemptListSchema } from '../contract/attempt-responses.js';
import type {
  checkSchema,
  jobSchema,
  logEntrySchema,
  notificationSchema,
  runSchema,
  userAnalyticsSchema,
  userSchema,
  workflowAnalyticsSchema,
  workflowHealthSchema,
  workflowSchema,
} from '../contract/responses.js';

/** Wire shapes, each typed from the response schema the document publishes (contract/responses.ts). */
export function presentUser(u: User): Wire<typeof userSchema> {
  return {
    email: u.email,
    notification_preference: u.notificationPreference,
    created_at: toIso(u.createdAt),
    updated_at: toIso(u.updatedAt),
  };
}

/** A workflow; the single read adds its `generation` and its skipped slots. */
export function presentWorkflow(
  w: WorkflowSummary,
  options: { generation?: number; skipped?: { count: number; lastAt: number | null } } = {},
): Wire<typeof workflowSchema> {
  return {
    id: w.id,
    name: w.name,
    payload: w.payload,
    kind: w.kind,
    build_status: w.buildStatus,
    interval: w.intervalMinutes,
    consecutive_job_failures_count: w.consecutiveJobFailuresCount,
    max_consecutive_job_failures_allowed: w.maxConsecutiveJobFailuresAllowed,
    created_at: toIso(w.createdAt),
    updated_at: toIso(w.updatedAt),
    ...(w.terminatedAt !== null ? { terminated_at: toIso(w.terminatedAt) } : {}),
    log_retention: w.logRetention,
    cron: w.cron,
    timezone: w.timeZone,
    jitter_seconds: w.jitterSeconds,
    paused_at: w.pausedAt === null ? null : toIso(w.pausedAt),
    overlap_policy: w.overlapPolicy,
    catch_up_policy: w.catchUpPolicy,
    first_run: w.firstRun,
    ...(options.generation !== undefined ? { generation: options.generation } : {}),
    ...(options.skipped !== undefined ? { skipped_slots: options.skipped.count } : {}),
    ...(options.skipped?.lastAt != null ? { last_slot_skipped_at: toIso(options.skipped.lastAt) } : {}),
    // ---- issue 26: build errors, alert policy ----
    build_error: w.buildError?.message ?? null,
    build_error_code: w.buildError?.code ?? null,
    alert_after_failures: w.alertAfterFailures,
    recover_after_successes: w.recoverAfterSuccesses,
    attention: attentionOf(w),
  };
}

/** The `health` a workflow carries when asked for with `include=health` (docs/api.md, "Checks and health"). */
export function presentHealth(h: WorkflowHealth): Wire<typeof workflowHealthSchema> {
  const decided = h.uptime.completed + h.uptime.failed;
  return {
    state: h.state,
    auto_terminated: h.autoTerminated,
    ...(h.running ? { running: presentOpenRun(h.running) } : {}),
    ...(h.lastRun ? { last_run: presentRun(h.lastRun) } : {}),
    ...(h.nextRunAt !== null ? { next_run_at: toIso(h.nextRunAt) } : {}),
    recent_runs: h.recentRuns.map(presentRun),
    uptime: {
      window_hours: h.uptime.windowMs / 3_600_000,
      completed: h.uptime.completed,
      failed: h.uptime.failed,
      canceled: h.uptime.canceled,
      ...(decided > 0 ? { ratio: Math.round((h.uptime.completed / decided) * 10_000) / 10_000 } : {}),
    },
    skipped_slots: h.skippedSlots,
    ...(h.lastSlotSkippedAt !== null ? { last_slot_skipped_at: toIso(h.lastSlotSkippedAt) } : {}),
  };
}

function presentOpenRun(r: NonNullable<WorkflowHealth['running']>): NonNullable<Wire<typeof workflowHealthSchema>['running']> {
  return { job_id: r.jobId, status: r.status, scheduled_at: toIso(r.scheduledAt) };
}

function presentRun(r: RunSummary): Wire<typeof runSchema> {
  return {
    job_id: r.jobId,
    status: r.status,
    scheduled_at: toIso(r.scheduledAt),
    ...(r.completedAt !== null ? { completed_at: toIso(r.completedAt) } : {}),
    ...(r.check ? { check: presentCheck(r.check) } : {}),
  };
}

export function presentCheck(c: CheckResult): Wire<typeof checkSchema> {
  return checkToMessage(c);
}

/**
 * A job. Lists add `attempts` and, once a container ran, `container_id`; the
 * single read has neither. The reason fields belong to FAILED and CANCELED
 * jobs only, and such a job always has them (the "reason unavailable" codes
 * stand in should a row lack one).
 */
export function presentJob(j: Job, options: { inList?: boolean } = {}): Wire<typeof jobSchema> {
  const fallback =
    j.status === 'FAILED' ? reasons.failureUnavailable() : j.status === 'CANCELED' ? reasons.cancellationUnavailable() : undefined;
  return {
    id: j.id,
    workflow_id: j.workflowId,
    ...(options.inList && j.containerId !== null ? { container_id: j.containerId } : {}),
    status: j.status,
    trigger: j.trigger,
    ...(options.inList ? { attempts: j.attempts } : {}),
    scheduled_at: toIso(j.scheduledAt),
    ...(j.startedAt !== null ? { started_at: toIso(j.startedAt) } : {}),
    ...(j.completedAt !== null ? { completed_at: toIso(j.completedAt) } : {}),
    created_at: toIso(j.createdAt),
    updated_at: toIso(j.updatedAt),
    ...(j.logTruncated ? { log_truncated: true } : {}),
    ...(fallback
      ? j.statusReasonCode !== null
        ? { status_reason_code: j.statusReasonCode, status_reason_message: j.statusReasonMessage ?? fallback.message }
        : { status_reason_code: fallback.code, status_reason_message: fallback.message }
      : {}),
    ...(j.check ? { check: presentCheck(j.check) } : {}),
  };
}

type WireAttempt = Wire<typeof attemptListSchema>['attempts'][number];

/** One attempt of a job's attempts list; `logLines` when the workflow keeps logs. */
export function presentAttempt(a: AttemptView, logLines: number | undefined): WireAttempt {
  return {
    attempt: a.attempt,
    outcome: a.outcome,
    ...(a.runnerId !== null ? { runner_id: a.runnerId } : {}),
    ...(a.startedAt !== null ? { started_at: toIso(a.startedAt) } : {}),
    ...(a.endedAt !== null ? { ended_at: toIso(a.endedAt) } : {}),
    ...(a.reason ? { reason: { code: a.reason.code, message: a.reason.message } } : {}),
    ...(logLines !== undefined ? { log_lines: logLines } : {}),
  };
}

export function presentNotification(n: Notification): Wire<typeof notificationSchema> {
  return {
    id: n.id,
    kind: n.kind,
    payload: n.payload,
    ...(n.readAt !== null ? { read_at: toIso(n.readAt) } : {}),
    created_at: toIso(n.createdAt),
    updated_at: toIso(n.updatedAt),
  };
}

function presentTotals(t: WorkflowTotals) {
  return { total_jobs: t.totalJobs, total_joblogs: t.totalJoblogs, total_job_execution_duration: t.totalDurationS };
}

export function presentWorkflowAnalytics(workflowId: string, t: WorkflowTotals): Wire<typeof workflowAnalyticsSchema> {
  return { workflow_id: workflowId, ...presentTotals(t) };
}

export function presentUserAnalytics(t: UserTotals): Wire<typeof userAnalyticsSchema> {
  return {
    total_workflows: t.totalWorkflows,
    ...presentTotals(t),
    workflow_kinds: t.kinds.map((k) => ({ kind: k.kind, total_workflows: k.totalWorkflows, ...presentTotals(k) })),
    top_workflows: t.top.map((w) => ({ workflow_id: w.workflowId, workflow_name: w.name ?? DELETED_WORKFLOW_NAME, kind: w.kind, ...presentTotals(w) })),
  };
}

export type LogEntryWire = Wire<typeof logEntrySchema>;

/** A log entry (list, search, live tail); `message` may carry search highlights. */
export function presentLogEntry(l: LogLine, message: string = l.message): LogEntryWire {
  return {
    timestamp: toIso(l.timestamp),
    message,
    sequence_num: l.sequenceNum,
    stream: l.stream,
    event_id: logEventId(l.jobId, l.attempt, l.sequenceNum),
  };
}

// A JSON text starts, after optional whitespace, with one of these.
const JSON_START = /^[ \t\r\n]*[{["\-0-9tfn]/;

/**
 * The message as it may stand for a JSON value, or undefined when it is not a
 * JSON text. The text itself is used, not a re-serialisation, so numbers keep
 * every digit (1e400, 12345678901234567890); CR and LF can only be
 * insignificant whitespace in valid JSON and become spaces, so an entry stays
 * on one line.
 */
function jsonMessage(message: string): string | undefined {
  if (!JSON_START.test(message)) return undefined;
  try {
    JSON.parse(message);
  } catch {
    return undefined;
  }
  return /[\r\n]/.test(message) ? message.replace(/[\r\n]/g, ' ') : message;
}

/**
 * A log download entry as JSON text (raw json and jsonl), keys in the
 * contract's order; `message_json` only when `message_raw` is valid JSON (any
 * JSON value: object, array, string, number, true, false, null).
 */
export function logDownloadEntryJson(l: LogLine): string {
  const json = jsonMessage(l.message);
  return (
    `{"timestamp":"${toIso(l.timestamp)}","sequence_num":${l.sequenceNum},"stream":${JSON.stringify(l.stream)},` +
    `"event_id":${JSON.stringify(logEventId(l.jobId, l.attempt, l.sequenceNum))},"message_raw":${JSON.stringify(l.message)}` +
    (json === undefined ? '}' : `,"message_json":${json}}`)
  );
}
