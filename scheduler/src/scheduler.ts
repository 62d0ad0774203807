import { newId, systemClock, type Clock } from '@orloj/common/core';
import { SETTINGS } from '@orloj/common/config';
import type { Logger } from '@orloj/common/logging';
import { MESSAGE_TYPES, QUEUES, TOPICS } from '@orloj/common/messages';
import type { SignedBus } from '@orloj/common/envelope';
import type { Subscription } from '@orloj/common/bus';
import type { Store } from '@orloj/common/store';
import type { SchedulerContext } from './context.js';
import { HandOut, QUEUE_FLOOR } from './hand-out.js';
import { JOB_EVENT_TYPES, JobEvents, type JobEvent } from './job-events.js';
import { LeaderWork } from './leader.js';
import { leaseHolder, LeaderLease } from './leader-lease.js';
import { RefusedJobs } from './refused-jobs.js';

/**
 * The scheduler role, and the one place its parts are wired and timed:
 *
 * - every replica applies the job and build events of runners (JobEvents,
 *   job-events.ts) and hands out again job messages runners refused
 *   (RefusedJobs, refused-jobs.ts);
 * - one replica at a time, the holder of the leader lease, runs the loop
 *   below, whose passes (LeaderWork, leader.ts) start builds, create one job
 *   per due slot (DueSlots, due-slots.ts), hand jobs to runners, recover jobs
 *   whose runner vanished and ask runners to stop jobs of terminated workflows;
 * - both move jobs to and from runners through HandOut (hand-out.ts).
 */

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
   * one transaction (see JobEvents in job-events.ts), so this is also the largest batch.
   */
  eventPrefetch: number;
  /**
   * A hard limit on one user's jobs handed to the runners (QUEUED or
   * RUNNING) at once (MAX_ACTIVE_JOBS_PER_USER), for operators who want one:
   * beyond it the user's jobs wait PENDING even while runners are idle.
   * Undefined (the default): none; the fair hand-out already shares the
   * runners equally among the users who want them.
   */
  maxActivePerUser?: number | undefined;
  /** The fewest jobs the hand-out keeps waiting for the runners (hand-out.ts, QueueRoom); tests whose fake runners never start jobs raise it. */
  queueFloor: number;
}

/** The settings' defaults where a variable sets the value (common's config/settings.ts), the scheduler's own otherwise; no per-user cap. */
export const DEFAULT_SCHEDULER_CONFIG: SchedulerConfig = {
  tickMs: SETTINGS.SCHEDULER_TICK.default,
  leaderLeaseTtlMs: SETTINGS.LEADER_LEASE_TTL.default,
  jobLeaseTtlMs: SETTINGS.JOB_LEASE_TTL.default,
  queueTimeoutMs: SETTINGS.JOB_QUEUE_TIMEOUT.default,
  unsentTimeoutMs: 15_000,
  buildTimeoutMs: SETTINGS.BUILD_TIMEOUT.default,
  maxAttempts: 3,
  batchSize: 500,
  passGapMs: 50,
  maxQueued: SETTINGS.SCHEDULER_MAX_QUEUED.default,
  stopResendMs: 30_000,
  eventPrefetch: 128,
  queueFloor: QUEUE_FLOOR,
};

