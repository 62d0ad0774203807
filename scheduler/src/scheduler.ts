import { newId, systemClock, type Clock } from '@orloj/common/core';
import {
  checkFromMessage,
  firstSlotAfter,
  mostRecentSlot,
  newJob,
  parsePayload,
  queuedAtCreation,
  reasons,
  type Job,
  type JobReason,
  type Workflow,
} from '@orloj/common/domain';
import type { Logger } from '@orloj/common/logging';
import {
  MESSAGE_TYPES,
  QUEUES,
  TOPICS,
  type BuildFinishedMessage,
  type BuildRunMessage,
  type JobFinishedMessage,
  type JobHeartbeatMessage,
  type JobRunMessage,
  type JobStartedMessage,
  type JobStopMessage,
} from '@orloj/common/messages';
import type { Envelope, SignedBus } from '@orloj/common/envelope';
import type { Subscription } from '@orloj/common/bus';
import { applyJobOutcome, recordBuildResult, type Store } from '@orloj/common/store';
import { leaseHolder, LeaderLease } from './leader-lease.js';

export interface SchedulerConfig {
  /** How often the leader scans (clock time). */
  tickMs: number;
  leaderLeaseTtlMs: number;
  /** A RUNNING job whose runner has not renewed for this long is presumed lost. Runners renew at a third of it. */
  jobLeaseTtlMs: number;
  /** A QUEUED job not started for this long is re-enqueued as a new attempt; its old message expires then. */
  queueTimeoutMs: number;
  /** A QUEUED job whose message the bus never confirmed for this long is handed out again (the leader died mid-dispatch). */
  unsentTimeoutMs: number;
  /** A CONTAINER build with no result for this long is requested again. */
  buildTimeoutMs: number;
  /** Runner attempts per job before a SYSTEM failure becomes final. */
  maxAttempts: number;
  /** Rows each step handles per batch; a tick goes on with further batches while they come full. */
  batchSize: number;
  /**
   * Shortest pause between two passes, in real time. Between ticks the leader
   * wakes when the next slot falls due or the api nudges it, but never sooner
   * than this after its last pass, so slots due every few milliseconds (or a
   * stream of nudges) are taken in small batches instead of keeping it busy.
   */
  passGapMs: number;
  /**
   * Most QUEUED jobs (handed out, not yet started). When the runners fall
   * behind, the leader stops creating and handing out jobs until they catch
   * up, instead of spending the CPU they need; due workflows then wait and run
   * their most recent slot, as after downtime.
   */
  maxQueued: number;
  /** How often a stop request for a running job is repeated until the job ends. */
  stopResendMs: number;
  /**
   * Runner events held at once. The events waiting are applied together in
   * one transaction (see applyBatched), so this is also the largest batch.
   */
  eventPrefetch: number;
  /**
   * Most jobs of one user handed to the runners (QUEUED or RUNNING) at once
   * (MAX_ACTIVE_JOBS_PER_USER): beyond it the user's due workflows and manual
   * jobs wait, so one user cannot hold every runner slot while others wait.
   * Undefined: no per-user cap.
   */
  maxActivePerUser?: number | undefined;
}

export const DEFAULT_SCHEDULER_CONFIG: SchedulerConfig = {
  tickMs: 1_000,
  leaderLeaseTtlMs: 15_000,
  jobLeaseTtlMs: 30_000,
  queueTimeoutMs: 10 * 60_000,
  unsentTimeoutMs: 15_000,
  buildTimeoutMs: 5 * 60_000,
  maxAttempts: 3,
  batchSize: 500,
  passGapMs: 50,
  maxQueued: 2_000,
  stopResendMs: 30_000,
  eventPrefetch: 128,
};

export interface SchedulerDeps {
  store: Store;
  bus: SignedBus;
  clock: Clock;
  logger: Logger;
  /** This replica's name in the leader lease. */
  replicaId?: string;
  config?: Partial<SchedulerConfig>;
  /** Called when the leader skipped due slots (see SchedulerStats.slotsSkipped): a metrics layer may count them. */
  onSlotsSkipped?: (event: { workflowId: string; skipped: number }) => void;
}

/**
 * What this replica did that an operator watches, counted since it started;
 * plain numbers a metrics layer reads (Scheduler.stats).
 */
export interface SchedulerStats {
  /** Due slots that got no job of their own (runners behind, or the service down): only the latest missed slot runs. */
  slotsSkipped: number;
  /** Jobs handed out again because their message was known lost (in-process bus restarted). */
  jobsRecoveredAfterRestart: number;
  /** job.run messages that came back from the dead-letter queue (a runner refused them), and were handed out again. */
  jobsRefused: number;
}

