import { afterSystemFailure, queueNextAttempt, type AttemptEnd, type Job, type JobReason, type Workflow } from '@orloj/common/domain';
import { MESSAGE_TYPES, QUEUES, TOPICS, type JobRunMessage, type JobStopMessage } from '@orloj/common/messages';
import { applyJobOutcome } from '@orloj/common/store';
import type { SchedulerContext } from './context.js';
import { fairPick, type Candidate } from './fair-share.js';

/** The fewest jobs the hand-out keeps waiting for the runners, whatever they took lately. */
export const QUEUE_FLOOR = 4;
/**
 * The hand-out keeps about this much (real time: the runners' work takes real
 * time whatever the scheduler's clock) of the runners' recent work waiting for
 * them. It must be longer than a job takes from the hand-out to its start being
 * applied (the bus, the runner, its job.started, a scheduler's batch): a job
 * still on that way counts as waiting, and with a shorter window the room would
 * shrink pass after pass on a busy fleet (CI: 5 jobs a second where 30 were due).
 */
const DEPTH_WINDOW_MS = 5_000;
/** A job handed out and not started for this long (real time: the runners' work takes real time whatever the scheduler's clock) no longer holds room: it is stuck, not waiting for a slot. */
const STUCK_AFTER_MS = 60_000;

/**
 * How often (real time) the room asks the store which of a large set of
 * waiting jobs are still QUEUED. The starts this replica applies tell it at
 * once (QueueRoom.left); the store's answer covers the starts other
 * replicas apply, and the jobs that left the queue otherwise.
 */
const STILL_QUEUED_EVERY_MS = 1_000;
/** Up to this many jobs waiting, the room asks the store at every pass: one seek each, nothing to save. */
const STILL_QUEUED_ALWAYS = 64;

/**
 * The runners' room: how many more jobs the hand-out may give them now
 * (docs/adr/0014-work-conserving-fair-hand-out.md).
 *
 * The queue is kept about five seconds deep: as many of the jobs this leader
 * handed out may wait unstarted as the runners started in the last five seconds,
 * and at least `floor`. A runner that frees a slot finds the next job waiting
 * (no slot idles while work waits), yet nothing queues far ahead of the
 * runners, so the order in which users' jobs run stays the hand-out's fair
 * choice rather than the order of a long queue. It needs nothing from the
 * runners but the job states: a runner that dies takes no room with it (its
 * jobs are RUNNING, not waiting, and its unacknowledged messages go back to
 * the queue), and a job that waits longer than STUCK_AFTER_MS stops holding
 * room. Jobs handed out by others (a previous leader, retries) are not
 * counted: at worst the queue is a little deeper for a while.
 *
 * A start applied by this replica frees room at once (left()); the store
 * is asked about the rest at every pass while few wait, and at most once a
 * second while many do (the runners behind: thousands waiting, each pass's
 * read of all of them was the leader's largest cost).
 */
export class QueueRoom {
  /** Jobs this leader handed out, not yet seen started: id → when (real time: the runners' work takes real time whatever the scheduler's clock). */
  private readonly waiting = new Map<string, number>();
  private readonly started: { at: number; n: number }[] = [];
  private askedAt = Number.NEGATIVE_INFINITY;

  constructor(
    /** Of the ids given, those still QUEUED. */
    private readonly stillQueued: (ids: readonly string[]) => Promise<ReadonlySet<string>>,
    private readonly now: () => number,
    private readonly floor = QUEUE_FLOOR,
  ) {}

  /** The room at this pass. */
  async room(): Promise<number> {
    const at = this.now();
    if (this.waiting.size > 0 && (this.waiting.size <= STILL_QUEUED_ALWAYS || at - this.askedAt >= STILL_QUEUED_EVERY_MS)) {
      this.askedAt = at;
      const queued = await this.stillQueued([...this.waiting.keys()]);
      let n = 0;
      for (const [id, since] of this.waiting) {
        if (queued.has(id) && at - since < STUCK_AFTER_MS) continue;
        this.waiting.delete(id);
        if (!queued.has(id)) n += 1;
      }
      this.record(at, n);
    }
    while (this.started.length > 0 && at - this.started[0]!.at > DEPTH_WINDOW_MS) this.started.shift();
    const depth = Math.max(this.floor, this.started.reduce((sum, s) => sum + s.n, 0));
    return depth - this.waiting.size;
  }

  /** This pass moved these jobs to QUEUED. */
  handedOut(ids: readonly string[]): void {
    const at = this.now();
    for (const id of ids) this.waiting.set(id, at);
  }

