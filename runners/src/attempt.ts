/**
 * One job attempt on a runner, its whole life in one place: job.started
 * (at once, or held back: docs/adr/0017), heartbeats every heartbeatMs (the
 * scheduler's lease on it), the execution (attempt-execution.ts), the outcome
 * settled against a job.stop or the shutdown hand-back, and job.finished,
 * published until the bus takes it (retryPolicies.resultPublish) or the
 * runner's stop() abandons it.
 *
 * The runner (runner.ts) takes the job.run message, a slot and the attempt's
 * place among the running ones, and awaits start() before it acks the
 * message; the attempt lives on in the background (live()), and ends by
 * handing the slot back (`ended`). The runner tells it of a stop (stop()) or
 * of the shutdown (handBack()), and waits for `done`.
 */
import { Cancellation, retry, type AbortLike, type Clock, type RetryPolicy } from '@orloj/common/core';
import { reasons, type CheckResultMessage, type JobReason } from '@orloj/common/domain';
import type { LazyLogger } from '@orloj/common/logging';
import { MESSAGE_TYPES, QUEUES, type JobFinishedMessage, type JobHeartbeatMessage, type JobRunMessage } from '@orloj/common/messages';
import type { SignedBus } from '@orloj/common/envelope';
import type { AttemptExecution } from './attempt-execution.js';

/** What an execution returned, before job.stop or the shutdown hand-back are taken into account (settle()). */
export type Outcome = (
  | { status: 'COMPLETED'; containerId?: string; check?: CheckResultMessage }
  | { status: 'FAILED'; reason: JobReason; systemFailure?: boolean; containerId?: string; check?: CheckResultMessage }
  | { status: 'CANCELED'; containerId?: string }
) & { logTruncated?: boolean };

/** What an execution is given of its attempt: read-only, the attempt's state stays here. */
export interface AttemptContext {
  readonly job: JobRunMessage;
  /** Why the job.run message is unusable, if it is. */
  readonly problem: string | undefined;
  readonly log: LazyLogger;
  /** Aborted by job.stop, or by the hand-back at shutdown. */
  readonly cancel: Cancellation;
}

/** What every attempt of one runner shares. */
export interface AttemptDeps {
  runnerId: string;
  bus: SignedBus;
  clock: Clock;
  execution: AttemptExecution;
  heartbeatMs: number;
  /** 0: job.started goes out before the attempt runs; else held back this long (RunnerOptions.startReportDelayMs). */
  startReportDelayMs: number;
  resultRetry: RetryPolicy;
  /** Aborted when the runner's shutdown grace ran out: an attempt that starts then is handed back at once. */
  handingBack: AbortLike;
  /** Aborted at the very end of the runner's stop(): result retries give up. */
  abandoning: AbortLike;
  /** Raised as attempts end and results are given up on. */
  counts: { completed: number; failed: number; canceled: number; unreported: number };
}

export interface Settled {
  status: JobFinishedMessage['status'];
  reason?: JobReason;
  systemFailure: boolean;
  containerId?: string;
}

export class JobAttempt implements AttemptContext {
  readonly key: string;
  readonly startedAt: number;
  readonly cancel = new Cancellation();
  /** Set by job.stop: the attempt is reported CANCELED with it. */
  private stopReason: JobReason | undefined;
  /** Set when the shutdown grace ran out: the attempt is reported as a system failure. */
  private handedBack = false;
  /** Resolves once the attempt was reported (or given up on), or never started. */
  readonly done: Promise<void>;
  private markDone!: () => void;

  readonly job: JobRunMessage;
  readonly problem: string | undefined;
  readonly log: LazyLogger;
  /**
   * An automatic run, caused by no request: its start and a COMPLETED end
   * are logged at debug, not info (one line each per check would be most of
   * a busy installation's output and a good part of its CPU).
   */
  readonly routine: boolean;
  /** The runner's part once the attempt is over: it forgets the attempt and frees its slot. */
  private readonly ended: () => void;

