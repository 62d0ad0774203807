import { retry, retryPolicies } from '@orloj/common/core';
import { finishAttempt, isOpenAttempt, leaseExpiry, reasons, staleAttemptStop, startAttempt } from '@orloj/common/domain';
import { MESSAGE_TYPES, type BuildFinishedMessage, type JobFinishedRead, type JobStartedMessage, type OrlojMessages } from '@orloj/common/messages';
import type { TypedEnvelope } from '@orloj/common/envelope';
import { applyJobOutcome, recordBuildResult, type Store } from '@orloj/common/store';
import type { SchedulerContext } from './context.js';
import type { HandOut } from './hand-out.js';

/** The messages on QUEUES.jobEvents: runners → every scheduler replica (competing). */
export const JOB_EVENT_TYPES = [MESSAGE_TYPES.jobStarted, MESSAGE_TYPES.jobHeartbeat, MESSAGE_TYPES.jobFinished, MESSAGE_TYPES.buildFinished] as const;
export type JobEventType = (typeof JOB_EVENT_TYPES)[number];
/** A runner's event as the scheduler gets it: verified, and its body decoded. */
export type JobEvent = TypedEnvelope<OrlojMessages, JobEventType>;

/** A job's start, lease renewal or result: applied inside a batch's transaction. */
interface Batched {
  readonly batched: true;
  readonly type: JobEventType;
  readonly jobId: string;
  readonly attempt: number;
  /** false when the store no longer expects that attempt to run (its runner is told to stop after the commit). */
  apply(tx: Store, now: number): Promise<boolean>;
}

/** A SYSTEM failure (it publishes the next attempt) and a build result: applied on their own. */
interface Alone {
  readonly batched: false;
  readonly type: JobEventType;
  apply(now: number): Promise<void>;
}

/** How one event is applied, decided once per event (JobEvents.plan). */
type Plan = Batched | Alone;

interface Waiting {
  plan: Batched;
  resolve: () => void;
  reject: (err: unknown) => void;
}

/**
 * The job and build events every scheduler replica applies to the store.
 * Idempotent: each transition is conditional on the attempt the event names,
 * so a duplicate or a stale attempt changes nothing.
 *
 * Events waiting at the same moment are applied together in one transaction
 * (up to the consumer's prefetch): one commit for the batch instead of one
 * per event, which is most of an event's cost on SQLite. Each event is still
 * applied by its own conditional transition, in the order received, exactly as
 * when applied alone. The handler resolves (and the bus acks) only after the
 * commit. When a batch fails, nothing of it was committed and each of its
 * events is applied on its own (patiently), so one bad event costs the others
 * nothing.
 */
export class JobEvents {
  private waiting: Waiting[] = [];
  private flushing = false;

  constructor(
    private readonly c: SchedulerContext,
    private readonly handOut: HandOut,
  ) {}

  /** The consumer's handler: resolves once the event is applied (committed). */
  receive(event: JobEvent): Promise<void> {
    const plan = this.plan(event);
    if (!plan.batched) return this.patiently(plan);
    return new Promise<void>((resolve, reject) => {
      this.waiting.push({ plan, resolve, reject });
      if (!this.flushing) void this.flush();
    });
  }

  /**
   * Applies these events as one batch, as the consumer does with the events
   * waiting (tests call it to choose a batch). Resolves with each event's
   * outcome: rejected where the event could not be applied.
   */
  async applyEvents(events: readonly JobEvent[]): Promise<PromiseSettledResult<void>[]> {
    const batch: Waiting[] = [];
    const outcomes = events.map((event) => {
      const plan = this.plan(event);
      if (!plan.batched) return this.patiently(plan);
      return new Promise<void>((resolve, reject) => batch.push({ plan, resolve, reject }));
    });
    await this.applyBatch(batch);
    return Promise.allSettled(outcomes);
  }

  /** The one dispatch over the event types. */
  private plan(event: JobEvent): Plan {
    const { type } = event;
    switch (event.type) {
      case MESSAGE_TYPES.jobStarted: {
        const m = event.body;
        return { batched: true, type, jobId: m.job_id, attempt: m.attempt, apply: (tx, now) => this.started(tx, m, now) };
      }
      case MESSAGE_TYPES.jobHeartbeat: {
        const m = event.body;
        const apply = (tx: Store, now: number) => tx.jobs.renewLease(m.job_id, m.attempt, leaseExpiry(now, this.c.config.jobLeaseTtlMs), now);
        return { batched: true, type, jobId: m.job_id, attempt: m.attempt, apply };
      }
      case MESSAGE_TYPES.jobFinished: {
        const m = event.body;
        if (m.status === 'FAILED' && m.system_failure) return { batched: false, type, apply: (now) => this.systemFailure(m, now) };
        const apply = async (tx: Store, now: number) => (await this.finished(tx, m, now), true);
        return { batched: true, type, jobId: m.job_id, attempt: m.attempt, apply };
      }
      case MESSAGE_TYPES.buildFinished: {
        const m = event.body;
        return { batched: false, type, apply: (now) => this.buildFinished(m, now) };
      }
    }
  }

