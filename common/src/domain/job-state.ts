import { OrlojError } from '../core/errors.js';
import type { CheckResult } from './check.js';
import { newJob, reasons, type Job, type JobReason, type JobStatus } from './job.js';
import type { Workflow } from './workflow.js';

/**
 * The job lifecycle, in one place: the state table, and one named unit per
 * transition that says when the move is allowed and what it sets. The api's
 * schedule route, the scheduler and the store's multi-row changes
 * (store/lifecycle.ts) call these units instead of writing the rules inline.
 *
 * The store's only way to change a job's status is a conditional UPDATE whose
 * WHERE clause comes from the table below, so an illegal transition is
 * impossible by construction, and a message applied twice finds the job
 * already moved and changes nothing.
 *
 *   PENDING → QUEUED → RUNNING → COMPLETED | FAILED | CANCELED
 *
 * plus: QUEUED/RUNNING → QUEUED (a new attempt after the runner vanished),
 * QUEUED → COMPLETED | FAILED (a result that overtook its start event, or a
 * sweep that gives up), PENDING/QUEUED → CANCELED.
 *
 * The timings the units take are the roles': the job lease is the
 * JOB_LEASE_TTL setting (config/settings.ts), the attempt limit the scheduler's.
 */
export const ALLOWED_FROM: Readonly<Record<JobStatus, readonly JobStatus[]>> = {
  PENDING: [],
  QUEUED: ['PENDING', 'QUEUED', 'RUNNING'],
  RUNNING: ['QUEUED'],
  COMPLETED: ['QUEUED', 'RUNNING'],
  FAILED: ['QUEUED', 'RUNNING'],
  CANCELED: ['PENDING', 'QUEUED', 'RUNNING'],
};

export function canTransition(from: JobStatus, to: JobStatus): boolean {
  return ALLOWED_FROM[to].includes(from);
}

export function isTerminal(status: JobStatus): boolean {
  return status === 'COMPLETED' || status === 'FAILED' || status === 'CANCELED';
}

/** Statuses in which a job occupies its workflow: at most one such job runs at a time. */
export const ACTIVE_JOB_STATUSES: readonly JobStatus[] = ['QUEUED', 'RUNNING'];

/** The only status that holds a lease its runner renews (job.heartbeat). */
export const LEASED_STATUS = 'RUNNING' satisfies JobStatus;

/**
 * The jobs a workflow's terminate or update cancels at once, in the store;
 * a RUNNING job is stopped through its runner instead, and ends with the
 * runner's result.
 */
export const CANCELED_WITH_WORKFLOW: readonly JobStatus[] = ['PENDING', 'QUEUED'];

/** Columns a transition may set besides the status. */
export interface TransitionFields {
  attempts?: number;
  queuedAt?: number | null;
  runnerId?: string | null;
  leaseExpiresAt?: number | null;
  containerId?: string | null;
  startedAt?: number | null;
  completedAt?: number | null;
  reason?: JobReason | null;
  /** The attempt's log reached the per-job cap. */
  logTruncated?: boolean;
  /** What a HEARTBEAT job's request did. */
  check?: CheckResult | null;
}

export interface TransitionGuard {
  /** Only when the job is on this attempt (a message about an older attempt changes nothing). */
  attempts?: number;
}

/**
 * One move of one job, as a unit below decides it: the target status, the
 * columns it sets, and the attempt it applies to. The store applies it with
 * one conditional UPDATE (`JobMovesRepo.apply`), allowed only from ALLOWED_FROM[to].
 */
export interface JobTransition {
  readonly to: JobStatus;
  readonly fields: TransitionFields;
  readonly guard: TransitionGuard;
}

// ---- create ---------------------------------------------------------------

/**
 * create-manual (`POST …/jobs/schedule`): a job due now that waits PENDING
 * behind a running one; the automatic schedule is untouched. Refused while the
 * workflow is terminated or its build failed. Call it with the workflow read
 * locked, so a terminate or update cannot slip between the check and the insert.
 */