  constructor(
    private readonly deps: AttemptDeps,
    start: { job: JobRunMessage; problem: string | undefined; log: LazyLogger; routine: boolean; ended: () => void },
  ) {
    this.job = start.job;
    this.problem = start.problem;
    this.log = start.log;
    this.routine = start.routine;
    this.ended = start.ended;
    this.key = attemptKey(start.job);
    this.startedAt = deps.clock.now();
    this.done = new Promise<void>((resolve) => (this.markDone = resolve));
  }

  /**
   * job.started (unless it is held back), then the attempt lives on in the
   * background; the runner acks job.run once this resolves. A throw means
   * nothing ran: the attempt has ended and the message is redelivered.
   */
  async start(): Promise<void> {
    try {
      if (this.deps.startReportDelayMs === 0) await this.publishStarted();
    } catch (err) {
      this.end();
      throw err;
    }
    if (this.deps.handingBack.aborted) this.handBack();
    this.log[this.routine ? 'debug' : 'info']({ kind: this.job.kind }, 'job started');
    void this.live();
  }

  /** job.stop: reported CANCELED with the first stop's reason. */
  stop(reason: JobReason): void {
    this.stopReason ??= reason;
    this.cancel.abort();
    this.log.info({ reason: reason.code }, 'stopping the job');
  }

  /** The shutdown grace ran out: reported as a system failure, for another runner to retry. */
  handBack(): void {
    this.handedBack = true;
    this.cancel.abort();
  }

  /**
   * The attempt from after job.started to job.finished: heartbeats while it
   * executes, the outcome settled, counted, logged and published. Never throws;
   * `done` resolves when it returns.
   */
  private async live(): Promise<void> {
    const finished = new Cancellation();
    const { startReportDelayMs } = this.deps;
    const started = startReportDelayMs === 0 ? undefined : this.publishStartedAfter(startReportDelayMs, finished);
    try {
      const outcome = await this.executeWithHeartbeats();
      const result = this.finishedMessage(outcome, this.settle(outcome), this.deps.clock.now());
      this.count(result);
      const level = this.routine && result.status === 'COMPLETED' ? 'debug' : 'info';
      this.log[level]({ status: result.status, reason: result.reason?.code, systemFailure: result.system_failure }, 'job finished');
      finished.abort();
      await started;
      await this.publishFinished(result);
    } catch (err) {
      this.log.error({ err }, 'the job attempt crashed');
    } finally {
      // The slot is freed only once the result is out: the scheduler never sees
      // more than `concurrency` started-but-unfinished attempts from one runner.
      this.end();
    }
  }

  private end(): void {
    this.ended();
    this.markDone();
  }

  private async executeWithHeartbeats(): Promise<Outcome> {
    const heartbeatsOff = new Cancellation();
    const heartbeats = this.sendHeartbeats(heartbeatsOff);
    try {
      return await this.deps.execution.execute(this);
    } catch (err) {
      this.log.error({ err }, 'the job attempt failed unexpectedly');
      return { status: 'FAILED', reason: reasons.failureUnavailable(), systemFailure: true };
    } finally {
      heartbeatsOff.abort();
      await heartbeats;
    }
  }

  private count(result: JobFinishedMessage): void {
    const { counts } = this.deps;
    if (result.status === 'COMPLETED') counts.completed += 1;
    else if (result.status === 'FAILED') counts.failed += 1;
    else counts.canceled += 1;
  }

  /** The outcome as reported: a stop message's reason, or the shutdown hand-back, decide a CANCELED run. */
  private settle(outcome: Outcome): Settled {
    const containerId = outcome.containerId;
    const base = containerId === undefined ? {} : { containerId };
    if (outcome.status === 'COMPLETED') return { ...base, status: 'COMPLETED', systemFailure: false };
    if (outcome.status === 'FAILED') {
      return { ...base, status: 'FAILED', reason: outcome.reason, systemFailure: outcome.systemFailure ?? outcome.reason.code === 'SYSTEM_ERROR' };
    }
    if (this.stopReason) return { ...base, status: 'CANCELED', reason: this.stopReason, systemFailure: false };
    if (this.handedBack) return { ...base, status: 'FAILED', reason: reasons.runnerShutdown(), systemFailure: true };
    return { ...base, status: 'CANCELED', reason: reasons.cancellationUnavailable(), systemFailure: false };
  }

