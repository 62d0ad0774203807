/**
 * The runner role: a stateless worker with no database access. It takes job
 * attempts from QUEUES.jobs and image builds from QUEUES.builds, executes them
 * with the HEARTBEAT and CONTAINER executors, and reports on QUEUES.jobEvents.
 * docs/runners.md describes the protocol; common/src/messages/index.ts types it.
 *
 * Ack timing: a job.run message is held (unacked) while it waits for a free
 * execution slot, and acked once job.started is confirmed by the bus. The run
 * itself happens after the ack, so an hour-long container never holds a
 * message (RabbitMQ closes channels whose deliveries stay unacked too long).
 * From then on the scheduler tracks the attempt by its heartbeats (its lease)
 * and job.finished, which is retried until the bus takes it.
 *
 * This file is the role itself: what it does with each inbound message
 * (job.run, job.stop, build.run), its slots, and how it starts and drains.
 * One attempt's life, from job.started through running it to job.finished,
 * is attempt.ts; the options are runner-options.ts.
 */
import { setMaxListeners } from 'node:events';
import { type Clock, nonNegativeInt, positiveInt, retryPolicies } from '@orloj/common/core';
import { reasons, heartbeatInterval } from '@orloj/common/domain';
import { lazyChild, type LazyLogger, type Logger } from '@orloj/common/logging';
import {
  MESSAGE_TYPES,
  QUEUES,
  TOPICS,
  type BuildFinishedMessage,
  type JobRunMessage,
  type BuildRunMessage,
  type JobRunRead,
  type JobStopMessage,
} from '@orloj/common/messages';
import type { Envelope, SignedBus } from '@orloj/common/envelope';
import type { Subscription } from '@orloj/common/bus';
import type { ContainerExecutor } from './executors/container.executor.js';
import { ABORTED, attemptKey, AttemptExecution, JobAttempt, untilAborted, type AttemptDeps } from './attempt.js';
import { RUNNER_ID_LABEL } from './container-labels.js';
import { ExpiringSet } from './expiring-set.js';
import { discardingLogSink, type LogSink } from './log-sink.js';
import { Semaphore } from './semaphore.js';
import {
  DEFAULT_ABORT_GRACE_MS,
  DEFAULT_BUILD_CONCURRENCY,
  DEFAULT_CONCURRENCY,
  DEFAULT_LEASE_TTL_MS,
  DEFAULT_SHUTDOWN_GRACE_MS,
  DEFAULT_STOPPED_JOBS,
  type RunnerMetrics,
  type RunnerOptions,
} from './runner-options.js';

export { ATTEMPT_LABEL, INSTALLATION_LABEL, RUNNER_ID_LABEL, WORKFLOW_ID_LABEL } from './container-labels.js';

export {
  DEFAULT_CONCURRENCY,
  DEFAULT_LEASE_TTL_MS,
  DEFAULT_SHUTDOWN_GRACE_MS,
  type RunnerMetrics,
  type RunnerOptions,
} from './runner-options.js';

/** The runner is shutting down: the message goes back to the queue for another runner. */
export class RunnerStoppingError extends Error {
  constructor() {
    super('the runner is shutting down; the message goes back to the queue');
    this.name = 'RunnerStoppingError';
  }
}

/**
 * Job and build messages in a row that fail their signature check before the
 * runner takes itself out: one could be a forgery, several in a row mean this
 * runner does not hold the scheduler's key of this installation.
 */
export const SIGNATURE_FAILURES_BEFORE_WITHDRAWAL = 3;

export class Runner {
  readonly runnerId: string;
  /**
   * Why the runner takes no work (undefined while it does): set once it could
   * not verify several of the scheduler's messages in a row. Its /readyz names it.
   */
  keyProblem: string | undefined;
  private signatureFailures = 0;
  readonly installationId: string | undefined;
  private readonly bus: SignedBus;
  private readonly log: Logger;
  private readonly clock: Clock;
  private readonly containers: ContainerExecutor | undefined;
  private readonly logSink: LogSink;
  private readonly execution: AttemptExecution;
  /** What every attempt shares (attempt.ts). */
  private readonly attemptDeps: AttemptDeps;
  private readonly concurrency: number;
  private readonly buildConcurrency: number;
  private readonly heartbeatMs: number;
  private readonly shutdownGraceMs: number;
  private readonly abortGraceMs: number;