  /** These jobs left the queue (their start or result was applied here). */
  left(ids: readonly string[]): void {
    let n = 0;
    for (const id of ids) if (this.waiting.delete(id)) n += 1;
    this.record(this.now(), n);
  }

  private record(at: number, n: number): void {
    if (n === 0) return;
    const last = this.started.at(-1);
    if (last?.at === at) last.n += n;
    else this.started.push({ at, n });
  }
}

/** What one round of the fair hand-out did, for the leader's pass. */
export interface FairRound {
  /** The due workflows (of those offered) that got room: their slots' jobs go to the runners now. */
  dueNow: Set<string>;
  /** Work was left waiting for room. */
  leftWaiting: boolean;
  /** Pending jobs were left out of the round and room was given: more may go in the next. */
  morePending: boolean;
}

/**
 * Jobs on their way to the runners and back: how much may go (the runners'
 * room) and which jobs (the fair choice), handing them out (job.run), the next
 * attempt after a SYSTEM failure, and stop requests (job.stop). The runners'
 * queue it reads and writes is the store's `jobQueue`
 * (common/src/store/repos/job-queue.repo.ts). The leader's loop and the job
 * events every replica applies both use it.
 */
export class HandOut {
  private readonly room: QueueRoom;

  constructor(private readonly c: SchedulerContext) {
    this.room = new QueueRoom((ids) => c.store.jobQueue.queuedAmong(ids), () => c.workClock.now(), c.config.queueFloor);
  }

  /**
   * One round of the fair hand-out (docs/adr/0014-work-conserving-fair-hand-out.md):
   * the room the runners have (QueueRoom, within the queue's hard bound
   * SCHEDULER_MAX_QUEUED), the pending jobs that may go, and which of them and
   * of the `due` workflows (free of open jobs) get the room: fair queuing
   * across users (fair-share.ts), a user's manual runs before their due slots.
   * The chosen pending jobs are handed out here; the chosen due workflows are
   * returned, for the leader to make their slots' jobs and record them
   * (handedOut()).
   */
  async fairRound(now: number, window: number, due: readonly Workflow[]): Promise<FairRound> {
    const { store, config } = this.c;
    const soft = await this.room.room();
    // The hard bound is counted only when the runners have room at all.
    const room = soft > 0 ? Math.max(0, Math.min(soft, config.maxQueued - (await store.jobQueue.countQueued(config.maxQueued)))) : 0;
    // No user gets more than the room: its first `room` pending jobs are all the round can choose (and one more tells that more wait).
    const { jobs: pending, more } = room > 0 ? await store.jobQueue.dispatchable(now, window, room) : { jobs: [], more: false };
    const candidates: Candidate<Job | Workflow>[] = [
      ...pending.map((j) => ({ userId: j.userId, manual: j.trigger === 'MANUAL', since: j.scheduledAt, item: j })),
      ...due.map((w) => ({ userId: w.userId, manual: false, since: w.nextDueAt ?? now, item: w })),
    ];
    // What each user holds already ranks users against each other, and against the cap: with one user and no cap it changes nothing (and costs a count of their active jobs).
    const users = new Set(candidates.map((c) => c.userId));
    const ranksUsers = users.size > 1 || config.maxActivePerUser !== undefined;
    const active = room > 0 && ranksUsers ? await store.jobQueue.activeCountsByUser([...users]) : new Map<string, number>();
    const chosen = new Set(fairPick(candidates, active, room, config.maxActivePerUser).map((c) => c.item));
    this.handedOut(await this.dispatch(now, pending.filter((j) => chosen.has(j))));
    return {
      dueNow: new Set(due.filter((w) => chosen.has(w)).map((w) => w.id)),
      leftWaiting: candidates.length > chosen.size,
      morePending: more && chosen.size > 0,
    };
  }

  /** The due slots' jobs the leader made QUEUED at this round's choice (DueSlots): like the round's own, they hold room until started. */
  handedOut(ids: readonly string[]): void {
    this.room.handedOut(ids);
  }

  /** These jobs' start or result was applied on this replica (JobEvents): they no longer wait for a runner. */
  leftQueue(ids: readonly string[]): void {
    this.room.left(ids);
  }