  /** The job.finished message for a settled attempt. */
  private finishedMessage(outcome: Outcome, settled: Settled, finishedAt: number): JobFinishedMessage {
    const { job } = this;
    return {
      job_id: job.job_id,
      attempt: job.attempt,
      runner_id: this.deps.runnerId,
      status: settled.status,
      started_at: this.startedAt,
      finished_at: finishedAt,
      ...(settled.status === 'COMPLETED' ? {} : { reason: settled.reason }),
      ...(settled.systemFailure ? { system_failure: true } : {}),
      ...(settled.containerId === undefined ? {} : { container_id: settled.containerId }),
      ...(outcome.logTruncated ? { log_truncated: true } : {}),
      ...(outcome.status !== 'CANCELED' && outcome.check && settled.status === outcome.status ? { check: outcome.check } : {}),
    };
  }

  // ---- what the scheduler is told ---------------------------------------

  /** job.started: the scheduler moves the job to RUNNING and its lease on the attempt begins. */
  private async publishStarted(): Promise<void> {
    const { job } = this;
    await this.deps.bus.publish(QUEUES.jobEvents, MESSAGE_TYPES.jobStarted, {
      job_id: job.job_id,
      attempt: job.attempt,
      runner_id: this.deps.runnerId,
      started_at: this.startedAt,
    });
  }

  /**
   * job.started held back (docs/adr/0017): sent after `delayMs` if the
   * attempt still runs then, or as soon as `finished` is aborted, which live()
   * does right before it publishes job.finished — the two then reach the
   * scheduler together and are applied in one transaction. `delayMs` stays
   * under the heartbeat interval, so a heartbeat never precedes it.
   */
  private async publishStartedAfter(delayMs: number, finished: Cancellation): Promise<void> {
    await this.deps.clock.sleep(delayMs, finished);
    try {
      await this.publishStarted();
    } catch (err) {
      // The result still goes out; a job it finds QUEUED is recovered as an unstarted one (queue timeout).
      this.log.warn({ err }, 'could not publish job.started');
    }
  }

  private async sendHeartbeats(signal: Cancellation): Promise<void> {
    const { job } = this;
    const { bus, clock, heartbeatMs } = this.deps;
    const body: JobHeartbeatMessage = { job_id: job.job_id, attempt: job.attempt, runner_id: this.deps.runnerId };
    for (;;) {
      await clock.sleep(heartbeatMs, signal);
      if (signal.aborted) return;
      try {
        await bus.publish(QUEUES.jobEvents, MESSAGE_TYPES.jobHeartbeat, body);
      } catch (err) {
        this.log.warn({ err }, 'could not publish a heartbeat');
      }
    }
  }

  /** Publishes job.finished until the bus takes it, or until the runner's stop() gives up. */
  private async publishFinished(result: JobFinishedMessage): Promise<void> {
    const { bus } = this.deps;
    try {
      await retry(() => bus.publish(QUEUES.jobEvents, MESSAGE_TYPES.jobFinished, result), {
        policy: this.deps.resultRetry,
        clock: this.deps.clock,
        signal: this.deps.abandoning,
        onRetry: (err, retryInMs) => this.log.warn({ err, retryInMs }, 'could not publish job.finished; retrying'),
      });
    } catch (err) {
      // Without a give-up rule, retry only ends by throwing once abandoned.
      this.deps.counts.unreported += 1;
      this.log.error({ err, result }, 'could not publish job.finished before the runner stopped; the scheduler recovers the job when its lease expires');
    }
  }
}

/** One attempt's key among the runner's: a job id and its attempt number. */
export function attemptKey(job: Pick<JobRunMessage, 'job_id' | 'attempt'>): string {
  return `${job.job_id}:${job.attempt}`;
}
