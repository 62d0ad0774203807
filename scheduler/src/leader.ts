import { cancelReason, parsePayload, reasons, type Job, type Workflow } from '@orloj/common/domain';
import { MESSAGE_TYPES, QUEUES, type BuildRunMessage } from '@orloj/common/messages';
import { recordBuildResult } from '@orloj/common/store';
import type { SchedulerContext } from './context.js';
import { DueSlots, userShare } from './due-slots.js';
import { fairPick, type Candidate } from './fair-share.js';
import type { HandOut } from './hand-out.js';

/**
 * The leader's work, one pass at a time (the Scheduler's loop decides when):
 * start builds, create the jobs of due slots, hand out pending (manual) jobs,
 * recover jobs whose runner vanished, and ask runners to stop jobs of
 * terminated workflows. Safe to run concurrently with another leader: every
 * step is a conditional write.
 */
export class LeaderWork {
  private readonly dueSlots: DueSlots;
  /** Clock time this replica started (0 until it does): on the in-process bus, no message from before it exists any more. */
  startedAt = 0;
  private restartRecovered = false;
  /** The last pass found the runners full: wait for a job to end (or the next tick), not for the next due slot. */
  private full = false;

  constructor(
    private readonly c: SchedulerContext,
    private readonly handOut: HandOut,
  ) {
    this.dueSlots = new DueSlots(c, handOut);
  }

  /** A full pass: builds, due slots and pending jobs, recovery, stops. */
  async tick(now: number): Promise<void> {
    if (!this.restartRecovered) await this.recoverRestart(now);
    await this.startBuilds(now);
    await this.duePass(now);
    await this.recover(now);
    await this.requestStops(now);
  }

  /**
   * Hands out pending jobs and creates the jobs of due slots, batch after
   * batch while there is room on the runners and work waiting, yielding to
   * the event loop between them so runner events keep being applied, for at
   * most one tick; the next wake continues.
   *
   * Work-conserving and fair (docs/adr/0011-work-conserving-fair-hand-out.md):
   * as much is handed out as the runners can take (room()), never more, so
   * no job waits while a slot is idle and none queues up behind another
   * user's backlog; which jobs get the room is fair queuing across users
   * (fair-share.ts), a user's manual runs before their due slots. A due
   * workflow left without room stays due and runs its most recent slot later.
   */
  async duePass(now: number): Promise<void> {
    const { clock, store, config } = this.c;
    // At most a tick's worth of (clock) time, so the leader renews its lease in time.
    const until = clock.now() + config.tickMs;
    const cap = config.maxActivePerUser;
    this.full = false;
    for (;;) {
      const room = await this.room();
      if (room <= 0) {
        // Nothing fits until a job ends: the loop sleeps until then (Scheduler.capacityFreed) or the next tick.
        this.full = true;
        return;
      }
      const limit = Math.min(config.batchSize, room);
      const fair = cap === undefined ? {} : { maxActivePerUser: cap };
      // A full batch of candidates whatever the room: the room goes to whom fair queuing says, so every user waiting must be among them (due() takes them user by user).
      const window = config.batchSize;
      const pending = await store.jobs.dispatchable(now, window, fair);
      const due = (await store.workflows.due(now, window, fair)).filter((w) => w.buildCompletedAt !== null);
      // A due workflow whose job still runs takes no room: it only moves on to its next slot (DueSlots.plan).
      const busy = await store.jobs.workflowsWithOpenJobs(due.map((w) => w.id));
      const candidates: Candidate<Job | Workflow>[] = [
        ...pending.map((j) => ({ userId: j.userId, manual: true, since: j.scheduledAt, item: j })),
        ...due.filter((w) => !busy.has(w.id)).map((w) => ({ userId: w.userId, manual: false, since: w.nextDueAt ?? now, item: w })),
      ];
      const active = await store.jobs.activeCountsByUser(candidates.map((c) => c.userId));
      const chosen = fairPick(candidates, active, limit, cap);
      await this.dispatch(now, chosen.filter((c) => c.manual).map((c) => c.item as Job));
      await this.dueSlots.createDueJobs(now, [...chosen.filter((c) => !c.manual).map((c) => c.item as Workflow), ...due.filter((w) => busy.has(w.id))]);
      // Everything that waited was looked at (no full batch of either kind): nothing more now.
      if ((pending.length < window && due.length < window) || (chosen.length === 0 && busy.size === 0) || clock.now() >= until || this.c.signal.aborted) return;
      await new Promise((resolve) => setImmediate(resolve));
    }
  }