export function createManualJob(workflow: Workflow, now: number, requestId?: string): Job {
  if (workflow.terminatedAt !== null) {
    throw new OrlojError('workflow_terminated', 'The workflow is terminated: update it (PUT) to reactivate it first.');
  }
  if (workflow.buildStatus === 'FAILED') {
    throw new OrlojError('workflow_build_failed', "The workflow's build failed: update it (PUT) to rebuild it first.");
  }
  const job = newJob(workflow, 'MANUAL', now, now);
  return requestId === undefined ? job : { ...job, requestId };
}

/**
 * create-due: the job of a due slot. Handed out at once (`handOut`: the fair
 * hand-out found room for it), it is created QUEUED on its first attempt, as
 * the PENDING → QUEUED transition would leave it; the leader does this only
 * while the workflow is locked and free, so nothing else can hand it out
 * first. Otherwise it waits PENDING for room, as a manual job does: the slot
 * has its job either way, so no slot is lost to a busy fleet.
 */
export function createDueJob(workflow: Workflow, slotAt: number, now: number, handOut = true): Job {
  const job = newJob(workflow, 'AUTOMATIC', slotAt, now);
  return handOut ? { ...job, status: 'QUEUED', attempts: 1, queuedAt: now, updatedAt: now } : job;
}

// ---- hand out ---------------------------------------------------------------

/**
 * queue (dispatch): the job's next attempt handed to the runners, from
 * PENDING (its first) or from QUEUED/RUNNING (a new attempt), only while the
 * job is still on the attempt the caller saw. `JobQueueRepo.queueNextAttempts` is
 * the same move for a batch, in one statement.
 */
export function queueNextAttempt(job: Pick<Job, 'attempts'>, now: number): JobTransition {
  return { to: 'QUEUED', fields: { attempts: job.attempts + 1, queuedAt: now }, guard: { attempts: job.attempts } };
}

/**
 * resend: whether a job.run message that came back unrun (refused by a
 * runner, dead-lettered) may be sent again on the same attempt: only while
 * the job still waits QUEUED on that attempt. `JobsRepo.resendSameAttempt`
 * applies it (and also requires that the attempt never started).
 */
export function awaitsRunner(job: Job | undefined, attempt: number): job is Job {
  return job !== undefined && job.status === 'QUEUED' && job.attempts === attempt;
}

// ---- run --------------------------------------------------------------------

/** What a runner reports when it starts an attempt (job.started). */
export interface AttemptStart {
  attempt: number;
  runnerId: string;
  startedAt: number;
  containerId?: string | undefined;
}

/** start: RUNNING on the attempt the runner started, under a lease of `leaseTtlMs` from now. */
export function startAttempt(start: AttemptStart, now: number, leaseTtlMs: number): JobTransition {
  return {
    to: 'RUNNING',
    fields: {
      runnerId: start.runnerId,
      startedAt: start.startedAt,
      leaseExpiresAt: leaseExpiry(now, leaseTtlMs),
      ...(start.containerId ? { containerId: start.containerId } : {}),
    },
    guard: { attempts: start.attempt },
  };
}

/**
 * heartbeat/renew: when a RUNNING attempt's lease ends if its runner says
 * nothing more. `JobsRepo.renewLease` moves it there (RUNNING, same attempt).
 */
export function leaseExpiry(now: number, leaseTtlMs: number): number {
  return now + leaseTtlMs;
}

/** How often a runner renews its lease (job.heartbeat): a third of it, so two heartbeats may be lost before it expires. */
export function heartbeatInterval(leaseTtlMs: number): number {
  return Math.max(1, Math.floor(leaseTtlMs / 3));
}

/**
 * Why a runner reporting `attempt` must stop, or undefined while the store
 * still expects that attempt to run: the job is gone, was canceled on that
 * attempt (its own reason), or was handed out again as another attempt.
 */