/**
 * The scheduler role. Every replica applies job and build events from
 * runners to the store; one replica at a time — the holder of the leader
 * lease — also runs the loop: start builds, create one job per due slot,
 * hand jobs to runners, recover jobs whose runner vanished, and ask runners
 * to stop jobs of terminated workflows.
 *
 * Exactly-once job creation comes from the unique (workflow, slot) key;
 * non-overlapping runs from the unique "one QUEUED/RUNNING job per workflow"
 * key; idempotent event handling from conditional transitions guarded by the
 * attempt number.
 */
export class Scheduler {
  readonly config: SchedulerConfig;
  private readonly lease: LeaderLease;
  private readonly log: Logger;
  private readonly abort = new AbortController();
  private loop: Promise<void> | undefined;
  private events: Subscription | undefined;
  private wakes: Subscription | undefined;
  /** Aborts the leader loop's current sleep (wake()). */
  private sleeping: AbortController | undefined;
  private woken = false;
  private stopping: Promise<void> | undefined;
  /** Job events received and waiting for the next batch (applyBatched). */
  private waiting: WaitingEvent[] = [];
  private flushing = false;
  private refused: Subscription | undefined;
  /** Clock time this replica started: on the in-process bus, no message from before it exists any more. */
  private startedAt = 0;
  private restartRecovered = false;
  /** Refusals per job, to space out handing out a job that keeps coming back (bounded: cleared when it grows). */
  private readonly refusals = new Map<string, number>();
  readonly stats: SchedulerStats = { slotsSkipped: 0, jobsRecoveredAfterRestart: 0, jobsRefused: 0 };

  constructor(private readonly deps: SchedulerDeps) {
    this.config = { ...DEFAULT_SCHEDULER_CONFIG, ...deps.config };
    this.log = deps.logger;
    this.lease = new LeaderLease({
      store: deps.store,
      clock: deps.clock,
      logger: deps.logger,
      // Per process, whatever the configured id: two replicas given one SCHEDULER_ID
      // take turns with rising fencing tokens instead of both leading with one token.
      holder: leaseHolder(deps.replicaId ?? 'scheduler', newId()),
      ttlMs: this.config.leaderLeaseTtlMs,
    });
  }

  /** Slots passed over without a job since start (a job was still open, or the leader was late by more than an interval). */
  get skippedSlots(): number {
    return this.stats.slotsSkipped;
  }

  get isLeader(): boolean {
    return this.lease.fencingToken !== undefined;
  }

  /** Starts applying events and (unless `leaderLoop` is false, as in tests that call tick()) the leader loop. */
  async start(options: { leaderLoop?: boolean } = {}): Promise<void> {
    this.startedAt = this.deps.clock.now();
    // Every replica: a job message a runner refused (failed signature check) is handed out again at once.
    this.refused = await this.deps.bus.consumeDeadLetters(QUEUES.jobs, (message) => this.onRefusedJob(message), { prefetch: 16 });
    this.events = await this.deps.bus.consume(QUEUES.jobEvents, (envelope) => this.applyBatched(envelope), {
      prefetch: this.config.eventPrefetch,
    });
    if (options.leaderLoop !== false) {
      this.wakes = await this.deps.bus.subscribe(TOPICS.schedulerWake, () => this.wake());
      this.loop = this.run();
    }
  }

  stop(): Promise<void> {
    this.stopping ??= (async () => {
      this.abort.abort();
      await this.loop;
      await this.wakes?.cancel();
      await this.events?.cancel();
      await this.refused?.cancel();
      await this.lease.release();
    })();
    return this.stopping;
  }

  /**
   * The leader loop. Every `tickMs` a full tick (lease renewal, builds,
   * recovery, stops); in between, passes over due slots timed by the earliest
   * `next_due_at`, so a job starts close to its due time rather than up to a
   * tick later.
   */
  private async run(): Promise<void> {
    const { clock } = this.deps;
    const { signal } = this.abort;
    let nextTick = clock.now();
    while (!signal.aborted) {
      let wakeAt: number;
      try {
        if (this.woken || clock.now() >= nextTick) {
          this.woken = false;
          nextTick = clock.now() + this.config.tickMs;
          if (await this.lease.renew()) await this.tick();
        } else if (this.isLeader) {
          await this.duePass(clock.now());
        }
        wakeAt = this.isLeader ? Math.min(nextTick, await this.nextDueAt()) : nextTick;
      } catch (err) {
        this.log.error({ err }, 'scheduler tick failed; retrying on the next tick');
        wakeAt = nextTick;
      }
      // A floor in real time, whatever the clock: it bounds the leader's CPU, not the schedule.
      await systemClock.sleep(this.config.passGapMs, signal);
      if (this.woken || signal.aborted) continue;
      this.sleeping = new AbortController();
      await clock.sleep(Math.max(0, wakeAt - clock.now()), AbortSignal.any([signal, this.sleeping.signal]));
      this.sleeping = undefined;
    }
  }

