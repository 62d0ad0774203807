/**
 * The runner role: a stateless worker with no database access. It takes job
 * attempts from QUEUES.jobs and image builds from QUEUES.builds, executes them
 * with the HEARTBEAT and CONTAINER executors, and reports on QUEUES.jobEvents.
 * docs/runners.md describes the protocol; common/src/messages.ts types it.
 *
 * Ack timing: a job.run message is held (unacked) while it waits for a free
 * execution slot, and acked once job.started is confirmed by the bus. The run
 * itself happens after the ack, so an hour-long container never holds a
 * message (RabbitMQ closes channels whose deliveries stay unacked too long).
 * From then on the scheduler tracks the attempt by its heartbeats (its lease)
 * and job.finished, which is retried until the bus takes it.
 */
import { setMaxListeners } from 'node:events';
import { Cancellation, onAbort, type AbortLike, type Clock } from '@orloj/common/core';
import { parsePayload, reasons, type CheckResultMessage, type ContainerPayload, type JobReason } from '@orloj/common/domain';
import { lazyChild, type LazyLogger, type Logger } from '@orloj/common/logging';
import {
  MESSAGE_TYPES,
  QUEUES,
  TOPICS,
  type BuildFinishedMessage,
  type JobFinishedMessage,
  type JobHeartbeatMessage,
  type JobRunMessage,
  type JobStartedMessage,
} from '@orloj/common/messages';
import type { Envelope, SignedBus } from '@orloj/common/envelope';
import type { Subscription } from '@orloj/common/bus';
import { DEFAULT_MEMORY_MB, JOB_ID_LABEL, type ContainerExecutor, type ContainerRunSpec, type EnsureImageResult } from './executors/container.executor.js';
import type { HttpCheckExecutor } from './executors/http-check.executor.js';
import type { ImagePolicy } from './executors/image-policy.js';
import { ExpiringSet } from './expiring-set.js';
import { readBuildRun, readJobRun, readJobStop } from './inbound.js';
import { discardingLogSink, type LogSink } from './log-sink.js';
import { Semaphore, type Release } from './semaphore.js';
import { LogCap } from './log-cap.js';

/** Every container a runner starts carries its runner id, so a restarted runner can sweep its own leftovers. */
export const RUNNER_ID_LABEL = 'orloj.runner_id';
export const WORKFLOW_ID_LABEL = 'orloj.workflow_id';
/** The installation (keyFingerprint of its scheduler key): runners of another installation on the same runtime leave these alone. */
export const INSTALLATION_LABEL = 'orloj.installation';
export const ATTEMPT_LABEL = 'orloj.attempt';

export const DEFAULT_CONCURRENCY = 4;
export const DEFAULT_LEASE_TTL_MS = 30_000;
export const DEFAULT_SHUTDOWN_GRACE_MS = 30_000;

export interface RunnerOptions {
  /** Signs as role 'runners'; verifies with PRODUCER_POLICY (job.run/build.run from the scheduler, job.stop from scheduler or api). */
  bus: SignedBus;
  logger: Logger;
  clock: Clock;
  /**
   * Names this runner in job.started/heartbeat/finished and in the
   * `orloj.runner_id` label of its containers. Keep it stable across restarts
   * and unique among runners sharing a container runtime: on start, every
   * container labelled with it is removed as a leftover of a crash.
   */
  runnerId: string;
  /**
   * Names the installation this runner works for; its containers carry it,
   * and a runner only ever removes containers of its own installation. The
   * server passes the fingerprint of the scheduler's public key.
   */
  installationId?: string;
  http: HttpCheckExecutor;
  /** Absent when no container runtime is configured or reachable: CONTAINER jobs and builds then fail with SYSTEM_ERROR. */
  containers?: ContainerExecutor;
  /**
   * The operator's container rules (registry allow-list and address guard, network
   * switch, resource maxima), applied before every pull and run. main.ts always
   * passes one; without it images and settings are used as the payload says.
   */
  imagePolicy?: ImagePolicy;
  /** Job attempts run at once; also the jobs queue prefetch. Default 4. */
  concurrency?: number;
  /** The scheduler's lease on a running attempt; job.heartbeat is sent every leaseTtlMs / 3. Default 30 s. */
  leaseTtlMs?: number;
  /** How long stop() lets running attempts finish before handing them back. Default 30 s. */
  shutdownGraceMs?: number;
  /** After the grace: how long aborted attempts get to stop and report before stop() gives up on them. Default 10 s. */
  abortGraceMs?: number;
  /** build.run messages handled at once (image pulls). Default 2. */
  buildConcurrency?: number;
  /** Where captured container lines go: a BusLogSink in production. Default: counted, then dropped. */
  logSink?: LogSink;
  /** Backoff between attempts to publish job.finished: doubling from initialMs up to maxMs, with jitter. */
  resultRetry?: { initialMs?: number; maxMs?: number };
  /** Job ids stopped while not running here are remembered this long / this many (newest kept). Default 1 h / 10 000. */
  stoppedJobs?: { ttlMs?: number; max?: number };
}

