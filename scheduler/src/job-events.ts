import { Batcher, retry, retryPolicies, type Within } from '@orloj/common/core';
import { attemptEndOf, finishAttempt, isOpenAttempt, leaseExpiry, reasons, staleAttemptStop, startAttempt, type AttemptResult, type Job, type JobTransition } from '@orloj/common/domain';
import { MESSAGE_TYPES, type BuildFinishedMessage, type JobFinishedRead, type OrlojMessages } from '@orloj/common/messages';
import type { TypedEnvelope } from '@orloj/common/envelope';
import { applyJobOutcomes, recordBuildResult, type JobMove, type Store } from '@orloj/common/store';
import type { SchedulerContext } from './context.js';
import type { HandOut } from './hand-out.js';

/** The messages on QUEUES.jobEvents: runners → every scheduler replica (competing). */
export const JOB_EVENT_TYPES = [MESSAGE_TYPES.jobStarted, MESSAGE_TYPES.jobHeartbeat, MESSAGE_TYPES.jobFinished, MESSAGE_TYPES.buildFinished] as const;
export type JobEventType = (typeof JOB_EVENT_TYPES)[number];
/** A runner's event as the scheduler gets it: verified, and its body decoded. */
export type JobEvent = TypedEnvelope<OrlojMessages, JobEventType>;

/**
 * A job's start, lease renewal or result: applied with the other events of
 * its batch, set-wise (applyBatched). A start or a result is its lifecycle
 * unit's transition (`move`); a renewal, the lease's new end.
 */
type Batched = { readonly batched: true; readonly type: JobEventType; readonly jobId: string; readonly attempt: number } & (
  | { readonly kind: 'start' | 'finish'; move(now: number): JobTransition }
  | { readonly kind: 'renew'; leaseUntil(now: number): number }
);

/** A SYSTEM failure (it publishes the next attempt) and a build result: applied on their own. */
interface Alone {
  readonly batched: false;
  readonly type: JobEventType;
  apply(now: number): Promise<void>;
}

/** How one event is applied, decided once per event (JobEvents.plan). */
type Plan = Batched | Alone;

/**
 * The job and build events every scheduler replica applies to the store.
 * Idempotent: each transition is conditional on the attempt the event names,
 * so a duplicate or a stale attempt changes nothing.
 *
 * Starts, renewals and results waiting at the same moment are applied
 * together in one transaction (a Batcher, up to the consumer's prefetch),
 * set-wise (applyBatched): a few statements and one commit for the batch
 * instead of several statements and a commit per event, with the effect of
 * applying each alone in the order received. The handler resolves (and the
 * bus acks) only after the commit. When a batch fails, nothing of it was
 * committed and each of its events is applied on its own (patiently), so one
 * bad event costs the others nothing.
 */
export class JobEvents {
  private readonly batcher: Batcher<Batched>;

  constructor(
    private readonly c: SchedulerContext,
    private readonly handOut: HandOut,
  ) {
    this.batcher = new Batcher<Batched>({
      many: (plans, within) => this.applyMany(plans, within),
      one: (plan) => this.patiently(plan),
      // A job's start before its result, as received, when its batch failed and they go one by one.
      key: (plan) => plan.jobId,
      onBatchFailure: (err, events) => this.c.log.warn({ err, events }, 'could not apply a batch of job events; applying them one by one'),
    });
  }

  /** The consumer's handler: resolves once the event is applied (committed). */
  receive(event: JobEvent): Promise<void> {
    const plan = this.plan(event);
    return plan.batched ? this.batcher.receive(plan) : this.patiently(plan);
  }

  /**
   * Applies these events as one batch, as the consumer does with the events
   * waiting (tests call it to choose a batch). Resolves with each event's
   * outcome: rejected where the event could not be applied.
   */
  async applyEvents(events: readonly JobEvent[]): Promise<PromiseSettledResult<void>[]> {
    const plans = events.map((event) => this.plan(event));
    const batched = plans.filter((p): p is Batched => p.batched);
    const alone = plans.map((p) => (p.batched ? undefined : this.patiently(p)));
    const together = await this.batcher.apply(batched);
    let next = 0;
    return Promise.all(plans.map((p, i) => (p.batched ? together[next++]! : Promise.allSettled([alone[i]!]).then(([r]) => r!))));
  }