  /**
   * Asks the leader for a tick now: the api nudges it when a build or a manual
   * job is waiting. Nudges that come faster than `passGapMs` share one tick.
   */
  wake(): void {
    if (!this.isLeader) return;
    this.woken = true;
    this.sleeping?.abort();
  }

  /** One pass of the leader's work. Safe to run concurrently with another leader. */
  async tick(): Promise<void> {
    const now = this.deps.clock.now();
    if (!this.restartRecovered) await this.recoverRestart(now);
    await this.startBuilds(now);
    await this.duePass(now);
    await this.recover(now);
    await this.requestStops(now);
  }

  /**
   * Creates the jobs of due slots and hands out pending jobs, batch after
   * batch while batches come full (a burst of due slots), yielding to the event
   * loop between them so runner events keep being applied, for at most one
   * tick; the next wake continues.
   */
  private async duePass(now: number): Promise<void> {
    const { clock, store } = this.deps;
    // At most a tick's worth of (clock) time, so the leader renews its lease in time.
    const until = clock.now() + this.config.tickMs;
    for (;;) {
      const room = this.config.maxQueued - (await store.jobs.countQueued(this.config.maxQueued));
      if (room <= 0) return;
      const limit = Math.min(this.config.batchSize, room);
      const created = await this.createDueJobs(now, limit);
      // PENDING jobs (manual ones), in the room the due slots left.
      const left = limit - created;
      const dispatched = left > 0 ? await this.dispatch(now, left) : 0;
      if ((created < limit && dispatched < left) || clock.now() >= until || this.abort.signal.aborted) return;
      await new Promise((resolve) => setImmediate(resolve));
    }
  }

  /** When the next slot falls due, or since when a manual job waits to be handed out. */
  private async nextDueAt(): Promise<number> {
    const { store } = this.deps;
    // A user at their share has nothing due until a job of theirs ends (seen by the next tick).
    const fair = { maxActivePerUser: this.config.maxActivePerUser };
    const times = [await store.workflows.nextDueAt(fair), await store.jobs.nextPendingAt(fair)];
    return Math.min(...times.map((t) => t ?? Number.POSITIVE_INFINITY));
  }

  // ---- builds ---------------------------------------------------------------

  private async startBuilds(now: number): Promise<void> {
    const { store } = this.deps;
    const pending = [
      ...(await store.workflows.queuedBuilds(this.config.batchSize)),
      ...(await store.workflows.staleBuilds(now - this.config.buildTimeoutMs, this.config.batchSize)),
    ];
    for (const w of pending) {
      const parsed = parsePayload(w.kind, w.payload);
      if (!parsed.ok || parsed.value.kind === 'HEARTBEAT') {
        // A HEARTBEAT build is validation only.
        await store.transaction((tx) => recordBuildResult(tx, w.id, w.buildToken, parsed.ok, now));
        continue;
      }
      const token = await store.workflows.startBuild(w.id, w.buildToken, now);
      if (token === undefined) continue;
      const body: BuildRunMessage = { workflow_id: w.id, build_token: token, image: parsed.value.payload.image };
      await this.publish(QUEUES.builds, MESSAGE_TYPES.buildRun, body, this.config.buildTimeoutMs);
    }
  }

  // ---- due slots ------------------------------------------------------------