export interface RunnerMetrics {
  /** Attempts started and not yet reported finished. */
  running: number;
  /** job.run messages held while waiting for a free slot. */
  waiting: number;
  completed: number;
  failed: number;
  canceled: number;
  /** job.run messages dropped because their job had been stopped. */
  dropped: number;
  /** Results that could not be published before stop() gave up (the scheduler recovers them by lease expiry). */
  unreported: number;
  /** Container log lines captured. */
  logLines: number;
  /** Size of the bounded set of stopped job ids. */
  stoppedRemembered: number;
}

type Outcome = (
  | { status: 'COMPLETED'; containerId?: string; check?: CheckResultMessage }
  | { status: 'FAILED'; reason: JobReason; systemFailure?: boolean; containerId?: string; check?: CheckResultMessage }
  | { status: 'CANCELED'; containerId?: string }
) & { logTruncated?: boolean };

interface Attempt {
  readonly key: string;
  readonly job: JobRunMessage;
  readonly problem: string | undefined;
  readonly startedAt: number;
  readonly log: LazyLogger;
  /** Aborts the execution (job.stop, or the hand-back at shutdown). */
  readonly cancel: Cancellation;
  /** Set by job.stop: the attempt is reported CANCELED with it. */
  stopReason?: JobReason;
  /** Set when the shutdown grace ran out: the attempt is reported as a system failure. */
  handedBack: boolean;
  /** Resolves once the attempt was reported (or given up on), or never started. */
  readonly done: Promise<void>;
  readonly markDone: () => void;
}

/** The runner is shutting down: the message goes back to the queue for another runner. */
export class RunnerStoppingError extends Error {
  constructor() {
    super('the runner is shutting down; the message goes back to the queue');
    this.name = 'RunnerStoppingError';
  }
}

const ABORTED = Symbol('aborted');

export class Runner {
  readonly runnerId: string;
  readonly installationId: string | undefined;
  private readonly bus: SignedBus;
  private readonly log: Logger;
  private readonly clock: Clock;
  private readonly http: HttpCheckExecutor;
  private readonly containers: ContainerExecutor | undefined;
  private readonly imagePolicy: ImagePolicy | undefined;
  private readonly logSink: LogSink;
  private readonly concurrency: number;
  private readonly buildConcurrency: number;
  private readonly heartbeatMs: number;
  private readonly shutdownGraceMs: number;
  private readonly abortGraceMs: number;
  private readonly retryInitialMs: number;
  private readonly retryMaxMs: number;

  private readonly slots: Semaphore;
  private readonly stoppedJobs: ExpiringSet;
  private readonly attempts = new Map<string, Attempt>();
  private readonly counts = { completed: 0, failed: 0, canceled: 0, dropped: 0, unreported: 0, logLines: 0 };

  /** Aborted by stop(): no new work is taken. */
  private readonly accepting = new AbortController();
  /** Aborted when the shutdown grace ran out: running attempts and builds are handed back. */
  private readonly handingBack = new AbortController();
  /** Aborted at the very end of stop(): result retries give up. */
  private readonly abandoning = new AbortController();

  private starting: Promise<void> | undefined;
  private stopping: Promise<void> | undefined;
  private jobsSub: Subscription | undefined;
  private buildsSub: Subscription | undefined;
  private controlSub: Subscription | undefined;