  /** The one dispatch over the event types. */
  private plan(event: JobEvent): Plan {
    const { type } = event;
    const { jobLeaseTtlMs } = this.c.config;
    switch (event.type) {
      case MESSAGE_TYPES.jobStarted: {
        const m = event.body;
        const start = { attempt: m.attempt, runnerId: m.runner_id, startedAt: m.started_at, containerId: m.container_id };
        return { batched: true, type, kind: 'start', jobId: m.job_id, attempt: m.attempt, move: (now) => startAttempt(start, now, jobLeaseTtlMs) };
      }
      case MESSAGE_TYPES.jobHeartbeat: {
        const m = event.body;
        return { batched: true, type, kind: 'renew', jobId: m.job_id, attempt: m.attempt, leaseUntil: (now) => leaseExpiry(now, jobLeaseTtlMs) };
      }
      case MESSAGE_TYPES.jobFinished: {
        const m = event.body;
        if (m.status === 'FAILED' && m.system_failure) return { batched: false, type, apply: (now) => this.systemFailure(m, now) };
        return { batched: true, type, kind: 'finish', jobId: m.job_id, attempt: m.attempt, move: () => finishAttempt(resultOf(m)) };
      }
      case MESSAGE_TYPES.buildFinished: {
        const m = event.body;
        return { batched: false, type, apply: (now) => this.buildFinished(m, now) };
      }
    }
  }

  /** One batch in one transaction; then a stop for each start or renewal the store no longer expects. */
  private async applyMany(plans: readonly Batched[], within: Within): Promise<PromiseSettledResult<void>[]> {
    const now = this.c.clock.now();
    const fresh = await this.c.store.transaction((tx) => applyBatched(tx, plans, now));
    // A job left the queue or a runner's slot: the leader (if it is this replica) hands out more now.
    // Every job that leaves the queue has a start (alone, or written with its result).
    this.handOut.leftQueue(plans.filter((p, i) => fresh[i] && p.kind === 'start').map((p) => p.jobId));
    if (plans.some((p) => p.kind !== 'renew')) this.c.roomFreed();
    // The jobs of the events that changed nothing (a start or renewal of a job canceled or handed to another
    // runner, a duplicate), in one read; none when every event changed something.
    const jobs = this.c.store.jobs.findByIds(plans.filter((_, i) => !fresh[i]).map((p) => p.jobId)).then((found) => new Map(found.map((j) => [j.id, j])));
    // As when applied alone: a failure here redelivers the event, which then changes nothing and checks again.
    // In the event's own context: its job.stop carries the request id the event carried.
    return Promise.allSettled(plans.map((p, i) => (fresh[i] ? undefined : within(i, async () => this.stopIfStale(p.jobId, p.attempt, (await jobs).get(p.jobId))))));
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
    const [fresh] = await this.c.store.transaction((tx) => applyBatched(tx, [plan], now));
    if (!fresh) await this.stopIfStale(plan.jobId, plan.attempt, await this.c.store.jobs.findById(plan.jobId));
  }

  /** A SYSTEM failure of the attempt the store expects: another attempt, or the end (HandOut.retryOrFail). */
  private async systemFailure(m: JobFinishedRead, now: number): Promise<void> {
    const job = await this.c.store.jobs.findById(m.job_id);
    if (isOpenAttempt(job, m.attempt)) {
      const reason = m.reason ?? reasons.failureUnavailable();
      await this.handOut.retryOrFail(job, now, reason, attemptEndOf(job, { runner: reason }));
    }
  }

  private async buildFinished(m: BuildFinishedMessage, now: number): Promise<void> {
    const applied = await this.c.store.transaction((tx) => recordBuildResult(tx, m.workflow_id, m.build_token, m.ok, now, m.reason));
    if (applied && !m.ok) this.c.log.info({ workflowId: m.workflow_id, reason: m.reason }, 'build failed');
  }

  /**
   * A runner reports an attempt the store no longer expects it to run (`job`,
   * read after the event changed nothing): the job was canceled, or handed to
   * another runner. Tell that runner to stop.
   */
  private async stopIfStale(jobId: string, attempt: number, job: Job | undefined): Promise<void> {
    const stop = staleAttemptStop(job, attempt);
    if (stop) return this.handOut.stop(jobId, stop, attempt);
  }
}

/** The result a runner reported, as the lifecycle's finish unit takes it. */
function resultOf(m: JobFinishedRead): AttemptResult {
  return {
    attempt: m.attempt,
    status: m.status,
    startedAt: m.started_at,
    finishedAt: m.finished_at,
    reason: m.reason,
    containerId: m.container_id,
    logTruncated: m.log_truncated,
    check: m.check,
  };
}