  private readonly slots: Semaphore;
  private readonly stoppedJobs: ExpiringSet;
  private readonly attempts = new Map<string, JobAttempt>();
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
    this.containers = options.containers;
    this.logSink = options.logSink ?? discardingLogSink;
    this.concurrency = positiveInt('concurrency', options.concurrency ?? DEFAULT_CONCURRENCY, 65_535);
    this.buildConcurrency = positiveInt('buildConcurrency', options.buildConcurrency ?? DEFAULT_BUILD_CONCURRENCY, 65_535);
    const leaseTtlMs = positiveInt('leaseTtlMs', options.leaseTtlMs ?? DEFAULT_LEASE_TTL_MS);
    this.heartbeatMs = heartbeatInterval(leaseTtlMs);
    // Under half the heartbeat interval: job.started always goes out before the first heartbeat.
    const startReportDelayMs = Math.min(nonNegativeInt('startReportDelayMs', options.startReportDelayMs ?? 0), Math.floor(this.heartbeatMs / 2));
    this.shutdownGraceMs = nonNegativeInt('shutdownGraceMs', options.shutdownGraceMs ?? DEFAULT_SHUTDOWN_GRACE_MS);
    this.abortGraceMs = nonNegativeInt('abortGraceMs', options.abortGraceMs ?? DEFAULT_ABORT_GRACE_MS);
    const retryInitialMs = positiveInt('resultRetry.initialMs', options.resultRetry?.initialMs ?? retryPolicies.resultPublish.initialMs);
    const retryMaxMs = Math.max(retryInitialMs, positiveInt('resultRetry.maxMs', options.resultRetry?.maxMs ?? retryPolicies.resultPublish.maxMs));
    this.slots = new Semaphore(this.concurrency);
    this.stoppedJobs = new ExpiringSet({
      clock: this.clock,
      ttlMs: positiveInt('stoppedJobs.ttlMs', options.stoppedJobs?.ttlMs ?? DEFAULT_STOPPED_JOBS.ttlMs),
      max: positiveInt('stoppedJobs.max', options.stoppedJobs?.max ?? DEFAULT_STOPPED_JOBS.max),
    });
    this.execution = new AttemptExecution({
      runnerId: this.runnerId,
      installationId: this.installationId,
      log: this.log,
      http: options.http,
      containers: this.containers,
      imagePolicy: options.imagePolicy,
      logSink: this.logSink,
      counts: this.counts,
    });
    this.attemptDeps = {
      runnerId: this.runnerId,
      bus: this.bus,
      clock: this.clock,
      execution: this.execution,
      heartbeatMs: this.heartbeatMs,
      startReportDelayMs,
      resultRetry: { ...retryPolicies.resultPublish, initialMs: retryInitialMs, maxMs: retryMaxMs },
      handingBack: this.handingBack.signal,
      abandoning: this.abandoning.signal,
      counts: this.counts,
    };
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

  /**
   * A runner with another installation's scheduler key refuses every job it
   * takes (each is dead-lettered and handed out again, late). After a few
   * refusals in a row it stops taking jobs and builds, so they go straight to
   * the runners that can verify them, and says why (keyProblem, /readyz).
   */
  private onSignatureCheck(passed: boolean): void {
    if (passed) {
      this.signatureFailures = 0;
      return;
    }
    this.signatureFailures += 1;
    if (this.signatureFailures < SIGNATURE_FAILURES_BEFORE_WITHDRAWAL || this.keyProblem !== undefined) return;
    this.keyProblem =
      `${this.signatureFailures} messages of the scheduler in a row failed their signature check: this runner does not hold ` +
      `this installation's scheduler public key (ORLOJ_SCHEDULER_PUBLIC_KEY, or DATA_DIR/keys); it takes no jobs until restarted with the right one`;
    this.log.error({ failures: this.signatureFailures }, this.keyProblem);
    // Not awaited: called from inside a consumer's handler, which the cancel may wait for.
    void Promise.allSettled([this.jobsSub?.cancel(), this.buildsSub?.cancel()]);
  }

  metrics(): RunnerMetrics {
    return {
      running: this.attempts.size,
      waiting: this.slots.waiting,
      ...this.counts,
      stoppedRemembered: this.stoppedJobs.size,
    };
  }

  // ---- lifecycle ----------------------------------------------------------