  constructor(options: RunnerOptions) {
    if (typeof options.runnerId !== 'string' || options.runnerId.trim() === '') throw new TypeError('runnerId must be a non-empty string');
    this.runnerId = options.runnerId;
    this.installationId = options.installationId;
    // Every job waiting for a slot and every result being retried listens on these: as
    // many listeners as there are jobs in flight is the design, not a leak.
    setMaxListeners(0, this.accepting.signal, this.handingBack.signal, this.abandoning.signal);
    this.bus = options.bus;
    this.clock = options.clock;
    this.log = options.logger.child({ role: 'runners', runnerId: options.runnerId });
    this.http = options.http;
    this.containers = options.containers;
    this.imagePolicy = options.imagePolicy;
    this.logSink = options.logSink ?? discardingLogSink;
    this.concurrency = positiveInt('concurrency', options.concurrency ?? DEFAULT_CONCURRENCY, 65_535);
    this.buildConcurrency = positiveInt('buildConcurrency', options.buildConcurrency ?? 2, 65_535);
    const leaseTtlMs = positiveInt('leaseTtlMs', options.leaseTtlMs ?? DEFAULT_LEASE_TTL_MS);
    this.heartbeatMs = Math.max(1, Math.floor(leaseTtlMs / 3));
    this.shutdownGraceMs = nonNegativeInt('shutdownGraceMs', options.shutdownGraceMs ?? DEFAULT_SHUTDOWN_GRACE_MS);
    this.abortGraceMs = nonNegativeInt('abortGraceMs', options.abortGraceMs ?? 10_000);
    this.retryInitialMs = positiveInt('resultRetry.initialMs', options.resultRetry?.initialMs ?? 250);
    this.retryMaxMs = Math.max(this.retryInitialMs, positiveInt('resultRetry.maxMs', options.resultRetry?.maxMs ?? 15_000));
    this.slots = new Semaphore(this.concurrency);
    this.stoppedJobs = new ExpiringSet({
      clock: this.clock,
      ttlMs: positiveInt('stoppedJobs.ttlMs', options.stoppedJobs?.ttlMs ?? 60 * 60_000),
      max: positiveInt('stoppedJobs.max', options.stoppedJobs?.max ?? 10_000),
    });
  }

  /**
   * Sweeps this runner's leftover containers, then starts taking work.
   * Memoised, a failed start included: build a new Runner to try again.
   */
  start(): Promise<void> {
    this.starting ??= this.doStart();
    return this.starting;
  }

  /**
   * Stops taking work, lets running attempts finish for up to
   * shutdownGraceMs, then aborts the rest and reports them FAILED as system
   * failures (SYSTEM_ERROR) so the scheduler retries them on another runner.
   * Idempotent: every call returns the same promise. The bus and the
   * executors belong to the caller, who closes them afterwards.
   */
  stop(): Promise<void> {
    this.stopping ??= this.doStop();
    return this.stopping;
  }

  metrics(): RunnerMetrics {
    return {
      running: this.attempts.size,
      waiting: this.slots.waiting,
      ...this.counts,
      stoppedRemembered: this.stoppedJobs.size,
    };
  }

  private installationLabel(): Record<string, string> {
    return this.installationId === undefined ? {} : { [INSTALLATION_LABEL]: this.installationId };
  }

  /**
   * Removes what a crashed runner (with a one-off default id nobody will
   * reuse) left of this workflow's earlier work in this installation: runs
   * never overlap, so a container of an older job of the workflow (job ids
   * grow with time), or of an earlier attempt of this job, is a leftover.
   * Never anything newer: a late, stale message cannot cost a live run.
   */
  private async removeSuperseded(job: JobRunMessage): Promise<void> {
    if (!this.containers || this.installationId === undefined) return;
    try {
      const removed = await this.containers.removeOrphans({ ...this.installationLabel(), [WORKFLOW_ID_LABEL]: job.workflow_id }, (labels) => {
        const jobId = labels[JOB_ID_LABEL];
        if (jobId === undefined) return false;
        if (jobId !== job.job_id) return jobId < job.job_id;
        const attempt = Number(labels[ATTEMPT_LABEL]);
        return Number.isInteger(attempt) && attempt < job.attempt;
      });
      if (removed.length > 0) this.log.warn({ jobId: job.job_id, containers: removed }, 'removed containers left behind by earlier runs of this workflow');
    } catch (err) {
      this.log.warn({ err, jobId: job.job_id }, 'could not look for leftover containers of this workflow');
    }
  }