  /**
   * Creates the jobs of due slots, QUEUED at once (the workflows are locked and
   * free: nothing else may hand them out first), and hands them to the runners.
   * Returns how many due workflows it looked at (a full batch means there may
   * be more).
   */
  private async createDueJobs(now: number, limit: number): Promise<number> {
    const { store } = this.deps;
    const due = await store.workflows.due(now, limit, { maxActivePerUser: this.config.maxActivePerUser });
    if (due.length === 0) return 0;
    const skips: { id: string; skipped: number; slot: number }[] = [];
    const handOut = await store.transaction(async (tx) => {
      skips.length = 0; // a retried transaction counts again
      // Locked first, so a job that ends meanwhile is either seen ended here, or
      // sees the workflow set aside below and makes it due again (applyJobOutcome).
      await tx.workflows.lock(due.map((w) => w.id));
      const busy = await tx.jobs.workflowsWithOpenJobs(due.map((w) => w.id));
      const share = await this.userShare(tx, due.map((w) => w.userId));
      const jobs: [Job, Workflow][] = [];
      const next: { id: string; nextDueAt: number }[] = [];
      skips.length = 0;
      for (const w of due) {
        if (w.buildCompletedAt === null) continue;
        // The user's share is taken: the workflow stays due and runs its most recent slot later.
        if (!busy.has(w.id) && !share(w.userId)) continue;
        const intervalMs = w.intervalMinutes * 60_000;
        if (busy.has(w.id)) {
          // Runs never overlap: this slot is skipped for now. The workflow waits
          // for its next slot, or, when its job ends first, runs this (most
          // recent missed) slot then (applyJobOutcome).
          next.push({ id: w.id, nextDueAt: firstSlotAfter(w.buildCompletedAt, intervalMs, now) });
          continue;
        }
        const slot = mostRecentSlot(w.buildCompletedAt, intervalMs, now);
        // The slots from next_due_at up to this one get no job of their own.
        // (next_due_at is off the slot grid after a job that ended late made the workflow due at once: it stands for the slot before it.)
        const skipped = w.nextDueAt === null ? 0 : Math.max(0, Math.ceil((slot - w.nextDueAt) / intervalMs - 1e-9));
        if (skipped > 0) skips.push({ id: w.id, skipped, slot });
        jobs.push([queuedAtCreation(newJob(w, 'AUTOMATIC', slot, now), now), w]);
        next.push({ id: w.id, nextDueAt: slot + intervalMs });
      }
      // The whole batch in two statements; the unique (workflow, slot) key still skips a slot that has its job.
      const inserted = new Set(await tx.jobs.insertMany(jobs.map(([job]) => job)));
      await tx.workflows.setNextDueMany(next);
      const created = jobs.filter(([job]) => inserted.has(job.id));
      // Only where this pass created the slot's job: a second leader's pass over the same slot records nothing.
      const createdFor = new Set(created.map(([job]) => job.workflowId));
      const recorded = skips.filter((k) => createdFor.has(k.id));
      skips.length = 0;
      skips.push(...recorded);
      await tx.workflows.recordSkippedSlots(recorded.map((k) => ({ id: k.id, skipped: k.skipped, at: now })));
      return created;
    });
    this.reportSkipped(skips);
    // After the commit: a leader that dies before this leaves the jobs QUEUED and unconfirmed, and the sweep sends them.
    await this.sendJobs(handOut);
    return due.length;
  }

  /** Skipped slots: a warn line per pass, the stats counter, and the hook. */
  private reportSkipped(skips: readonly { id: string; skipped: number; slot: number }[]): void {
    if (skips.length === 0) return;
    let total = 0;
    for (const k of skips) {
      total += k.skipped;
      this.deps.onSlotsSkipped?.({ workflowId: k.id, skipped: k.skipped });
    }
    this.stats.slotsSkipped += total;
    this.log.warn(
      { slotsSkipped: total, workflows: skips.length, sample: skips.slice(0, 5).map((k) => ({ workflowId: k.id, skipped: k.skipped })) },
      'skipped due slots: only the most recent missed slot of each workflow runs (runners behind, or orloj was down)',
    );
  }

  // ---- dispatch -------------------------------------------------------------

  /** Returns how many pending jobs it looked at (a full batch means there may be more). */
  private async dispatch(now: number, limit: number): Promise<number> {
    const { store } = this.deps;
    const found = await store.jobs.dispatchable(now, limit, { maxActivePerUser: this.config.maxActivePerUser });
    if (found.length === 0) return 0;
    const share = await this.userShare(store, found.map((j) => j.userId));
    const jobs = found.filter((j) => share(j.userId));
    const workflows = new Map((await store.workflows.findByIds(jobs.map((j) => j.workflowId))).map((w) => [w.id, w]));
    const queued: [Job, Workflow][] = [];
    for (const moved of await this.queueAll(jobs.filter((j) => workflows.has(j.workflowId)), now)) {
      queued.push([moved, workflows.get(moved.workflowId)!]);
    }
    await this.sendJobs(queued);
    return found.length;
  }

  /**
   * Takes a place in its user's share of the runners (maxActivePerUser), for
   * a batch: true while the user had fewer jobs handed out than the cap.
   */
  private async userShare(store: Store, userIds: readonly string[]): Promise<(userId: string) => boolean> {
    const cap = this.config.maxActivePerUser;
    if (cap === undefined) return () => true;
    const active = await store.jobs.activeCountsByUser(userIds);
    return (userId) => {
      const n = active.get(userId) ?? 0;
      if (n >= cap) return false;
      active.set(userId, n + 1);
      return true;
    };
  }

  /**
   * Moves the jobs to QUEUED as their next attempt: all in one statement, or,
   * when that would give a workflow a second active job (another leader, or a
   * manual job, got there first), one by one, each job that would overlap
   * waiting.
   */
  private async queueAll(jobs: readonly Job[], now: number): Promise<Job[]> {
    const { store } = this.deps;
    const all = await this.guardOverlap(() => store.jobs.queueNextAttempts(jobs, now));
    if (all) return all;
    const moved: Job[] = [];
    for (const job of jobs) {
      const one = await this.guardOverlap(() =>
        store.jobs.transition(job.id, 'QUEUED', now, { attempts: job.attempts + 1, queuedAt: now }, { attempts: job.attempts }),
      );
      if (one) moved.push(one);
    }
    return moved;
  }