  /**
   * Jobs the runners can take now: their slots (as they report them,
   * RunnerCapacity) plus as many again waiting in the queue, so a runner
   * finishing a job finds the next one there instead of waiting for a pass,
   * less the jobs handed out and not finished. Before any runner has spoken
   * (a fresh start; runners of an older version), the queue bound alone
   * (SCHEDULER_MAX_QUEUED) limits it, as it always does.
   */
  private async room(): Promise<number> {
    const { store, config, runners, clock } = this.c;
    const queueRoom = config.maxQueued - (await store.jobs.countQueued(config.maxQueued));
    const slots = runners.slots(clock.now());
    if (slots === undefined) return queueRoom;
    const open = await store.jobs.countByStatus(['QUEUED', 'RUNNING']);
    return Math.min(queueRoom, 2 * slots - (open.QUEUED ?? 0) - (open.RUNNING ?? 0));
  }

  /** When the next slot falls due, or since when a manual job waits to be handed out; never while the runners are full. */
  async nextDueAt(): Promise<number> {
    if (this.full) return Number.POSITIVE_INFINITY;
    const { store } = this.c;
    // A user at their hard limit has nothing due until a job of theirs ends (seen by the next tick).
    const cap = this.c.config.maxActivePerUser;
    const fair = cap === undefined ? {} : { maxActivePerUser: cap };
    const times = [await store.workflows.nextDueAt(fair), await store.jobs.nextPendingAt(fair)];
    return Math.min(...times.map((t) => t ?? Number.POSITIVE_INFINITY));
  }

  private async startBuilds(now: number): Promise<void> {
    const { store, config } = this.c;
    const pending = [...(await store.workflows.queuedBuilds(config.batchSize)), ...(await store.workflows.staleBuilds(now - config.buildTimeoutMs, config.batchSize))];
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
      await this.c.bus.publish(QUEUES.builds, MESSAGE_TYPES.buildRun, body, { ttlMs: config.buildTimeoutMs });
    }
  }

  /** Hands out these PENDING (manual) jobs (the fair hand-out chose them). */
  private async dispatch(now: number, found: readonly Job[]): Promise<void> {
    const { store, config } = this.c;
    if (found.length === 0) return;
    const share = await userShare(store, config.maxActivePerUser, found.map((j) => j.userId));
    const jobs = found.filter((j) => share(j.userId));
    const workflows = new Map((await store.workflows.findByIds(jobs.map((j) => j.workflowId))).map((w) => [w.id, w]));
    const queued: [Job, Workflow][] = [];
    for (const moved of await this.handOut.queueAll(jobs.filter((j) => workflows.has(j.workflowId)), now)) {
      queued.push([moved, workflows.get(moved.workflowId)!]);
    }
    await this.handOut.send(queued);
  }

  /** Jobs whose runner stopped renewing their lease, or whose message was never started or confirmed. */
  private async recover(now: number): Promise<void> {
    const { store, config } = this.c;
    const lost = [
      ...(await store.jobs.expiredLeases(now, config.batchSize)),
      ...(await store.jobs.staleQueued(now - config.queueTimeoutMs, now - config.unsentTimeoutMs, config.batchSize)),
    ];
    for (const job of lost) await this.handOut.retryOrFail(job, now, reasons.leaseLost(job.attempts));
  }

  private async requestStops(now: number): Promise<void> {
    const { store, config } = this.c;
    for (const job of await store.jobs.needingStop(now - config.stopResendMs, config.batchSize)) {
      await this.handOut.stop(job.id, cancelReason('terminated'));
      await store.jobs.markStopRequested(job.id, now);
    }
  }

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
    if (!this.c.bus.inProcess) {
      this.restartRecovered = true;
      return;
    }
    const { store, config } = this.c;
    let recovered = 0;
    for (;;) {
      const open = await store.jobs.openSince(this.startedAt, config.batchSize);
      if (open.length === 0) break;
      const queued = open.filter((j) => j.status === 'QUEUED');
      const workflows = new Map((await store.workflows.findByIds(queued.map((j) => j.workflowId))).map((w) => [w.id, w]));
      // The same attempt: its message died with the old process, no copy of it can run.
      const moved = await store.jobs.resendSameAttempt(queued.filter((j) => workflows.has(j.workflowId)), now);
      await this.handOut.send(moved.map((j) => [j, workflows.get(j.workflowId)!] as const));
      for (const job of open.filter((j) => j.status === 'RUNNING')) await this.handOut.retryOrFail(job, now, reasons.leaseLost(job.attempts));
      recovered += open.length;
      // Whatever did not move (a job of a deleted workflow) is left to the sweep; do not loop on it.
      if (open.length < config.batchSize || moved.length === 0) break;
    }
    this.restartRecovered = true;
    this.c.stats.jobsRecoveredAfterRestart += recovered;
    if (recovered > 0) this.c.log.warn({ jobs: recovered }, 'handed out again the jobs queued or running before the restart (their in-process messages were lost)');
  }
}