  // ---- lifecycle ----------------------------------------------------------

  private async doStart(): Promise<void> {
    if (this.accepting.signal.aborted) throw new RunnerStoppingError();
    if (this.containers) {
      try {
        const removed = await this.containers.removeOrphans({ [RUNNER_ID_LABEL]: this.runnerId, ...this.installationLabel() });
        if (removed.length > 0) this.log.warn({ containers: removed }, 'removed containers left behind by a previous run of this runner');
      } catch (err) {
        // Not fatal: the runtime may come back; its jobs fail with SYSTEM_ERROR meanwhile.
        this.log.error({ err }, 'could not sweep leftover containers');
      }
    }
    try {
      // Control first, so no stop can slip between taking a job and listening for its stop.
      this.controlSub = await this.bus.subscribe(TOPICS.jobControl, (envelope) => this.onControl(envelope));
      this.jobsSub = await this.bus.consume(QUEUES.jobs, (envelope) => this.onJobRun(envelope), { prefetch: this.concurrency });
      this.buildsSub = await this.bus.consume(QUEUES.builds, (envelope) => this.onBuildRun(envelope), { prefetch: this.buildConcurrency });
    } catch (err) {
      await Promise.allSettled([this.jobsSub?.cancel(), this.buildsSub?.cancel(), this.controlSub?.cancel()]);
      throw err;
    }
    this.log.info(
      { concurrency: this.concurrency, heartbeatMs: this.heartbeatMs, containers: this.containers !== undefined },
      'runner started',
    );
  }

  private async doStop(): Promise<void> {
    this.accepting.abort(new RunnerStoppingError());
    await this.starting?.catch(() => undefined);
    this.log.info({ running: this.attempts.size }, 'runner stopping: no new work is taken');

    // Handlers waiting for a slot reject at once (their messages go back to the
    // queue); the control subscription stays, so stops still reach running jobs.
    const consumersCancelled = Promise.allSettled([this.jobsSub?.cancel(), this.buildsSub?.cancel()]);
    const drained = consumersCancelled.then(() => this.allAttemptsDone()).then(() => 'drained' as const);

    if ((await this.raceClock(drained, this.shutdownGraceMs)) === 'timeout') {
      const handedBack = [...this.attempts.values()];
      if (handedBack.length > 0) {
        this.log.warn(
          { jobs: handedBack.map((a) => a.key) },
          'shutdown grace is over: aborting the running jobs and handing them back to the scheduler',
        );
      }
      this.handingBack.abort(new RunnerStoppingError());
      for (const attempt of handedBack) {
        attempt.handedBack = true;
        attempt.cancel.abort();
      }
      if ((await this.raceClock(drained, this.abortGraceMs)) === 'timeout') {
        this.log.error(
          { jobs: [...this.attempts.keys()] },
          'aborted jobs did not report in time; the scheduler recovers them when their leases expire',
        );
      }
    }
    this.abandoning.abort();
    this.logSink.abandon?.();
    await this.controlSub?.cancel();
    this.log.info(this.metrics(), 'runner stopped');
  }

  private async allAttemptsDone(): Promise<void> {
    while (this.attempts.size > 0) await Promise.allSettled([...this.attempts.values()].map((a) => a.done));
  }

  /** Resolves with the promise's value, or 'timeout' after ms of clock time. */
  private async raceClock<T>(promise: Promise<T>, ms: number): Promise<T | 'timeout'> {
    const timer = new AbortController();
    try {
      return await Promise.race([promise, this.clock.sleep(ms, timer.signal).then(() => 'timeout' as const)]);
    } finally {
      timer.abort();
    }
  }

  // ---- job.run ------------------------------------------------------------

