import { cancelReason, parsePayload, reasons, type Job, type Workflow } from '@orloj/common/domain';
import { MESSAGE_TYPES, QUEUES, type BuildRunMessage } from '@orloj/common/messages';
import { recordBuildResult } from '@orloj/common/store';
import type { SchedulerContext } from './context.js';
import { DueSlots, userShare } from './due-slots.js';
import type { HandOut } from './hand-out.js';

/** A stored payload that no longer parses (a rule tightened since it was accepted): its build fails so. */
const INVALID_PAYLOAD = { code: 'EXECUTION_FAILED', message: 'The payload is not valid for its kind; update the workflow.' };

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
   * batch while batches come full (a burst of due slots), yielding to the event
   * loop between them so runner events keep being applied, for at most one
   * tick; the next wake continues.
   *
   * PENDING (manual) jobs go first: a user's "Run now" takes a place in their
   * share (maxActivePerUser) before their automatic slots, which wait and run
   * their most recent slot later. The other way round, a user whose due slots
   * kept their share full never saw a manual job start.
   */
  async duePass(now: number): Promise<void> {
    const { clock, store, config } = this.c;
    // At most a tick's worth of (clock) time, so the leader renews its lease in time.
    const until = clock.now() + config.tickMs;
    for (;;) {
      const room = config.maxQueued - (await store.jobs.countQueued(config.maxQueued));
      if (room <= 0) return;
      const limit = Math.min(config.batchSize, room);
      const dispatched = await this.dispatch(now, limit);
      // Due slots, in the room the manual jobs left.
      const left = limit - dispatched;
      const created = left > 0 ? await this.dueSlots.createDueJobs(now, left) : 0;
      if ((dispatched < limit && created < left) || clock.now() >= until || this.c.signal.aborted) return;
      await new Promise((resolve) => setImmediate(resolve));
    }
  }

  /** When the next slot falls due, or since when a manual job waits to be handed out. */
  async nextDueAt(): Promise<number> {
    const { store } = this.c;
    // A user at their share has nothing due until a job of theirs ends (seen by the next tick).
    const fair = { maxActivePerUser: this.c.config.maxActivePerUser };
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
        await store.transaction((tx) => recordBuildResult(tx, w.id, w.buildToken, parsed.ok, now, parsed.ok ? undefined : INVALID_PAYLOAD));
        continue;
      }
      const token = await store.workflows.startBuild(w.id, w.buildToken, now);
      if (token === undefined) continue;
      const body: BuildRunMessage = { workflow_id: w.id, build_token: token, image: parsed.value.payload.image };
      await this.c.bus.publish(QUEUES.builds, MESSAGE_TYPES.buildRun, body, { ttlMs: config.buildTimeoutMs });
    }
  }

  /** Hands out PENDING (manual) jobs. Returns how many it looked at (a full batch means there may be more). */
  private async dispatch(now: number, limit: number): Promise<number> {
    const { store, config } = this.c;
    const found = await store.jobs.dispatchable(now, limit, { maxActivePerUser: config.maxActivePerUser });
    if (found.length === 0) return 0;
    const share = await userShare(store, config.maxActivePerUser, found.map((j) => j.userId));
    const jobs = found.filter((j) => share(j.userId));
    const workflows = new Map((await store.workflows.findByIds(jobs.map((j) => j.workflowId))).map((w) => [w.id, w]));
    const queued: [Job, Workflow][] = [];
    for (const moved of await this.handOut.queueAll(jobs.filter((j) => workflows.has(j.workflowId)), now)) {
      queued.push([moved, workflows.get(moved.workflowId)!]);
    }
    await this.handOut.send(queued);
    return found.length;
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