  private async doStart(): Promise<void> {
    if (this.accepting.signal.aborted) throw new RunnerStoppingError();
    if (this.containers) {
      try {
        const removed = await this.containers.removeOrphans({ [RUNNER_ID_LABEL]: this.runnerId, ...this.execution.installationLabel() });
        if (removed.length > 0) this.log.warn({ containers: removed }, 'removed containers left behind by a previous run of this runner');
      } catch (err) {
        // Not fatal: the runtime may come back; its jobs fail with SYSTEM_ERROR meanwhile.
        this.log.error({ err }, 'could not sweep leftover containers');
      }
    }
    try {
      // Control first, so no stop can slip between taking a job and listening for its stop.
      // Each handler takes one message type; the bus refuses any other, and any body its decoder refuses.
      this.controlSub = await this.bus.subscribe(TOPICS.jobControl, (envelope) => this.onControl(envelope.body), { accept: [MESSAGE_TYPES.jobStop] });
      const onSignatureCheck = (passed: boolean) => this.onSignatureCheck(passed);
      this.jobsSub = await this.bus.consume(QUEUES.jobs, (envelope) => this.onJobRun(envelope), { prefetch: this.concurrency, accept: [MESSAGE_TYPES.jobRun], onSignatureCheck });
      this.buildsSub = await this.bus.consume(QUEUES.builds, (envelope) => this.onBuildRun(envelope.body), {
        prefetch: this.buildConcurrency,
        accept: [MESSAGE_TYPES.buildRun],
        onSignatureCheck,
      });
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
      for (const attempt of handedBack) attempt.handBack();
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

  private async onJobRun(envelope: Envelope<JobRunRead>): Promise<void> {
    const { problem, ...job } = envelope.body;
    const key = attemptKey(job);
    const log = lazyChild(this.log, { jobId: job.job_id, workflowId: job.workflow_id, attempt: job.attempt });
    if (this.skip(job, key, log)) return;

    // Held unacked until a slot is free; stop() rejects the wait and the message goes back.
    const release = await this.slots.acquire(this.accepting.signal);
    if (this.accepting.signal.aborted) {
      release();
      throw new RunnerStoppingError(); // redelivered: nothing ran
    }
    if (this.skip(job, key, log)) {
      release();
      return;
    }
    const ended = () => {
      this.attempts.delete(key);
      release();
    };
    const attempt = new JobAttempt(this.attemptDeps, { job, problem, log, routine: envelope.req_id === undefined, ended });
    // Registered before job.started goes out, so a job.stop from now on reaches it.
    this.attempts.set(key, attempt);
    // Returning acks the message; the attempt lives on in the background. A throw redelivers it: nothing ran.
    await attempt.start();
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

  // ---- job.stop -----------------------------------------------------------

  private onControl(stop: JobStopMessage): void {
    // Remembered in any case: a later (re)delivery of its job.run is dropped.
    // A stop naming an attempt (a stale execution) concerns that attempt only.
    this.stoppedJobs.add(stop.attempt === undefined ? stop.job_id : `${stop.job_id}:${stop.attempt}`);
    for (const attempt of this.attempts.values()) {
      if (attempt.job.job_id !== stop.job_id) continue;
      if (stop.attempt !== undefined && attempt.job.attempt !== stop.attempt) continue;
      attempt.stop(stop.reason);
    }
  }

  // ---- build.run ----------------------------------------------------------

  private async onBuildRun(build: BuildRunMessage): Promise<void> {
    const log = this.log.child({ workflowId: build.workflow_id, buildToken: build.build_token, image: build.image });
    const head = { workflow_id: build.workflow_id, build_token: build.build_token };
    let result: BuildFinishedMessage;
    if (!this.containers) {
      result = { ...head, ok: false, reason: reasons.runtimeUnavailable() };
    } else {
      const image = await untilAborted(this.execution.ensureImage(this.containers, build.image), this.handingBack.signal);
      // Shutdown ran out of grace: the message goes back to the queue for another runner.
      if (image === ABORTED) throw new RunnerStoppingError();
      result = image.ok ? { ...head, ok: true } : { ...head, ok: false, reason: image.reason };
    }
    // A failed publish redelivers build.run; ensureImage is idempotent.
    await this.bus.publish(QUEUES.jobEvents, MESSAGE_TYPES.buildFinished, result);
    log.info({ ok: result.ok, reason: result.reason?.code }, 'build finished');
  }
}