export function staleAttemptStop(job: Job | undefined, attempt: number): JobReason | undefined {
  if (!job) return reasons.cancellationUnavailable();
  if (job.status === 'CANCELED' && job.attempts === attempt) {
    return job.statusReasonCode ? { code: job.statusReasonCode, message: job.statusReasonMessage ?? '' } : reasons.cancellationUnavailable();
  }
  if (job.attempts !== attempt) return reasons.cancellationUnavailable();
  return undefined;
}

// ---- end --------------------------------------------------------------------

/** What a runner reports when an attempt ends with the job's own outcome (job.finished, not a system failure). */
export interface AttemptResult {
  attempt: number;
  status: 'COMPLETED' | 'FAILED' | 'CANCELED';
  startedAt: number;
  finishedAt: number;
  reason?: JobReason | undefined;
  containerId?: string | undefined;
  logTruncated?: boolean | undefined;
  /** Undefined: the result says nothing of a check (the column is left as it is). */
  check?: CheckResult | null | undefined;
}

/**
 * complete/fail/cancel: the runner's result for the attempt. COMPLETED has no
 * reason; FAILED and CANCELED without one get the "unavailable" reason of
 * their kind. The lease ends with the attempt.
 */
export function finishAttempt(result: AttemptResult): JobTransition {
  const reason = result.status === 'COMPLETED' ? null : (result.reason ?? (result.status === 'FAILED' ? reasons.failureUnavailable() : reasons.cancellationUnavailable()));
  return {
    to: result.status,
    fields: {
      startedAt: result.startedAt,
      completedAt: result.finishedAt,
      leaseExpiresAt: null,
      reason,
      ...(result.containerId ? { containerId: result.containerId } : {}),
      ...(result.logTruncated === true ? { logTruncated: true } : {}),
      ...(result.check === undefined ? {} : { check: result.check }),
    },
    guard: { attempts: result.attempt },
  };
}

/**
 * Whether a system failure reported for `attempt` still applies: the job is
 * on that attempt and not yet ended.
 */
export function isOpenAttempt(job: Job | undefined, attempt: number): job is Job {
  return job !== undefined && job.attempts === attempt && (job.status === 'QUEUED' || job.status === 'RUNNING');
}

/**
 * retry/fail after a SYSTEM failure of one attempt (its runner vanished, the
 * sweep found it lost, the runtime was unavailable): CANCELED when the
 * workflow is gone or terminated meanwhile; else another attempt (QUEUED,
 * runner fields cleared) while fewer than `maxAttempts` ran; else FAILED with
 * `finalReason` when it is a SYSTEM_ERROR, or the lease-lost reason.
 */
export function afterSystemFailure(job: Job, workflow: Workflow | undefined, maxAttempts: number, now: number, finalReason: JobReason): JobTransition {
  const guard = { attempts: job.attempts };
  if (!workflow || workflow.terminatedAt !== null) {
    return { to: 'CANCELED', fields: { completedAt: now, leaseExpiresAt: null, reason: reasons.workflowTerminated() }, guard };
  }
  if (job.attempts < maxAttempts) {
    return {
      to: 'QUEUED',
      fields: { attempts: job.attempts + 1, queuedAt: now, runnerId: null, leaseExpiresAt: null, startedAt: null, containerId: null },
      guard,
    };
  }
  const reason = finalReason.code === 'SYSTEM_ERROR' ? finalReason : reasons.leaseLost(job.attempts);
  return { to: 'FAILED', fields: { completedAt: now, leaseExpiresAt: null, reason }, guard };
}

/** cancel with the workflow: why its open jobs end when it is terminated, or updated (older generations only). */
export function cancelReason(cause: 'terminated' | 'updated'): JobReason {
  return cause === 'terminated' ? reasons.workflowTerminated() : reasons.workflowUpdated();
}