  /** The one-active-job-per-workflow key refuses a second QUEUED job; that job simply waits. */
  private async guardOverlap<T>(move: () => Promise<T | undefined>): Promise<T | undefined> {
    try {
      return await move();
    } catch (err) {
      if (this.deps.store.dialect.isUniqueViolation(err)) return undefined;
      throw err;
    }
  }

  /**
   * Publishes the jobs' messages and records which ones the bus confirmed. A
   * message expires when the sweep would hand its job out again, so a late
   * delivery of an old attempt is refused instead of running twice. A job whose
   * publish failed stays QUEUED and unconfirmed; the sweep hands it out again.
   */
  private async sendJobs(jobs: readonly (readonly [Job, Workflow])[]): Promise<void> {
    const sent: { id: string; attempts: number }[] = [];
    await Promise.all(
      jobs.map(async ([job, workflow]) => {
        const body: JobRunMessage = {
          job_id: job.id,
          workflow_id: job.workflowId,
          attempt: job.attempts,
          kind: workflow.kind,
          payload: workflow.payload,
          log_retention: workflow.logRetention,
        };
        try {
          await this.publish(QUEUES.jobs, MESSAGE_TYPES.jobRun, body, this.config.queueTimeoutMs);
          sent.push({ id: job.id, attempts: job.attempts });
        } catch (err) {
          this.log.warn({ err, jobId: job.id }, 'could not hand a job to the runners; it will be retried');
        }
      }),
    );
    await this.deps.store.jobs.markDispatched(sent, this.deps.clock.now());
  }

  // ---- recovery -------------------------------------------------------------

  /**
   * Once, when this replica first leads: on the in-process bus a restart lost
   * every message and every runner of the process before, so a job handed out
   * before this replica started cannot be started by anyone. A QUEUED one is
   * handed out again now, on the same attempt (no copy of its message
   * survived the process, so the attempt never ran); a RUNNING one lost
   * its runner, which is a SYSTEM failure of that attempt (retried). On a
   * broker the messages outlive the restart and nothing is done here
   * (docs/adr/0006-recovery-after-restarts.md).
   */
  private async recoverRestart(now: number): Promise<void> {
    if (!this.deps.bus.inProcess) {
      this.restartRecovered = true;
      return;
    }
    const { store } = this.deps;
    let recovered = 0;
    for (;;) {
      const open = await store.jobs.openSince(this.startedAt, this.config.batchSize);
      if (open.length === 0) break;
      const queued = open.filter((j) => j.status === 'QUEUED');
      const workflows = new Map((await store.workflows.findByIds(queued.map((j) => j.workflowId))).map((w) => [w.id, w]));
      // The same attempt: its message died with the old process, no copy of it can run.
      const moved = await store.jobs.resendSameAttempt(queued.filter((j) => workflows.has(j.workflowId)), now);
      await this.sendJobs(moved.map((j) => [j, workflows.get(j.workflowId)!] as const));
      for (const job of open.filter((j) => j.status === 'RUNNING')) await this.retryOrFail(job, now, reasons.leaseLost(job.attempts));
      recovered += open.length;
      // Whatever did not move (a job of a deleted workflow) is left to the sweep; do not loop on it.
      if (open.length < this.config.batchSize || moved.length === 0) break;
    }
    this.restartRecovered = true;
    this.stats.jobsRecoveredAfterRestart += recovered;
    if (recovered > 0) this.log.warn({ jobs: recovered }, 'handed out again the jobs queued or running before the restart (their in-process messages were lost)');
  }

