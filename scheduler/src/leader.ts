import { attemptEndOf, cancelReason, parsePayload, reasons } from '@orloj/common/domain';
import { MESSAGE_TYPES, QUEUES, type BuildRunMessage } from '@orloj/common/messages';
import { recordBuildResult } from '@orloj/common/store';
import type { SchedulerContext } from './context.js';
import type { SchedulerConfig } from './scheduler.js';
import { DueSlots } from './due-slots.js';
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
  /** The last pass left jobs waiting for room on the runners. */
  private waiting = false;

  constructor(
    private readonly c: SchedulerContext,
    private readonly handOut: HandOut,
  ) {
    this.dueSlots = new DueSlots(c, handOut);
  }

  /** A full pass: builds, due slots and pending jobs, recovery, stops. */
  async tick(now: number): Promise<void> {
    await this.recordUptime(now);
    if (!this.restartRecovered) await this.recoverRestart(now);
    await this.startBuilds(now);
    await this.duePass(now);
    await this.recover(now);
    await this.requestStops(now);
  }

  /**
   * Creates the jobs of due slots and hands out what the runners can take,
   * batch after batch while batches come full (a burst of due slots), yielding
   * to the event loop between them so runner events keep being applied, for
   * at most one tick; the next wake continues.
   *
   * Work-conserving and fair (docs/adr/0014-work-conserving-fair-hand-out.md):
   * every due slot gets its job now; as many jobs go to the runners as they can
   * take, never far more, so no job waits while a slot is idle and none queues
   * behind another user's backlog. The hand-out decides how much may go and
   * which jobs get it (HandOut.fairRound: fair queuing across users, a user's
   * manual runs before their due slots); the rest wait PENDING for the next
   * pass.
   */
  async duePass(now: number): Promise<void> {
    const { clock, store, config } = this.c;
    // At most a tick's worth of (clock) time, so the leader renews its lease in time.
    const until = clock.now() + config.tickMs;
    const window = config.batchSize;
    for (;;) {
      const due = await store.workflows.due(now, window);
      // A due workflow whose job is still open takes no room: it only moves on to its next slot (DueSlots.plan).
      const busy = await store.jobs.workflowsWithOpenJobs(due.map((w) => w.id));
      const round = await this.handOut.fairRound(now, window, due.filter((w) => !busy.has(w.id)));
      this.handOut.handedOut(await this.dueSlots.createDueJobs(now, due, round.dueNow));
      // Left waiting for room: the next pass comes when a runner takes a job (JobEvents), not at the next due time.
      this.waiting = round.leftWaiting;
      const more = due.length === window || round.morePending;
      if (!more || clock.now() >= until || this.c.signal.aborted) return;
      await new Promise((resolve) => setImmediate(resolve));
    }
  }

  /**
   * Marks orloj as running until now (the uptime record, docs/adr/0021): one
   * row updated per tick. A beat after a gap longer than a leader handover
   * (the lease's TTL and two ticks) records the gap as downtime, whose missed
   * slots are orloj's own (DueSlots, slot fates).
   */
  private async recordUptime(now: number): Promise<void> {
    const beat = await this.c.store.uptime.beat(now, uptimeGapMs(this.c.config));
    if (beat.downtime) this.c.log.warn({ downFrom: beat.downtime.from, downTo: beat.downtime.to }, 'orloj was down: the slots missed meanwhile are not counted as missed runs');
  }

  /** When the next slot falls due, or since when a pending job waits to be handed out (not while it waits for room). */
  async nextDueAt(): Promise<number> {
    const { store } = this.c;
    const times = [await store.workflows.nextDueAt(), this.waiting ? undefined : await store.jobs.nextPendingAt()];
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

  /** Jobs whose runner stopped renewing their lease, or whose message was never started or confirmed. */
  private async recover(now: number): Promise<void> {
    const { store, config } = this.c;
    const lost = [
      ...(await store.jobs.expiredLeases(now, config.batchSize)),
      ...(await store.jobs.staleQueued(now - config.queueTimeoutMs, now - config.unsentTimeoutMs, config.batchSize)),
    ];
    for (const job of lost) await this.handOut.retryOrFail(job, now, reasons.leaseLost(job.attempts), attemptEndOf(job, 'sweep'));
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
      for (const job of open.filter((j) => j.status === 'RUNNING')) {
        await this.handOut.retryOrFail(job, now, reasons.leaseLost(job.attempts), attemptEndOf(job, { restart: true }));
      }
      recovered += open.length;
      // Whatever did not move (a job of a deleted workflow) is left to the sweep; do not loop on it.
      if (open.length < config.batchSize || moved.length === 0) break;
    }
    this.restartRecovered = true;
    this.c.stats.jobsRecoveredAfterRestart += recovered;
    if (recovered > 0) this.c.log.warn({ jobs: recovered }, 'handed out again the jobs queued or running before the restart (their in-process messages were lost)');
  }
}

/** The longest time without a leader's tick that is not downtime: a leader's lease running out, and a tick of the next one either side. */
export function uptimeGapMs(config: Pick<SchedulerConfig, 'leaderLeaseTtlMs' | 'tickMs'>): number {
  return config.leaderLeaseTtlMs + 2 * config.tickMs;
}
