/**
 * What a running attempt tells the scheduler: job.heartbeat every
 * heartbeatMs (the scheduler's lease on it), and job.finished, published
 * until the bus takes it (retryPolicies.resultPublish) or stop() abandons it.
 */
import { retry, type AbortLike, type Cancellation, type Clock, type RetryPolicy } from '@orloj/common/core';
import { MESSAGE_TYPES, QUEUES, type JobFinishedMessage, type JobHeartbeatMessage } from '@orloj/common/messages';
import type { SignedBus } from '@orloj/common/envelope';
import type { Attempt } from './attempt.js';

export interface AttemptReportingDeps {
  bus: SignedBus;
  clock: Clock;
  runnerId: string;
  heartbeatMs: number;
  resultRetry: RetryPolicy;
  /** Aborted at the very end of the runner's stop(): result retries give up. */
  abandoning: AbortLike;
  /** Raised for each result given up on. */
  counts: { unreported: number };
}

export class AttemptReporting {
  constructor(private readonly deps: AttemptReportingDeps) {}

  async sendHeartbeats(attempt: Attempt, signal: Cancellation): Promise<void> {
    const { job } = attempt;
    const { bus, clock, heartbeatMs } = this.deps;
    const body: JobHeartbeatMessage = { job_id: job.job_id, attempt: job.attempt, runner_id: this.deps.runnerId };
    for (;;) {
      await clock.sleep(heartbeatMs, signal);
      if (signal.aborted) return;
      try {
        await bus.publish(QUEUES.jobEvents, MESSAGE_TYPES.jobHeartbeat, body);
      } catch (err) {
        attempt.log.warn({ err }, 'could not publish a heartbeat');
      }
    }
  }

  /** job.started: the scheduler moves the job to RUNNING and its lease on the attempt begins. */
  async start(attempt: Attempt): Promise<void> {
    const { job } = attempt;
    await this.deps.bus.publish(QUEUES.jobEvents, MESSAGE_TYPES.jobStarted, {
      job_id: job.job_id,
      attempt: job.attempt,
      runner_id: this.deps.runnerId,
      started_at: attempt.startedAt,
    });
  }

  /**
   * job.started held back (docs/adr/0017): sent after `delayMs` if the
   * attempt still runs then, or as soon as `finished` is aborted, which the
   * runner does right before it publishes job.finished — the two then reach
   * the scheduler together and are applied in one transaction. `delayMs`
   * stays under the heartbeat interval, so a heartbeat never precedes it.
   */
  async startDeferred(attempt: Attempt, delayMs: number, finished: Cancellation): Promise<void> {
    await this.deps.clock.sleep(delayMs, finished);
    try {
      await this.start(attempt);
    } catch (err) {
      // The result still goes out; a job it finds QUEUED is recovered as an unstarted one (queue timeout).
      attempt.log.warn({ err }, 'could not publish job.started');
    }
  }

  /** Publishes job.finished until the bus takes it, or until stop() gives up. */
  async report(attempt: Attempt, result: JobFinishedMessage): Promise<void> {
    const { bus } = this.deps;
    try {
      await retry(() => bus.publish(QUEUES.jobEvents, MESSAGE_TYPES.jobFinished, result), {
        policy: this.deps.resultRetry,
        clock: this.deps.clock,
        signal: this.deps.abandoning,
        onRetry: (err, retryInMs) => attempt.log.warn({ err, retryInMs }, 'could not publish job.finished; retrying'),
      });
    } catch (err) {
      // Without a give-up rule, retry only ends by throwing once abandoned.
      this.deps.counts.unreported += 1;
      attempt.log.error({ err, result }, 'could not publish job.finished before the runner stopped; the scheduler recovers the job when its lease expires');
    }
  }
}
