import { systemClock } from '@orloj/common/core';
import { awaitsRunner } from '@orloj/common/domain';
import type { SchedulerContext } from './context.js';
import type { HandOut } from './hand-out.js';

/** Refusals of one job handed out again from `jobs.dead` (about 3 minutes of pauses) before it is left to the queue timeout. */
const MAX_REFUSALS = 20;
/** The real-time pause before a refused job is handed out again: doubles per refusal of the same job, up to the cap. */
const REFUSAL_PAUSE_MS = 250;
const REFUSAL_PAUSE_MAX_MS = 10_000;
/** Jobs whose refusals the leader counts at once (the count starts over beyond it). */
const REFUSALS_TRACKED = 10_000;

/**
 * job.run messages that come back on `jobs.dead` (every replica consumes it):
 * a runner refused them (they failed its signature check) or they failed on
 * every delivery. Such a message is untrusted and never decoded as a command;
 * the store decides what happens to the job it names.
 */
export class RefusedJobs {
  /** Refusals per job, to space out handing out a job that keeps coming back (bounded: cleared when it grows). */
  private readonly refusals = new Map<string, number>();

  constructor(
    private readonly c: SchedulerContext,
    private readonly handOut: HandOut,
  ) {}

  /**
   * A job still QUEUED and unstarted on the attempt the message names waits
   * for no one and is handed out again on the same attempt (attempts count
   * runs; this one never ran), after a pause that grows while the same job
   * keeps coming back (a misconfigured runner that refuses everything must not
   * spin the leader), so a healthy runner takes it within seconds.
   */
  async onDeadLetter(message: unknown): Promise<void> {
    const named = namedAttempt(message);
    const claimed = claimedProducer(message);
    if (!named) {
      this.c.log.error({ claimedRole: claimed }, 'dropped a message from the jobs dead-letter queue that names no job attempt');
      return;
    }
    const { store, clock, signal } = this.c;
    const job = await store.jobs.findById(named.jobId);
    if (!awaitsRunner(job, named.attempt)) return; // moved on meanwhile
    const n = (this.refusals.get(job.id) ?? 0) + 1;
    if (this.refusals.size > REFUSALS_TRACKED) this.refusals.clear();
    this.refusals.set(job.id, n);
    if (n > MAX_REFUSALS) {
      // No runner takes it (or it kills every runner that does): the queue timeout
      // hands it out as a new attempt, and the attempt limit ends it, loudly.
      this.c.log.error({ jobId: job.id, refusals: n, claimedRole: claimed }, 'a job keeps coming back from the jobs dead-letter queue; leaving it to JOB_QUEUE_TIMEOUT');
      return;
    }
    // Real time, whatever the clock: the pause bounds the CPU a refusing runner costs, not the schedule.
    await systemClock.sleep(Math.min(REFUSAL_PAUSE_MS * 2 ** (n - 1), REFUSAL_PAUSE_MAX_MS), signal);
    const workflow = await store.workflows.findById(job.workflowId);
    if (!workflow || signal.aborted) return;
    // The same attempt: the refused message is here, in no runner's hands, so the
    // attempt never ran; a new message for it keeps attempts counting real runs.
    const moved = await store.jobs.resendSameAttempt([job], clock.now());
    if (moved.length === 0) return;
    this.c.stats.jobsRefused += 1;
    this.c.log.warn({ jobId: job.id, attempt: moved[0]!.attempts, refusals: n, claimedRole: claimed }, 'a runner refused a job message; handing the job out again');
    await this.handOut.send(moved.map((j) => [j, workflow] as const));
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The job attempt an unverified dead-lettered envelope names, if it names one. */
function namedAttempt(message: unknown): { jobId: string; attempt: number } | undefined {
  const body = isRecord(message) ? message.body : undefined;
  if (!isRecord(body) || typeof body.job_id !== 'string' || typeof body.attempt !== 'number') return undefined;
  return { jobId: body.job_id, attempt: body.attempt };
}

function claimedProducer(message: unknown): unknown {
  return isRecord(message) ? message.producer : undefined;
}