  private async onJobRun(envelope: Envelope): Promise<void> {
    if (envelope.type !== MESSAGE_TYPES.jobRun) {
      this.log.warn({ type: envelope.type, envelopeId: envelope.id }, 'dropped a message of an unexpected type from the jobs queue');
      return;
    }
    const read = readJobRun(envelope.body);
    if (!read.ok) {
      this.log.error({ envelopeId: envelope.id, problem: read.problem }, 'dropped a malformed job.run message');
      return;
    }
    const { job } = read;
    const key = `${job.job_id}:${job.attempt}`;
    const log = lazyChild(this.log, { jobId: job.job_id, workflowId: job.workflow_id, attempt: job.attempt });
    if (this.skip(job, key, log)) return;

    // Held unacked until a slot is free; stop() rejects the wait and the message goes back.
    const release = await this.slots.acquire(this.accepting.signal);
    let attempt: Attempt | undefined;
    try {
      if (this.accepting.signal.aborted) throw new RunnerStoppingError();
      if (this.skip(job, key, log)) {
        release();
        return;
      }
      let markDone!: () => void;
      const done = new Promise<void>((resolve) => (markDone = resolve));
      attempt = {
        key,
        job,
        problem: read.problem,
        startedAt: this.clock.now(),
        log,
        cancel: new Cancellation(),
        handedBack: false,
        done,
        markDone,
      };
      // Registered before job.started goes out, so a job.stop from now on reaches it.
      this.attempts.set(key, attempt);
      await this.bus.publish<JobStartedMessage>(QUEUES.jobEvents, MESSAGE_TYPES.jobStarted, {
        job_id: job.job_id,
        attempt: job.attempt,
        runner_id: this.runnerId,
        started_at: attempt.startedAt,
      });
    } catch (err) {
      if (attempt) {
        this.attempts.delete(key);
        attempt.markDone();
      }
      release();
      throw err; // redelivered: nothing ran
    }
    if (this.handingBack.signal.aborted) {
      attempt.handedBack = true;
      attempt.cancel.abort();
    }
    log.info({ kind: job.kind }, 'job started');
    // Returning acks the message; the attempt runs on in the background.
    this.runAttempt(attempt, release).catch((err: unknown) => log.error({ err }, 'the job attempt crashed'));
  }

  /** True when the message must be dropped (acked without running). */
  private skip(job: JobRunMessage, key: string, log: LazyLogger): boolean {
    if (this.stoppedJobs.has(job.job_id) || this.stoppedJobs.has(key)) {
      this.counts.dropped += 1;
      log.info('dropped job.run: the job was stopped');
      return true;
    }
    if (this.attempts.has(key)) {
      log.warn('dropped job.run: this attempt is already running here');
      return true;
    }
    return false;
  }

  private async runAttempt(attempt: Attempt, release: Release): Promise<void> {
    const heartbeatsOff = new Cancellation();
    const heartbeats = this.sendHeartbeats(attempt, heartbeatsOff);
    let outcome: Outcome;
    try {
      outcome = await this.execute(attempt);
    } catch (err) {
      attempt.log.error({ err }, 'the job attempt failed unexpectedly');
      outcome = { status: 'FAILED', reason: reasons.failureUnavailable(), systemFailure: true };
    } finally {
      heartbeatsOff.abort();
      await heartbeats;
    }
    const finishedAt = this.clock.now();
    const settled = this.settle(attempt, outcome);
    if (settled.status === 'COMPLETED') this.counts.completed += 1;
    else if (settled.status === 'FAILED') this.counts.failed += 1;
    else this.counts.canceled += 1;

    const { job } = attempt;
    const result: JobFinishedMessage = {
      job_id: job.job_id,
      attempt: job.attempt,
      runner_id: this.runnerId,
      status: settled.status,
      started_at: attempt.startedAt,
      finished_at: finishedAt,
      ...(settled.status === 'COMPLETED' ? {} : { reason: settled.reason }),
      ...(settled.systemFailure ? { system_failure: true } : {}),
      ...(settled.containerId === undefined ? {} : { container_id: settled.containerId }),
      ...(outcome.logTruncated ? { log_truncated: true } : {}),
      ...(outcome.status !== 'CANCELED' && outcome.check && settled.status === outcome.status ? { check: outcome.check } : {}),
    };
    attempt.log.info({ status: result.status, reason: result.reason?.code, systemFailure: result.system_failure }, 'job finished');
    try {
      await this.report(attempt, result);
    } finally {
      // The slot is freed only once the result is out: the scheduler never sees
      // more than `concurrency` started-but-unfinished attempts from one runner.
      this.attempts.delete(attempt.key);
      release();
      attempt.markDone();
    }
  }