export interface SchedulerDeps {
  store: Store;
  bus: SignedBus;
  clock: Clock;
  logger: Logger;
  /** This replica's name in the leader lease. */
  replicaId?: string;
  /**
   * The time runners' work takes: real time (the default), even when `clock`
   * runs faster, for the hand-out keeps a few seconds of the runners' work
   * waiting (hand-out.ts, QueueRoom). Tests whose fake runners play jobs on a manual
   * clock pass that clock.
   */
  workClock?: Clock;
  config?: Partial<SchedulerConfig>;
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
  readonly stats: SchedulerStats = { slotsSkipped: 0, jobsRecoveredAfterRestart: 0, jobsRefused: 0 };
  private readonly lease: LeaderLease;
  private readonly log: Logger;
  private readonly abort = new AbortController();
  private readonly leader: LeaderWork;
  private readonly jobEvents: JobEvents;
  private readonly refusedJobs: RefusedJobs;
  private loop: Promise<void> | undefined;
  private events: Subscription | undefined;
  private wakes: Subscription | undefined;
  private refused: Subscription | undefined;
  /** Aborts the leader loop's current sleep (wake()). */
  private sleeping: AbortController | undefined;
  private woken = false;
  /** A job started or ended since the last pass: the next pass comes now, without waiting for a due time. */
  private freed = false;
  private stopping: Promise<void> | undefined;

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
    const context: SchedulerContext = {
      store: deps.store,
      bus: deps.bus,
      clock: deps.clock,
      workClock: deps.workClock ?? systemClock,
      log: deps.logger,
      config: this.config,
      signal: this.abort.signal,
      stats: this.stats,
      roomFreed: () => this.roomFreed(),
    };
    const handOut = new HandOut(context);
    this.leader = new LeaderWork(context, handOut);
    this.jobEvents = new JobEvents(context, handOut);
    this.refusedJobs = new RefusedJobs(context, handOut);
  }

  get isLeader(): boolean {
    return this.lease.fencingToken !== undefined;
  }

  /** Starts applying events and (unless `leaderLoop` is false, as in tests that call tick()) the leader loop. */
  async start(options: { leaderLoop?: boolean } = {}): Promise<void> {
    const { bus, clock } = this.deps;
    this.leader.startedAt = clock.now();
    // Every replica: a job message a runner refused (failed signature check) is handed out again at once.
    this.refused = await bus.consumeDeadLetters(QUEUES.jobs, (message) => this.refusedJobs.onDeadLetter(message), { prefetch: 16 });
    this.events = await bus.consume(QUEUES.jobEvents, (event) => this.jobEvents.receive(event), {
      prefetch: this.config.eventPrefetch,
      accept: JOB_EVENT_TYPES,
    });
    if (options.leaderLoop !== false) {
      this.wakes = await bus.subscribe(TOPICS.schedulerWake, () => this.wake(), { accept: [MESSAGE_TYPES.schedulerWake] });
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
          await this.leader.duePass(clock.now());
        }
        wakeAt = this.isLeader ? Math.min(nextTick, await this.leader.nextDueAt()) : nextTick;
      } catch (err) {
        this.log.error({ err }, 'scheduler tick failed; retrying on the next tick');
        wakeAt = nextTick;
      }
      // A floor in real time, whatever the clock: it bounds the leader's CPU, not the schedule.
      await systemClock.sleep(this.config.passGapMs, signal);
      if (this.woken || signal.aborted) continue;
      if (this.freed) {
        this.freed = false;
        continue;
      }
      this.sleeping = new AbortController();
      await clock.sleep(Math.max(0, wakeAt - clock.now()), AbortSignal.any([signal, this.sleeping.signal]));
      this.sleeping = undefined;
    }
  }

  /**
   * Asks the leader for a tick now: the api nudges it when a build or a manual
   * job is waiting. Nudges that come faster than `passGapMs` share one tick.
   * Called for a nudge, its log line carries the api request's id (`reqId`).
   */
  wake(): void {
    if (!this.isLeader) return;
    this.log.info('woken by the api: taking new work now');
    this.woken = true;
    this.sleeping?.abort();
  }

  /**
   * A job started or ended (applied by this replica): the leader loop's sleep
   * is cut short and the next pass hands out more, at most one pass per
   * passGapMs however many jobs move. A job moved on another replica is seen
   * at the next tick.
   */
  private roomFreed(): void {
    if (!this.isLeader) return;
    this.freed = true;
    this.sleeping?.abort();
  }

  /** One pass over due slots and pending jobs only, as the loop makes between ticks (tests call it). */
  async leaderPass(): Promise<void> {
    await this.leader.duePass(this.deps.clock.now());
  }

  /** One pass of the leader's work. Safe to run concurrently with another leader. */
  async tick(): Promise<void> {
    await this.leader.tick(this.deps.clock.now());
  }

  /**
   * Applies these job events as one batch, as the consumer does with the
   * events waiting (tests call it to choose a batch). Resolves with each
   * event's outcome: rejected where the event could not be applied.
   */
  applyEvents(events: readonly JobEvent[]): Promise<PromiseSettledResult<void>[]> {
    return this.jobEvents.applyEvents(events);
  }
}