  /** Hands out these PENDING jobs (the fair round chose them). Returns the ids it moved to QUEUED. */
  private async dispatch(now: number, jobs: readonly Job[]): Promise<string[]> {
    if (jobs.length === 0) return [];
    const workflows = new Map((await this.c.store.workflows.findByIds(jobs.map((j) => j.workflowId))).map((w) => [w.id, w]));
    const queued: [Job, Workflow][] = [];
    for (const moved of await this.queueAll(jobs.filter((j) => workflows.has(j.workflowId)), now)) {
      queued.push([moved, workflows.get(moved.workflowId)!]);
    }
    await this.send(queued);
    return queued.map(([job]) => job.id);
  }

  /**
   * Publishes the jobs' messages and records which ones the bus confirmed. A
   * message expires when the sweep would hand its job out again, so a late
   * delivery of an old attempt is refused instead of running twice. A job whose
   * publish failed stays QUEUED and unconfirmed; the sweep hands it out again.
   */
  async send(jobs: readonly (readonly [Job, Workflow])[]): Promise<void> {
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
          // A manual job's message carries the request that created it: the runner's lines for it carry its reqId.
          await this.c.bus.publish(QUEUES.jobs, MESSAGE_TYPES.jobRun, body, { ttlMs: this.c.config.queueTimeoutMs, reqId: job.requestId ?? undefined });
          sent.push({ id: job.id, attempts: job.attempts });
        } catch (err) {
          this.c.log.warn({ err, jobId: job.id }, 'could not hand a job to the runners; it will be retried');
        }
      }),
    );
    await this.c.store.jobQueue.markDispatched(sent, this.c.clock.now());
  }

  /**
   * Moves the jobs to QUEUED as their next attempt: all in one statement, or,
   * when that would give a workflow a second active job (another leader, or a
   * manual job, got there first), one by one, each job that would overlap
   * waiting.
   */
  private async queueAll(jobs: readonly Job[], now: number): Promise<Job[]> {
    const { store } = this.c;
    const all = await this.guardOverlap(() => store.jobQueue.queueNextAttempts(jobs, now));
    if (all) return all;
    const moved: Job[] = [];
    for (const job of jobs) {
      const one = await this.guardOverlap(() => store.jobMoves.apply(job.id, queueNextAttempt(job, now), now));
      if (one) moved.push(one);
    }
    return moved;
  }

  /** The one-active-job-per-workflow key refuses a second QUEUED job; that job simply waits. */
  private async guardOverlap<T>(move: () => Promise<T | undefined>): Promise<T | undefined> {
    try {
      return await move();
    } catch (err) {
      if (this.c.store.dialect.isUniqueViolation(err)) return undefined;
      throw err;
    }
  }

  /**
   * A SYSTEM failure of one attempt (runner vanished, runtime unavailable):
   * another attempt while attempts remain, else FAILED SYSTEM_ERROR. A job of
   * a workflow terminated meanwhile is canceled instead. An attempt given up
   * for another is recorded with `end` (why) in the same transaction, for the
   * job page's attempts.
   */
  async retryOrFail(job: Job, now: number, finalReason: JobReason, end: AttemptEnd): Promise<void> {
    const { store } = this.c;
    const workflow = await store.workflows.findById(job.workflowId);
    const next = afterSystemFailure(job, workflow, this.c.config.maxAttempts, now, finalReason);
    if (next.to === 'QUEUED' && workflow) {
      const retried = await this.guardOverlap(() =>
        store.transaction(async (tx) => {
          const moved = await tx.jobMoves.apply(job.id, next, now);
          if (moved) {
            await tx.jobAttempts.recordEnded({ jobId: job.id, attempt: job.attempts, runnerId: job.runnerId, startedAt: job.startedAt, endedAt: now, end });
          }
          return moved;
        }),
      );
      if (retried) {
        this.c.log.warn({ jobId: job.id, attempt: retried.attempts }, 'retrying a job on another runner');
        await this.send([[retried, workflow]]);
      }
      return;
    }
    await store.transaction(async (tx) => {
      const ended = await tx.jobMoves.apply(job.id, next, now);
      if (ended) await applyJobOutcome(tx, ended, now);
    });
  }

  /** Asks every runner to stop the job (only `attempt`, when given); a failed broadcast is repeated by the caller's next pass. */
  async stop(jobId: string, reason: JobReason, attempt?: number): Promise<void> {
    const body: JobStopMessage = { job_id: jobId, reason, ...(attempt !== undefined ? { attempt } : {}) };
    try {
      await this.c.bus.broadcast(TOPICS.jobControl, MESSAGE_TYPES.jobStop, body);
    } catch (err) {
      this.c.log.warn({ err, jobId }, 'could not broadcast a stop request; it will be repeated');
    }
  }
}
