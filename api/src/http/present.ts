import { reasons, toIso, type Job, type User, type Workflow } from '@orloj/common';

/** Wire shapes: snake_case, RFC 3339 UTC timestamps, unset optionals omitted. */
export function presentUser(u: User) {
  return {
    email: u.email,
    notification_preference: u.notificationPreference,
    created_at: toIso(u.createdAt),
    updated_at: toIso(u.updatedAt),
  };
}

export function presentWorkflow(w: Workflow, options: { withGeneration?: boolean } = {}) {
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
    ...(options.withGeneration ? { generation: w.generation } : {}),
  };
}

/**
 * A job. Lists add `attempts` and, once a container ran, `container_id`; the
 * single read has neither. The reason fields belong to FAILED and CANCELED
 * jobs only, and such a job always has them (the "reason unavailable" codes
 * stand in should a row lack one).
 */
export function presentJob(j: Job, options: { inList?: boolean } = {}) {
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
    ...(fallback
      ? j.statusReasonCode !== null
        ? { status_reason_code: j.statusReasonCode, status_reason_message: j.statusReasonMessage ?? fallback.message }
        : { status_reason_code: fallback.code, status_reason_message: fallback.message }
      : {}),
  };
}