  /**
   * A job.run message on `jobs.dead`: a runner refused it (it failed that
   * runner's signature check) or it failed on every delivery. The message is
   * untrusted; the store decides: a job still QUEUED and unstarted on that
   * attempt waits for no one and is handed out again on the same attempt
   * (attempts count runs; this one never ran), after a pause that
   * grows while the same job keeps coming back (a misconfigured runner that
   * refuses everything must not spin the leader), so a healthy runner takes it
   * within seconds.
   */
  private async onRefusedJob(message: unknown): Promise<void> {
    const body = (message as { body?: { job_id?: unknown; attempt?: unknown } } | null)?.body;
    const claimed = (message as { producer?: unknown } | null)?.producer;
    if (typeof body?.job_id !== 'string' || typeof body.attempt !== 'number') {
      this.log.error({ claimedRole: claimed }, 'dropped a message from the jobs dead-letter queue that names no job attempt');
      return;
    }
    const { store, clock } = this.deps;
    const job = await store.jobs.findById(body.job_id);
    if (!job || job.status !== 'QUEUED' || job.attempts !== body.attempt) return; // moved on meanwhile
    const n = (this.refusals.get(job.id) ?? 0) + 1;
    if (this.refusals.size > 10_000) this.refusals.clear();
    this.refusals.set(job.id, n);
    if (n > MAX_REFUSALS) {
      // No runner takes it (or it kills every runner that does): the queue timeout
      // hands it out as a new attempt, and the attempt limit ends it, loudly.
      this.log.error({ jobId: job.id, refusals: n, claimedRole: claimed }, 'a job keeps coming back from the jobs dead-letter queue; leaving it to JOB_QUEUE_TIMEOUT');
      return;
    }
    // Real time, whatever the clock: the pause bounds the CPU a refusing runner costs, not the schedule.
    await systemClock.sleep(Math.min(250 * 2 ** (n - 1), 10_000), this.abort.signal);
    const workflow = await store.workflows.findById(job.workflowId);
    if (!workflow || this.abort.signal.aborted) return;
    // The same attempt: the refused message is here, in no runner's hands, so the
    // attempt never ran; a new message for it keeps attempts counting real runs.
    const moved = await store.jobs.resendSameAttempt([job], clock.now());
    if (moved.length === 0) return;
    this.stats.jobsRefused += 1;
    this.log.warn({ jobId: job.id, attempt: moved[0]!.attempts, refusals: n, claimedRole: claimed }, 'a runner refused a job message; handing the job out again');
    await this.sendJobs(moved.map((j) => [j, workflow] as const));
  }

  private async recover(now: number): Promise<void> {
    const { store } = this.deps;
    const lost = [
      ...(await store.jobs.expiredLeases(now, this.config.batchSize)),
      ...(await store.jobs.staleQueued(now - this.config.queueTimeoutMs, now - this.config.unsentTimeoutMs, this.config.batchSize)),
    ];
    for (const job of lost) await this.retryOrFail(job, now, reasons.leaseLost(job.attempts));
  }

  /**
   * A SYSTEM failure of one attempt (runner vanished, runtime unavailable):
   * another attempt while attempts remain, else FAILED SYSTEM_ERROR. A job of
   * a workflow terminated meanwhile is canceled instead.
   */
  private async retryOrFail(job: Job, now: number, finalReason: JobReason): Promise<void> {
    const { store } = this.deps;
    const guard = { attempts: job.attempts };
    const workflow = await store.workflows.findById(job.workflowId);
    if (!workflow || workflow.terminatedAt !== null) {
      await store.transaction(async (tx) => {
        const canceled = await tx.jobs.transition(job.id, 'CANCELED', now, { completedAt: now, leaseExpiresAt: null, reason: reasons.workflowTerminated() }, guard);
        if (canceled) await applyJobOutcome(tx, canceled, now);
      });
      return;
    }
    if (job.attempts < this.config.maxAttempts) {
      const retried = await this.guardOverlap(() =>
        store.jobs.transition(
          job.id,
          'QUEUED',
          now,
          { attempts: job.attempts + 1, queuedAt: now, runnerId: null, leaseExpiresAt: null, startedAt: null, containerId: null },
          guard,
        ),
      );
      if (retried) {
        this.log.warn({ jobId: job.id, attempt: retried.attempts }, 'retrying a job on another runner');
        await this.sendJobs([[retried, workflow]]);
      }
      return;
    }
    await store.transaction(async (tx) => {
      const failed = await tx.jobs.transition(
        job.id,
        'FAILED',
        now,
        { completedAt: now, leaseExpiresAt: null, reason: finalReason.code === 'SYSTEM_ERROR' ? finalReason : reasons.leaseLost(job.attempts) },
        guard,
      );
      if (failed) await applyJobOutcome(tx, failed, now);
    });
  }

  private async requestStops(now: number): Promise<void> {
    const { store } = this.deps;
    for (const job of await store.jobs.needingStop(now - this.config.stopResendMs, this.config.batchSize)) {
      await this.stopJob(job.id, reasons.workflowTerminated());
      await store.jobs.markStopRequested(job.id, now);
    }
  }

  private async stopJob(jobId: string, reason: JobReason, attempt?: number): Promise<void> {
    const body: JobStopMessage = { job_id: jobId, reason, ...(attempt !== undefined ? { attempt } : {}) };
    try {
      await this.deps.bus.broadcast(TOPICS.jobControl, MESSAGE_TYPES.jobStop, body);
    } catch (err) {
      this.log.warn({ err, jobId }, 'could not broadcast a stop request; it will be repeated');
    }
  }

  // ---- events from runners (every replica) ----------------------------------

