/**
 * One job attempt on a runner, from job.started to job.finished: its state,
 * the outcome its execution returns, and how that outcome is reported.
 */
import { onAbort, type AbortLike, type Cancellation } from '@orloj/common/core';
import { reasons, type CheckResultMessage, type JobReason } from '@orloj/common/domain';
import type { LazyLogger } from '@orloj/common/logging';
import type { JobFinishedMessage, JobRunMessage } from '@orloj/common/messages';

/** What an execution returned, before job.stop or the shutdown hand-back are taken into account (settle()). */
export type Outcome = (
  | { status: 'COMPLETED'; containerId?: string; check?: CheckResultMessage }
  | { status: 'FAILED'; reason: JobReason; systemFailure?: boolean; containerId?: string; check?: CheckResultMessage }
  | { status: 'CANCELED'; containerId?: string }
) & { logTruncated?: boolean };

export interface Attempt {
  readonly key: string;
  readonly job: JobRunMessage;
  readonly problem: string | undefined;
  readonly startedAt: number;
  readonly log: LazyLogger;
  /** Aborts the execution (job.stop, or the hand-back at shutdown). */
  readonly cancel: Cancellation;
  /** Set by job.stop: the attempt is reported CANCELED with it. */
  stopReason?: JobReason;
  /**
   * An automatic run, caused by no request: its start and a COMPLETED end are
   * logged at debug, not info (one line each per check would be most of a
   * busy installation's output and a good part of its CPU).
   */
  readonly routine?: boolean;
  /** Set when the shutdown grace ran out: the attempt is reported as a system failure. */
  handedBack: boolean;
  /** Resolves once the attempt was reported (or given up on), or never started. */
  readonly done: Promise<void>;
  readonly markDone: () => void;
}

export interface Settled {
  status: JobFinishedMessage['status'];
  reason?: JobReason;
  systemFailure: boolean;
  containerId?: string;
}

/** The outcome as reported: a stop message's reason, or the shutdown hand-back, decide a CANCELED run. */
export function settle(attempt: Attempt, outcome: Outcome): Settled {
  const containerId = outcome.containerId;
  const base = containerId === undefined ? {} : { containerId };
  if (outcome.status === 'COMPLETED') return { ...base, status: 'COMPLETED', systemFailure: false };
  if (outcome.status === 'FAILED') {
    return { ...base, status: 'FAILED', reason: outcome.reason, systemFailure: outcome.systemFailure ?? outcome.reason.code === 'SYSTEM_ERROR' };
  }
  if (attempt.stopReason) return { ...base, status: 'CANCELED', reason: attempt.stopReason, systemFailure: false };
  if (attempt.handedBack) return { ...base, status: 'FAILED', reason: reasons.runnerShutdown(), systemFailure: true };
  return { ...base, status: 'CANCELED', reason: reasons.cancellationUnavailable(), systemFailure: false };
}

/** The job.finished message for a settled attempt. */
export function finishedMessage(attempt: Attempt, runnerId: string, outcome: Outcome, settled: Settled, finishedAt: number): JobFinishedMessage {
  const { job } = attempt;
  return {
    job_id: job.job_id,
    attempt: job.attempt,
    runner_id: runnerId,
    status: settled.status,
    started_at: attempt.startedAt,
    finished_at: finishedAt,
    ...(settled.status === 'COMPLETED' ? {} : { reason: settled.reason }),
    ...(settled.systemFailure ? { system_failure: true } : {}),
    ...(settled.containerId === undefined ? {} : { container_id: settled.containerId }),
    ...(outcome.logTruncated ? { log_truncated: true } : {}),
    ...(outcome.status !== 'CANCELED' && outcome.check && settled.status === outcome.status ? { check: outcome.check } : {}),
  };
}

export const ABORTED = Symbol('aborted');

/** The promise's value, or ABORTED as soon as the signal aborts (the work itself carries on unobserved). */
export async function untilAborted<T>(promise: Promise<T>, signal: AbortLike): Promise<T | typeof ABORTED> {
  if (signal.aborted) {
    promise.catch(() => undefined);
    return ABORTED;
  }
  let stopListening: () => void = () => undefined;
  const aborted = new Promise<typeof ABORTED>((resolve) => {
    stopListening = onAbort(signal, () => resolve(ABORTED));
  });
  try {
    return await Promise.race([promise, aborted]);
  } finally {
    stopListening();
    promise.catch(() => undefined);
  }
}
