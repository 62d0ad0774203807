/**
 * One job attempt on a runner, its whole life in one place: job.started
 * (at once, or held back: docs/adr/0017), heartbeats every heartbeatMs (the
 * scheduler's lease on it), the execution (AttemptExecution, below: a
 * HEARTBEAT check over HTTP, or a CONTAINER job with its image policy, pull,
 * leftovers of earlier runs removed, log lines capped and sent to the log
 * sink), the outcome settled against a job.stop or the shutdown hand-back,
 * and job.finished, published until the bus takes it
 * (retryPolicies.resultPublish) or the runner's stop() abandons it.
 *
 * The runner (runner.ts) takes the job.run message, a slot and the attempt's
 * place among the running ones, and awaits start() before it acks the
 * message; the attempt lives on in the background (live()), and ends by
 * handing the slot back (`ended`). The runner tells it of a stop (stop()) or
 * of the shutdown (handBack()), and waits for `done`.
 */
import { Cancellation, onAbort, retry, type AbortLike, type Clock, type RetryPolicy } from '@orloj/common/core';
import { parsePayload, reasons, type CheckResultMessage, type ContainerPayload, type JobReason } from '@orloj/common/domain';
import type { LazyLogger, Logger } from '@orloj/common/logging';
import { MESSAGE_TYPES, QUEUES, type JobFinishedMessage, type JobHeartbeatMessage, type JobRunMessage } from '@orloj/common/messages';
import type { SignedBus } from '@orloj/common/envelope';
import { DEFAULT_MEMORY_MB, JOB_ID_LABEL, type ContainerExecutor, type ContainerRunSpec, type EnsureImageResult } from './executors/container.executor.js';
import type { HttpCheckExecutor } from './executors/http-check.executor.js';
import type { ImagePolicy } from './executors/image-policy.js';
import { ATTEMPT_LABEL, INSTALLATION_LABEL, RUNNER_ID_LABEL, WORKFLOW_ID_LABEL } from './container-labels.js';
import type { LogSink } from './log-sink.js';
import { LogCap } from './log-cap.js';

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

// ---- the execution ---------------------------------------------------------

/** What every attempt's execution of one runner shares: the executors, the image policy, the log sink. */
export interface AttemptExecutionDeps {
  runnerId: string;
  installationId: string | undefined;
  log: Logger;
  http: HttpCheckExecutor;
  containers: ContainerExecutor | undefined;
  imagePolicy: ImagePolicy | undefined;
  logSink: LogSink;
  /** Raised by every captured container line. */
  counts: { logLines: number };
}

/**
 * Runs one job attempt: a HEARTBEAT check over HTTP, or a CONTAINER job.
 * Returns the Outcome, which the attempt (JobAttempt) settles and reports;
 * it sees the attempt only through its read-only AttemptContext.
 */
export class AttemptExecution {
  constructor(private readonly deps: AttemptExecutionDeps) {}

  installationLabel(): Record<string, string> {
    return this.deps.installationId === undefined ? {} : { [INSTALLATION_LABEL]: this.deps.installationId };
  }

  async execute(attempt: AttemptContext): Promise<Outcome> {
    const { job, log, cancel } = attempt;
    if (attempt.problem !== undefined) {
      log.error({ problem: attempt.problem }, 'the job.run message is unusable');
      return { status: 'FAILED', reason: reasons.failureUnavailable() };
    }
    const parsed = parsePayload(job.kind, job.payload);
    if (!parsed.ok) {
      log.warn({ errors: parsed.errors }, 'the workflow payload is invalid');
      return { status: 'FAILED', reason: reasons.failureUnavailable() };
    }
    if (parsed.value.kind === 'HEARTBEAT') {
      const result = await this.deps.http.run(parsed.value.payload, { signal: cancel });
      if (result.status === 'CANCELED') return { status: 'CANCELED' };
      const check: CheckResultMessage = {
        response_time_ms: Math.round(result.durationMs),
        ...(result.statusCode === undefined ? {} : { status_code: result.statusCode }),
        ...(result.status === 'FAILED' ? { failure: result.failure } : {}),
      };
      if (result.status === 'FAILED') return { status: 'FAILED', reason: result.reason, check };
      return { status: 'COMPLETED', check };
    }
    return this.runContainer(attempt, parsed.value.payload, cancel);
  }

  /** ensureImage under the image policy: a refused registry is never pulled, not even looked up. */
  async ensureImage(containers: ContainerExecutor, image: string): Promise<EnsureImageResult> {
    const { imagePolicy } = this.deps;
    if (!imagePolicy) return containers.ensureImage(image);
    const decision = imagePolicy.decide(image);
    if (!decision.ok) return decision;
    return containers.ensureImage(image, { beforePull: decision.beforePull });
  }