/**
 * Applies a batch of starts, lease renewals and results in the caller's
 * transaction, with the effect of applying them one by one in the order
 * received, in a few statements for the lot (JobMovesRepo.applyMany,
 * applyJobOutcomes). Returns, per event, whether the store still expects its
 * attempt to run: false for a start or renewal that found the job elsewhere
 * (the runner is told to stop); a result is never stale (its runner is done).
 *
 * The batch is cut into rounds so that nothing applied together depends on
 * anything else in it: a job's events go in consecutive rounds in the order
 * received (a start before the result that follows it), and a workflow's
 * results in different rounds (each outcome reads the workflow the one before
 * it left). Within a round the starts, renewals and results of different jobs
 * commute.
 */
export async function applyBatched(tx: Store, plans: readonly Batched[], now: number): Promise<boolean[]> {
  // The rounds need the workflow of each result; PostgreSQL locks the workflow of every event's job.
  const workflowOf = await tx.jobMoves.workflowsOf(plans.filter((p) => tx.dialect.rowLocks || p.kind === 'finish').map((p) => p.jobId));
  // PostgreSQL: every workflow this batch may lock, up front and in id order,
  // as the leader locks due workflows, so two batches (or a batch and the
  // leader) cannot deadlock over them.
  if (tx.dialect.rowLocks) await tx.workflows.lock([...new Set(workflowOf.values())]);
  const fresh = plans.map((p) => p.kind === 'finish');
  const startOf = startsWithTheirResults(plans);
  // A start whose result follows it is written by the result's UPDATE; its runner is done, nothing to stop.
  for (const i of startOf.values()) fresh[i] = true;
  for (const round of rounds(plans, workflowOf, new Set(startOf.values()))) {
    const starts: JobMove[] = [];
    const results: JobMove[] = [];
    for (const i of round) {
      const p = plans[i]!;
      if (p.kind === 'renew') fresh[i] = await tx.jobs.renewLease(p.jobId, p.attempt, p.leaseUntil(now), now);
      else if (p.kind === 'start') starts.push({ id: p.jobId, t: p.move(now) });
      else results.push({ id: p.jobId, t: withStart(p.move(now), startOf.has(i) ? plans[startOf.get(i)!]! : undefined, now) });
    }
    const started = new Set((await tx.jobMoves.applyMany(starts, now)).map((j) => j.id));
    for (const i of round) if (plans[i]!.kind === 'start') fresh[i] = started.has(plans[i]!.jobId);
    // Each result once: a repeated one finds the job ended and moves nothing.
    await applyJobOutcomes(tx, await tx.jobMoves.applyMany(results, now), now);
  }
  return fresh;
}

/**
 * Starts that the next event of their job in the batch, the same attempt's
 * result, follows (on the in-process bus a quick check sends both together,
 * docs/adr/0017): result index → start index. The result's transition is
 * allowed from QUEUED and sets what the start would have (its time; the
 * lease it would have set ends with it), so one UPDATE records both, with
 * the effect of the two applied in turn.
 */
function startsWithTheirResults(plans: readonly Batched[]): Map<number, number> {
  const out = new Map<number, number>();
  const pendingStart = new Map<string, number>();
  plans.forEach((p, i) => {
    const start = pendingStart.get(p.jobId);
    pendingStart.delete(p.jobId);
    if (p.kind === 'start') pendingStart.set(p.jobId, i);
    else if (p.kind === 'finish' && start !== undefined && plans[start]!.attempt === p.attempt) out.set(i, start);
  });
  return out;
}

/** A result's transition with what its start (merged into it) adds: the runner, and the container it named. */
function withStart(result: JobTransition, start: Batched | undefined, now: number): JobTransition {
  if (start?.kind !== 'start') return result;
  const { runnerId, containerId } = start.move(now).fields;
  return { ...result, fields: { runnerId, ...(containerId ? { containerId } : {}), ...result.fields } };
}

/** The batch's events (by index, but for `skip`) in rounds: a job once a round, a workflow's results in different rounds, order kept. */
function rounds(plans: readonly Batched[], workflowOf: ReadonlyMap<string, string>, skip: ReadonlySet<number>): number[][] {
  const out: number[][] = [];
  const jobRound = new Map<string, number>();
  const resultRound = new Map<string, number>();
  plans.forEach((p, i) => {
    if (skip.has(i)) return;
    const workflow = workflowOf.get(p.jobId);
    let r = (jobRound.get(p.jobId) ?? -1) + 1;
    if (p.kind === 'finish' && workflow !== undefined) r = Math.max(r, (resultRound.get(workflow) ?? -1) + 1);
    jobRound.set(p.jobId, r);
    if (p.kind === 'finish' && workflow !== undefined) resultRound.set(workflow, r);
    (out[r] ??= []).push(i);
  });
  return out;
}
