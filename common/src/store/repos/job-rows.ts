/**
 * The `jobs` row and the domain's Job: the mapping both ways, the columns a
 * transition sets, the (job, attempt) condition and the PostgreSQL column
 * types for set-wise updates. jobs.repo.ts, job-queue.repo.ts, job-moves.repo.ts
 * and job-health.reads.ts share it.
 */
import type { Expression, ExpressionBuilder, Insertable, Selectable, SqlBool, Updateable } from 'kysely';
import type { Database, JobsTable } from '../schema.js';
import type { Job, JobStatus, ReasonCode } from '../../domain/job.js';
import type { CheckFailure, CheckResult } from '../../domain/check.js';
import type { TransitionFields } from '../../domain/job-state.js';

export function toJob(r: Selectable<JobsTable>): Job {
  return {
    id: r.id,
    workflowId: r.workflow_id,
    userId: r.user_id,
    generation: r.generation,
    trigger: r.trigger,
    status: r.status,
    slotAt: r.slot_at,
    scheduledAt: r.scheduled_at,
    attempts: r.attempts,
    queuedAt: r.queued_at,
    runnerId: r.runner_id,
    leaseExpiresAt: r.lease_expires_at,
    containerId: r.container_id,
    startedAt: r.started_at,
    completedAt: r.completed_at,
    statusReasonCode: r.status_reason_code as ReasonCode | null,
    statusReasonMessage: r.status_reason_message,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
    logTruncated: r.log_truncated === 1,
    check: toCheck(r),
    requestId: r.request_id ?? null,
  };
}

export type CheckColumns = Pick<Selectable<JobsTable>, 'check_status_code' | 'check_response_ms' | 'check_failure'>;

export function toCheck(r: CheckColumns): CheckResult | null {
  return r.check_response_ms === null
    ? null
    : { statusCode: r.check_status_code, responseTimeMs: r.check_response_ms, failure: r.check_failure as CheckFailure | null };
}

export function checkColumns(c: CheckResult | null): CheckColumns {
  return { check_status_code: c?.statusCode ?? null, check_response_ms: c?.responseTimeMs ?? null, check_failure: c?.failure ?? null };
}

export function toRow(job: Job): Insertable<JobsTable> {
  return {
    id: job.id,
    workflow_id: job.workflowId,
    user_id: job.userId,
    generation: job.generation,
    trigger: job.trigger,
    status: job.status,
    slot_at: job.slotAt,
    scheduled_at: job.scheduledAt,
    attempts: job.attempts,
    queued_at: job.queuedAt,
    runner_id: job.runnerId,
    lease_expires_at: job.leaseExpiresAt,
    stop_requested_at: null,
    container_id: job.containerId,
    started_at: job.startedAt,
    completed_at: job.completedAt,
    status_reason_code: job.statusReasonCode,
    status_reason_message: job.statusReasonMessage,
    created_at: job.createdAt,
    updated_at: job.updatedAt,
    ...checkColumns(job.check ?? null),
    request_id: job.requestId ?? null,
  };
}

/**
 * `(attempts = 1 and id in (…)) or (attempts = 2 and id in (…)) …`: one
 * condition for many (job, attempt) pairs that the primary key serves (a chain
 * of `(id = ? and attempts = ?) or …` is evaluated row by row instead).
 */
export function onAttempts(eb: ExpressionBuilder<Database, 'jobs'>, attempts: readonly { id: string; attempts: number }[]): Expression<SqlBool> {
  const byAttempt = new Map<number, string[]>();
  for (const a of attempts) {
    const ids = byAttempt.get(a.attempts);
    if (ids) ids.push(a.id);
    else byAttempt.set(a.attempts, [a.id]);
  }
  return eb.or([...byAttempt].map(([n, ids]) => eb.and([eb('attempts', '=', n), eb('id', 'in', ids)])));
}

/** The columns a transition to `to` sets, and their values. */
export function transitionValues(to: JobStatus, now: number, fields: TransitionFields): Updateable<JobsTable> {
  return {
    status: to,
    updated_at: now,
    // a new attempt is not sent until the bus confirms it
    ...(to === 'QUEUED' ? { dispatched_at: null } : {}),
    ...(fields.attempts !== undefined ? { attempts: fields.attempts } : {}),
    ...(fields.queuedAt !== undefined ? { queued_at: fields.queuedAt } : {}),
    ...(fields.runnerId !== undefined ? { runner_id: fields.runnerId } : {}),
    ...(fields.leaseExpiresAt !== undefined ? { lease_expires_at: fields.leaseExpiresAt } : {}),
    ...(fields.containerId !== undefined ? { container_id: fields.containerId } : {}),
    ...(fields.startedAt !== undefined ? { started_at: fields.startedAt } : {}),
    ...(fields.check !== undefined ? checkColumns(fields.check) : {}),
    ...(fields.completedAt !== undefined ? { completed_at: fields.completedAt } : {}),
    ...(fields.logTruncated !== undefined ? { log_truncated: fields.logTruncated ? 1 : 0 } : {}),
    ...(fields.reason !== undefined ? { status_reason_code: fields.reason?.code ?? null, status_reason_message: fields.reason?.message ?? null } : {}),
  };
}

/**
 * PostgreSQL element types of the jobs columns (for applyMany's arrays). Every
 * column is listed, so a column added to JobsTable does not compile until its
 * type is here.
 */
export const PG_TYPES: Readonly<Record<keyof JobsTable, string>> = {
  id: 'uuid',
  workflow_id: 'uuid',
  user_id: 'uuid',
  generation: 'integer',
  trigger: 'text',
  status: 'text',
  slot_at: 'bigint',
  scheduled_at: 'bigint',
  attempts: 'integer',
  queued_at: 'bigint',
  dispatched_at: 'bigint',
  runner_id: 'text',
  lease_expires_at: 'bigint',
  stop_requested_at: 'bigint',
  container_id: 'text',
  started_at: 'bigint',
  completed_at: 'bigint',
  status_reason_code: 'text',
  status_reason_message: 'text',
  created_at: 'bigint',
  updated_at: 'bigint',
  log_truncated: 'integer',
  check_status_code: 'integer',
  check_response_ms: 'integer',
  check_failure: 'text',
  request_id: 'text',
};