  /** The outcome as reported: a stop message's reason, or the shutdown hand-back, decide a CANCELED run. */
  private settle(
    attempt: Attempt,
    outcome: Outcome,
  ): { status: JobFinishedMessage['status']; reason?: JobReason; systemFailure: boolean; containerId?: string } {
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

  private async execute(attempt: Attempt): Promise<Outcome> {
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
      const result = await this.http.run(parsed.value.payload, { signal: cancel });
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

  private async runContainer(attempt: Attempt, payload: ContainerPayload, cancel: Cancellation): Promise<Outcome> {
    const { job } = attempt;
    if (!this.containers) return { status: 'FAILED', reason: reasons.runtimeUnavailable(), systemFailure: true };
    const refused = this.imagePolicy?.refuseRun(payload);
    if (refused) return { status: 'FAILED', reason: refused };
    const image = await untilAborted(this.ensureImage(this.containers, payload.image), cancel);
    if (image === ABORTED) return { status: 'CANCELED' };
    if (!image.ok) return { status: 'FAILED', reason: image.reason };
    const capped = this.imagePolicy?.resources(payload, DEFAULT_MEMORY_MB);

    const spec: ContainerRunSpec = {
      jobId: job.job_id,
      image: payload.image,
      env: payload.env,
      timeoutMs: payload.timeout,
      network: payload.network,
      labels: { ...this.installationLabel(), [RUNNER_ID_LABEL]: this.runnerId, [WORKFLOW_ID_LABEL]: job.workflow_id, [ATTEMPT_LABEL]: String(job.attempt) },
      ...(payload.cmd ? { cmd: payload.cmd } : {}),
      ...(payload.memory_mb === undefined ? {} : { memoryMb: payload.memory_mb }),
      ...(payload.cpus === undefined ? {} : { cpus: payload.cpus }),
      ...capped,
    };
    await this.removeSuperseded(job);
    const writer = this.logSink.open({
      job_id: job.job_id,
      workflow_id: job.workflow_id,
      attempt: job.attempt,
      log_retention: job.log_retention,
    });
    let sequence = 0;
    const limits = this.imagePolicy?.limits;
    const cap = limits ? new LogCap(limits.maxLogLines, limits.maxLogBytes) : undefined;
    try {
      const result = await this.containers.run(spec, {
        signal: cancel.signal,
        onLine: (line) => {
          this.counts.logLines += 1;
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

  private async sendHeartbeats(attempt: Attempt, signal: Cancellation): Promise<void> {
    const { job } = attempt;
    const body: JobHeartbeatMessage = { job_id: job.job_id, attempt: job.attempt, runner_id: this.runnerId };
    for (;;) {
      await this.clock.sleep(this.heartbeatMs, signal);
      if (signal.aborted) return;
      try {
        await this.bus.publish(QUEUES.jobEvents, MESSAGE_TYPES.jobHeartbeat, body);
      } catch (err) {
        attempt.log.warn({ err }, 'could not publish a heartbeat');
      }
    }
  }

  /** Publishes job.finished until the bus takes it, or until stop() gives up. */
  private async report(attempt: Attempt, result: JobFinishedMessage): Promise<void> {
    for (let failures = 0; ; failures++) {
      try {
        await this.bus.publish(QUEUES.jobEvents, MESSAGE_TYPES.jobFinished, result);
        return;
      } catch (err) {
        if (this.abandoning.signal.aborted) {
          this.counts.unreported += 1;
          attempt.log.error(
            { err, result },
            'could not publish job.finished before the runner stopped; the scheduler recovers the job when its lease expires',
          );
          return;
        }
        const delayMs = this.backoff(failures);
        attempt.log.warn({ err, retryInMs: delayMs }, 'could not publish job.finished; retrying');
        await this.clock.sleep(delayMs, this.abandoning.signal);
      }
    }
  }

  /** Doubling delays with jitter (50-100 % of the step), so runners do not retry in step after an outage. */
  private backoff(failures: number): number {
    const step = Math.min(this.retryMaxMs, this.retryInitialMs * 2 ** Math.min(failures, 30));
    return Math.max(1, Math.round(step * (0.5 + Math.random() * 0.5)));
  }

  // ---- job.stop -----------------------------------------------------------

  private onControl(envelope: Envelope): void {
    if (envelope.type !== MESSAGE_TYPES.jobStop) return; // other control messages are not for runners
    const stop = readJobStop(envelope.body);
    if (!stop) {
      this.log.error({ envelopeId: envelope.id }, 'dropped a malformed job.stop message');
      return;
    }
    // Remembered in any case: a later (re)delivery of its job.run is dropped.
    // A stop naming an attempt (a stale execution) concerns that attempt only.
    this.stoppedJobs.add(stop.attempt === undefined ? stop.job_id : `${stop.job_id}:${stop.attempt}`);
    for (const attempt of this.attempts.values()) {
      if (attempt.job.job_id !== stop.job_id) continue;
      if (stop.attempt !== undefined && attempt.job.attempt !== stop.attempt) continue;
      attempt.stopReason ??= stop.reason;
      attempt.cancel.abort();
      attempt.log.info({ reason: stop.reason.code }, 'stopping the job');
    }
  }

  // ---- build.run ----------------------------------------------------------

  /** ensureImage under the image policy: a refused registry is never pulled, not even looked up. */
  private async ensureImage(containers: ContainerExecutor, image: string): Promise<EnsureImageResult> {
    if (!this.imagePolicy) return containers.ensureImage(image);
    const decision = this.imagePolicy.decide(image);
    if (!decision.ok) return decision;
    return containers.ensureImage(image, { beforePull: decision.beforePull });
  }

  private async onBuildRun(envelope: Envelope): Promise<void> {
    if (envelope.type !== MESSAGE_TYPES.buildRun) {
      this.log.warn({ type: envelope.type, envelopeId: envelope.id }, 'dropped a message of an unexpected type from the builds queue');
      return;
    }
    const build = readBuildRun(envelope.body);
    if (!build) {
      this.log.error({ envelopeId: envelope.id }, 'dropped a malformed build.run message');
      return;
    }
    const log = this.log.child({ workflowId: build.workflow_id, buildToken: build.build_token, image: build.image });
    const head = { workflow_id: build.workflow_id, build_token: build.build_token };
    let result: BuildFinishedMessage;
    if (!this.containers) {
      result = { ...head, ok: false, reason: reasons.runtimeUnavailable() };
    } else {
      const image = await untilAborted(this.ensureImage(this.containers, build.image), this.handingBack.signal);
      // Shutdown ran out of grace: the message goes back to the queue for another runner.
      if (image === ABORTED) throw new RunnerStoppingError();
      result = image.ok ? { ...head, ok: true } : { ...head, ok: false, reason: image.reason };
    }
    // A failed publish redelivers build.run; ensureImage is idempotent.
    await this.bus.publish(QUEUES.jobEvents, MESSAGE_TYPES.buildFinished, result);
    log.info({ ok: result.ok, reason: result.reason?.code }, 'build finished');
  }
}

/** The promise's value, or ABORTED as soon as the signal aborts (the work itself carries on unobserved). */
async function untilAborted<T>(promise: Promise<T>, signal: AbortLike): Promise<T | typeof ABORTED> {
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

function positiveInt(name: string, value: number, max = Number.MAX_SAFE_INTEGER): number {
  if (!Number.isSafeInteger(value) || value < 1 || value > max) throw new RangeError(`${name} must be an integer from 1 to ${max}, got ${value}`);
  return value;
}

function nonNegativeInt(name: string, value: number): number {
  if (!Number.isSafeInteger(value) || value < 0) throw new RangeError(`${name} must be a non-negative integer, got ${value}`);
  return value;
}