  private async runContainer(attempt: AttemptContext, payload: ContainerPayload, cancel: Cancellation): Promise<Outcome> {
    const { job } = attempt;
    const { containers, imagePolicy } = this.deps;
    if (!containers) return { status: 'FAILED', reason: reasons.runtimeUnavailable(), systemFailure: true };
    const refused = imagePolicy?.refuseRun(payload);
    if (refused) return { status: 'FAILED', reason: refused };
    const image = await untilAborted(this.ensureImage(containers, payload.image), cancel);
    if (image === ABORTED) return { status: 'CANCELED' };
    if (!image.ok) return { status: 'FAILED', reason: image.reason };
    const capped = imagePolicy?.resources(payload, DEFAULT_MEMORY_MB);

    const spec: ContainerRunSpec = {
      jobId: job.job_id,
      image: payload.image,
      env: payload.env,
      timeoutMs: payload.timeout,
      network: payload.network,
      labels: { ...this.installationLabel(), [RUNNER_ID_LABEL]: this.deps.runnerId, [WORKFLOW_ID_LABEL]: job.workflow_id, [ATTEMPT_LABEL]: String(job.attempt) },
      ...(payload.cmd ? { cmd: payload.cmd } : {}),
      ...(payload.memory_mb === undefined ? {} : { memoryMb: payload.memory_mb }),
      ...(payload.cpus === undefined ? {} : { cpus: payload.cpus }),
      ...capped,
    };
    await this.removeSuperseded(job);
    return this.runCapturing(attempt, containers, spec, cancel);
  }

  /** Runs the container, its lines numbered, capped and written to the log sink, which is closed in any case. */
  private async runCapturing(attempt: AttemptContext, containers: ContainerExecutor, spec: ContainerRunSpec, cancel: Cancellation): Promise<Outcome> {
    const { job } = attempt;
    const writer = this.deps.logSink.open({
      job_id: job.job_id,
      workflow_id: job.workflow_id,
      attempt: job.attempt,
      log_retention: job.log_retention,
    });
    let sequence = 0;
    const limits = this.deps.imagePolicy?.limits;
    const cap = limits ? new LogCap(limits.maxLogLines, limits.maxLogBytes) : undefined;
    try {
      const result = await containers.run(spec, {
        signal: cancel.signal,
        onLine: (line) => {
          this.deps.counts.logLines += 1;
          switch (cap?.admit(line.message) ?? 'keep') {
            case 'keep':
              return writer.write({ ...line, sequence_num: sequence++ });
            case 'marker':
              attempt.log.warn({ maxLines: cap!.maxLines, maxBytes: cap!.maxBytes }, "the job's log reached the cap; the rest is counted, not stored");
              return writer.write({ stream: 'stderr', message: cap!.marker(), timestamp: line.timestamp, sequence_num: sequence++ });
            default:
              return;
          }
        },
      });
      const extra = {
        ...(result.containerId === undefined ? {} : { containerId: result.containerId }),
        ...(cap?.truncated ? { logTruncated: true } : {}),
      };
      if (result.status === 'FAILED') return { status: 'FAILED', reason: result.reason, ...extra };
      return { status: result.status, ...extra };
    } finally {
      try {
        // Analytics count what was printed, stored or not.
        await writer.close(cap?.truncated ? { lineCount: cap.printed } : undefined);
      } catch (err) {
        attempt.log.error({ err, lines: sequence }, 'the log sink failed to flush the last lines of the job');
      }
    }
  }

  /**
   * Removes what a crashed runner (with a one-off default id nobody will
   * reuse) left of this workflow's earlier work in this installation: runs
   * never overlap, so a container of an older job of the workflow (job ids
   * grow with time), or of an earlier attempt of this job, is a leftover.
   * Never anything newer: a late, stale message cannot cost a live run.
   */
  private async removeSuperseded(job: JobRunMessage): Promise<void> {
    const { containers, log } = this.deps;
    if (!containers || this.deps.installationId === undefined) return;
    try {
      const removed = await containers.removeOrphans({ ...this.installationLabel(), [WORKFLOW_ID_LABEL]: job.workflow_id }, (labels) => {
        const jobId = labels[JOB_ID_LABEL];
        if (jobId === undefined) return false;
        if (jobId !== job.job_id) return jobId < job.job_id;
        const attempt = Number(labels[ATTEMPT_LABEL]);
        return Number.isInteger(attempt) && attempt < job.attempt;
      });
      if (removed.length > 0) log.warn({ jobId: job.job_id, containers: removed }, 'removed containers left behind by earlier runs of this workflow');
    } catch (err) {
      log.warn({ err, jobId: job.job_id }, 'could not look for leftover containers of this workflow');
    }
  }
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
