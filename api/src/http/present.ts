import { toIso, type User, type Workflow } from '@orloj/common';

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