  /**
   * Applies a job event together with the other events waiting at that moment
   * (up to the consumer's prefetch), in one transaction: one commit for the
   * batch instead of one per event, which is most of an event's cost on
   * SQLite. Each event is still applied by its own conditional transition,
   * guarded by its attempt, in the order received, so a duplicate or a stale
   * attempt in the same batch changes nothing, exactly as when applied alone.
   * The handler resolves (and the bus acks) only after the commit. When the
   * batch fails, nothing of it was committed and each of its events is applied
   * on its own (applyPatiently), so one bad event costs the others nothing.
   */
  private applyBatched(envelope: Envelope): Promise<void> {
    if (!isBatchable(envelope)) return this.applyPatiently(envelope);
    return new Promise<void>((resolve, reject) => {
      this.waiting.push({ envelope, resolve, reject });
      if (!this.flushing) void this.flush();
    });
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

  /**
   * Applies these job events as one batch, as the consumer does with the
   * events waiting (tests call it to choose a batch). Resolves with each
   * event's outcome: rejected where the event could not be applied.
   */
  async applyEvents(envelopes: readonly Envelope[]): Promise<PromiseSettledResult<void>[]> {
    const events = envelopes.map((envelope) => {
      const event = { envelope } as WaitingEvent;
      const done = new Promise<void>((resolve, reject) => Object.assign(event, { resolve, reject }));
      return { event, done };
    });
    await this.applyBatch(events.map((e) => e.event));
    return Promise.allSettled(events.map((e) => e.done));
  }

  /** Applies the batch in one transaction, or each of its events on its own when that fails. Never throws. */
  private async applyBatch(batch: readonly WaitingEvent[]): Promise<void> {
    const { store, clock } = this.deps;
    const now = clock.now();
    let stale: boolean[] = [];
    try {
      await store.transaction(async (tx) => {
        stale = [];
        // PostgreSQL: every workflow this batch may lock, up front and in id
        // order, as the leader locks due workflows, so two batches (or a batch
        // and the leader) cannot deadlock over them.
        if (tx.dialect.rowLocks) await tx.workflows.lock(await tx.jobs.workflowIdsOf(batch.map((e) => (e.envelope.body as { job_id: string }).job_id)));
        for (const { envelope } of batch) stale.push(!(await this.applyIn(tx, envelope, now)));
      });
    } catch (err) {
      this.log.warn({ err, events: batch.length }, 'could not apply a batch of job events; applying them one by one');
      await Promise.all(batch.map((e) => this.applyPatiently(e.envelope).then(e.resolve, e.reject)));
      return;
    }
    await Promise.all(
      batch.map(async (e, i) => {
        if (!stale[i]) return e.resolve();
        const m = e.envelope.body as { job_id: string; attempt: number };
        // As when applied alone: a failure here redelivers the event, which then changes nothing and checks again.
        await this.stopIfStale(m.job_id, m.attempt).then(e.resolve, e.reject);
      }),
    );
  }

  /**
   * Applies a batchable event inside `tx`. Returns false when the event names
   * an attempt the store no longer expects to run (its runner is told to stop
   * after the commit).
   */
  private async applyIn(tx: Store, envelope: Envelope, now: number): Promise<boolean> {
    switch (envelope.type) {
      case MESSAGE_TYPES.jobStarted:
        return this.startedIn(tx, envelope.body as JobStartedMessage, now);
      case MESSAGE_TYPES.jobHeartbeat: {
        const m = envelope.body as JobHeartbeatMessage;
        return tx.jobs.renewLease(m.job_id, m.attempt, now + this.config.jobLeaseTtlMs, now);
      }
      case MESSAGE_TYPES.jobFinished:
        await this.finishedIn(tx, envelope.body as JobFinishedMessage, now);
        return true;
      default:
        throw new Error(`event type ${envelope.type} cannot be applied in a batch`);
    }
  }

  /**
   * Applies an event, waiting out a store outage (a database restart) with
   * backoff instead of failing the delivery: failed deliveries count toward
   * dead-lettering, and a runner's result must not be lost that way. Only an
   * error that persists for about a minute goes back to the bus.
   */
  private async applyPatiently(envelope: Envelope): Promise<void> {
    let delay = 100;
    for (let elapsed = 0; ; elapsed += delay, delay = Math.min(delay * 2, 10_000)) {
      try {
        return await this.onEvent(envelope);
      } catch (err) {
        if (elapsed >= 60_000 || this.abort.signal.aborted) throw err;
        this.log.warn({ err, type: envelope.type }, 'could not apply an event; retrying');
        await this.deps.clock.sleep(delay, this.abort.signal);
      }
    }
  }

  private async onEvent(envelope: Envelope): Promise<void> {
    const now = this.deps.clock.now();
    switch (envelope.type) {
      case MESSAGE_TYPES.jobStarted:
        return this.onStarted(envelope.body as JobStartedMessage, now);
      case MESSAGE_TYPES.jobHeartbeat:
        return this.onHeartbeat(envelope.body as JobHeartbeatMessage, now);
      case MESSAGE_TYPES.jobFinished:
        return this.onFinished(envelope.body as JobFinishedMessage, now);
      case MESSAGE_TYPES.buildFinished: {
        const m = envelope.body as BuildFinishedMessage;
        const applied = await this.deps.store.transaction((tx) => recordBuildResult(tx, m.workflow_id, m.build_token, m.ok, now));
        if (applied && !m.ok) this.log.info({ workflowId: m.workflow_id, reason: m.reason }, 'build failed');
        return;
      }
      default:
        this.log.warn({ type: envelope.type }, 'ignored an unknown event type');
    }
  }

  private async onStarted(m: JobStartedMessage, now: number): Promise<void> {
    if (!(await this.startedIn(this.deps.store, m, now))) await this.stopIfStale(m.job_id, m.attempt);
  }

  /** RUNNING for the attempt the runner started; false when the store no longer expects that attempt. */
  private async startedIn(store: Store, m: JobStartedMessage, now: number): Promise<boolean> {
    // Nothing of the row is needed back: one UPDATE, no read of the job.
    return store.jobs.tryTransition(
      m.job_id,
      'RUNNING',
      now,
      { runnerId: m.runner_id, startedAt: m.started_at, leaseExpiresAt: now + this.config.jobLeaseTtlMs, ...(m.container_id ? { containerId: m.container_id } : {}) },
      { attempts: m.attempt },
    );
  }

  private async onHeartbeat(m: JobHeartbeatMessage, now: number): Promise<void> {
    const renewed = await this.deps.store.jobs.renewLease(m.job_id, m.attempt, now + this.config.jobLeaseTtlMs, now);
    if (!renewed) await this.stopIfStale(m.job_id, m.attempt);
  }

  /**
   * A runner reports an attempt the store no longer expects it to run: the job
   * was canceled, or handed to another runner. Tell that runner to stop.
   */
  private async stopIfStale(jobId: string, attempt: number): Promise<void> {
    const job = await this.deps.store.jobs.findById(jobId);
    if (!job) return this.stopJob(jobId, reasons.cancellationUnavailable(), attempt);
    if (job.status === 'CANCELED' && job.attempts === attempt) {
      return this.stopJob(jobId, job.statusReasonCode ? { code: job.statusReasonCode, message: job.statusReasonMessage ?? '' } : reasons.cancellationUnavailable(), attempt);
    }
    if (job.attempts !== attempt) return this.stopJob(jobId, reasons.cancellationUnavailable(), attempt);
  }

  private async onFinished(m: JobFinishedMessage, now: number): Promise<void> {
    const { store } = this.deps;
    if (m.status === 'FAILED' && m.system_failure) {
      const job = await store.jobs.findById(m.job_id);
      if (job && job.attempts === m.attempt && (job.status === 'QUEUED' || job.status === 'RUNNING')) {
        await this.retryOrFail(job, now, m.reason ?? reasons.failureUnavailable());
      }
      return;
    }
    await store.transaction((tx) => this.finishedIn(tx, m, now));
  }

  /** The runner's result for the attempt, and its outcome for the workflow, once (a repeated result finds the job ended). */
  private async finishedIn(tx: Store, m: JobFinishedMessage, now: number): Promise<void> {
    const finished = await tx.jobs.transition(
      m.job_id,
      m.status,
      now,
      {
        startedAt: m.started_at,
        completedAt: m.finished_at,
        leaseExpiresAt: null,
        reason: m.status === 'COMPLETED' ? null : (m.reason ?? (m.status === 'FAILED' ? reasons.failureUnavailable() : reasons.cancellationUnavailable())),
        ...(m.container_id ? { containerId: m.container_id } : {}),
        ...(m.log_truncated === true ? { logTruncated: true } : {}),
        ...(m.check === undefined ? {} : { check: checkFromMessage(m.check) ?? null }),
      },
      { attempts: m.attempt },
    );
    if (finished) await applyJobOutcome(tx, finished, now);
  }

  private async publish(queue: string, type: string, body: unknown, ttlMs: number): Promise<void> {
    await this.deps.bus.publish(queue, type, body, { ttlMs });
  }
}

/** Refusals of one job handed out again from `jobs.dead` (about 3 minutes of pauses) before it is left to the queue timeout. */
const MAX_REFUSALS = 20;

interface WaitingEvent {
  envelope: Envelope;
  resolve: () => void;
  reject: (err: unknown) => void;
}

/**
 * Events applied in batches: a job's start, lease renewal and result. A SYSTEM
 * failure (it publishes the next attempt) and a build result are applied on
 * their own.
 */
function isBatchable(envelope: Envelope): boolean {
  switch (envelope.type) {
    case MESSAGE_TYPES.jobStarted:
    case MESSAGE_TYPES.jobHeartbeat:
      return true;
    case MESSAGE_TYPES.jobFinished:
      return !((envelope.body as JobFinishedMessage).status === 'FAILED' && (envelope.body as JobFinishedMessage).system_failure);
    default:
      return false;
  }
}
