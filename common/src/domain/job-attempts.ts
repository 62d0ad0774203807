import type { Job, JobReason, JobStatus } from './job.js';

/**
 * A job's attempts (issue 26, "honest runs"). A job runs as attempt 1; a
 * SYSTEM failure of an attempt (its runner vanished, the runtime was
 * unavailable, orloj restarted under it) hands the job out again as the next
 * attempt, whose log starts again at line 0. The job's row holds its current
 * attempt; each attempt given up before it is recorded when it is given up
 * (`job_attempts`), with why.
 */

/**
 * Why an attempt was given up and the job handed out again:
 * - `lease_lost`: its runner stopped renewing the attempt's lease;
 * - `not_started`: no runner started it in time (its message expired or was lost);
 * - `orloj_restart`: orloj restarted under it (the in-process bus lost the attempt with the process);
 * - `runner_failure`: its runner reported a SYSTEM failure (shut down, runtime unavailable, …).
 */
export const ATTEMPT_END_CODES = ['lease_lost', 'not_started', 'orloj_restart', 'runner_failure'] as const;
export type AttemptEndCode = (typeof ATTEMPT_END_CODES)[number];

export interface AttemptEnd {
  code: AttemptEndCode;
  message: string;
}

/** An attempt that was given up, as recorded when the job moved on to the next. */
export interface EndedAttempt {
  jobId: string;
  attempt: number;
  runnerId: string | null;
  startedAt: number | null;
  endedAt: number;
  end: AttemptEnd;
}

/** One attempt as a job page lists it: a recorded one, or the job's current (last) one. */
export interface AttemptView {
  attempt: number;
  runnerId: string | null;
  startedAt: number | null;
  endedAt: number | null;
  /** `RETRIED` for an attempt that was given up; the job's status for its current one. */
  outcome: 'RETRIED' | JobStatus;
  /** Why it was given up, or the job's own reason on its current attempt. */
  reason: JobReason | AttemptEnd | null;
}

export const attemptEnds = {
  leaseLost: (runnerId: string | null): AttemptEnd => ({
    code: 'lease_lost',
    message: `Runner ${runnerId ?? '(unknown)'} stopped renewing the attempt's lease (it stopped, lost its connection, or was too busy).`,
  }),
  notStarted: (): AttemptEnd => ({ code: 'not_started', message: 'No runner started the attempt in time; it was handed out again.' }),
  orlojRestart: (): AttemptEnd => ({ code: 'orloj_restart', message: 'orloj restarted while the attempt ran; its runner went with the old process.' }),
  runnerFailure: (reason: JobReason): AttemptEnd => ({ code: 'runner_failure', message: reason.message }),
} as const;

/**
 * Why the scheduler gives up `job`'s current attempt: `restart` when orloj's
 * own restart lost it, `runner` with the runner's reported SYSTEM failure,
 * else the sweep found its lease expired (RUNNING) or it never started (QUEUED).
 */
export function attemptEndOf(job: Pick<Job, 'status' | 'runnerId'>, cause: { restart: true } | { runner: JobReason } | 'sweep'): AttemptEnd {
  if (cause !== 'sweep') return 'restart' in cause ? attemptEnds.orlojRestart() : attemptEnds.runnerFailure(cause.runner);
  return job.status === 'QUEUED' ? attemptEnds.notStarted() : attemptEnds.leaseLost(job.runnerId);
}

/**
 * Every attempt of `job`, oldest first: the recorded ones, then its current
 * one (none while it waits PENDING for its first). An attempt number with no
 * record below the current one was handed out again before any runner took
 * it without passing the retry path (a resend of the same message): it is
 * listed as given up, not started, so the numbers have no holes.
 */
export function jobAttempts(job: Job, ended: readonly EndedAttempt[]): AttemptView[] {
  const byNumber = new Map(ended.map((a) => [a.attempt, a]));
  const out: AttemptView[] = [];
  for (let n = 1; n < job.attempts; n++) {
    const a = byNumber.get(n);
    out.push(
      a
        ? { attempt: n, runnerId: a.runnerId, startedAt: a.startedAt, endedAt: a.endedAt, outcome: 'RETRIED', reason: a.end }
        : { attempt: n, runnerId: null, startedAt: null, endedAt: null, outcome: 'RETRIED', reason: attemptEnds.notStarted() },
    );
  }
  if (job.attempts > 0) {
    const reason = job.statusReasonCode ? { code: job.statusReasonCode, message: job.statusReasonMessage ?? '' } : null;
    out.push({ attempt: job.attempts, runnerId: job.runnerId, startedAt: job.startedAt, endedAt: job.completedAt, outcome: job.status, reason });
  }
  return out;
}