  private async flush(): Promise<void> {
    this.flushing = true;
    try {
      // Let the deliveries of this turn of the event loop join the first batch.
      await new Promise((resolve) => setImmediate(resolve));
      while (this.waiting.length > 0) {
        const batch = this.waiting;
        this.waiting = [];
        await this.applyBatch(batch);
      }
    } finally {
      // In the same step as the last look at `waiting`: an event that arrives
      // from here on starts the next flush instead of waiting for one.
      this.flushing = false;
    }
  }

  /** Applies the batch in one transaction, or each of its events on its own when that fails. Never throws. */
  private async applyBatch(batch: readonly Waiting[]): Promise<void> {
    if (batch.length === 0) return;
    const { store, clock } = this.c;
    const now = clock.now();
    let fresh: boolean[] = [];
    try {
      await store.transaction(async (tx) => {
        fresh = [];
        // PostgreSQL: every workflow this batch may lock, up front and in id
        // order, as the leader locks due workflows, so two batches (or a batch
        // and the leader) cannot deadlock over them.
        if (tx.dialect.rowLocks) await tx.workflows.lock(await tx.jobs.workflowIdsOf(batch.map((e) => e.plan.jobId)));
        for (const { plan } of batch) fresh.push(await plan.apply(tx, now));
      });
    } catch (err) {
      this.c.log.warn({ err, events: batch.length }, 'could not apply a batch of job events; applying them one by one');
      await Promise.all(batch.map((e) => this.patiently(e.plan).then(e.resolve, e.reject)));
      return;
    }
    await Promise.all(
      batch.map(async (e, i) => {
        if (fresh[i]) return e.resolve();
        // As when applied alone: a failure here redelivers the event, which then changes nothing and checks again.
        await this.stopIfStale(e.plan.jobId, e.plan.attempt).then(e.resolve, e.reject);
      }),
    );
  }

  /**
   * Applies an event on its own, waiting out a store outage (a database
   * restart) with backoff instead of failing the delivery: failed deliveries
   * count toward dead-lettering, and a runner's result must not be lost that
   * way. Only an error that persists for about a minute goes back to the bus.
   */
  private async patiently(plan: Plan): Promise<void> {
    return retry(() => this.alone(plan, this.c.clock.now()), {
      policy: retryPolicies.jobEventApply,
      clock: this.c.clock,
      signal: this.c.signal,
      onRetry: (err, delayMs) => this.c.log.warn({ err, type: plan.type, retryInMs: delayMs }, 'could not apply an event; retrying'),
    });
  }

  private async alone(plan: Plan, now: number): Promise<void> {
    if (!plan.batched) return plan.apply(now);
    const fresh = await this.c.store.transaction((tx) => plan.apply(tx, now));
    if (!fresh) await this.stopIfStale(plan.jobId, plan.attempt);
  }

  /** RUNNING for the attempt the runner started; false when the store no longer expects that attempt. */
  private started(store: Store, m: JobStartedMessage, now: number): Promise<boolean> {
    // Nothing of the row is needed back: one UPDATE, no read of the job.
    const start = { attempt: m.attempt, runnerId: m.runner_id, startedAt: m.started_at, containerId: m.container_id };
    return store.jobs.tryApply(m.job_id, startAttempt(start, now, this.c.config.jobLeaseTtlMs), now);
  }

  /** The runner's result for the attempt, and its outcome for the workflow, once (a repeated result finds the job ended). */
  private async finished(tx: Store, m: JobFinishedRead, now: number): Promise<void> {
    const result = {
      attempt: m.attempt,
      status: m.status,
      startedAt: m.started_at,
      finishedAt: m.finished_at,
      reason: m.reason,
      containerId: m.container_id,
      logTruncated: m.log_truncated,
      check: m.check,
    };
    const finished = await tx.jobs.apply(m.job_id, finishAttempt(result), now);
    if (finished) await applyJobOutcome(tx, finished, now);
  }

  /** A SYSTEM failure of the attempt the store expects: another attempt, or the end (HandOut.retryOrFail). */
  private async systemFailure(m: JobFinishedRead, now: number): Promise<void> {
    const job = await this.c.store.jobs.findById(m.job_id);
    if (isOpenAttempt(job, m.attempt)) {
      await this.handOut.retryOrFail(job, now, m.reason ?? reasons.failureUnavailable());
    }
  }

  private async buildFinished(m: BuildFinishedMessage, now: number): Promise<void> {
    const applied = await this.c.store.transaction((tx) => recordBuildResult(tx, m.workflow_id, m.build_token, m.ok, now));
    if (applied && !m.ok) this.c.log.info({ workflowId: m.workflow_id, reason: m.reason }, 'build failed');
  }

  /**
   * A runner reports an attempt the store no longer expects it to run: the job
   * was canceled, or handed to another runner. Tell that runner to stop.
   */
  private async stopIfStale(jobId: string, attempt: number): Promise<void> {
    const stop = staleAttemptStop(await this.c.store.jobs.findById(jobId), attempt);
    if (stop) return this.handOut.stop(jobId, stop, attempt);
  }
}
