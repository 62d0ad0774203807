import { catchUpSkips, createDueJob, scheduleOf, skipsSlot, type Downtime, type Job, type MaintenanceWindow, type Schedule, type Workflow } from '@orloj/common/domain';
import type { Store } from '@orloj/common/store';
import type { SchedulerContext } from './context.js';
import type { HandOut } from './hand-out.js';

/** A workflow whose due slots from next_due_at up to `slot` got no job of their own. */
interface Skip {
  id: string;
  skipped: number;
  slot: number;
}

/** A workflow that missed slots, before the ones missed while orloj was down are told apart. */
interface Missed {
  skip: Skip;
  schedule: Schedule;
  /** The missed slots lie in [nextDueAt, end). */
  nextDueAt: number;
  end: number;
}

/** A workflow whose catch-up policy `none` left its most recent missed slot without a job too; `readNextDueAt`: next_due_at as the pass read it. */
interface Passed extends Missed {
  readNextDueAt: number | null;
}

/**
 * The leader's due slots: one job per due slot of each workflow. Exactly once
 * comes from the unique (workflow, slot) key; runs never overlap (one open job
 * per workflow). Whether a slot's job goes to the runners now or waits
 * PENDING for room is the fair hand-out's choice (hand-out.ts, `fairRound`);
 * either way the slot has its job.
 */
export class DueSlots {
  constructor(
    private readonly c: SchedulerContext,
    private readonly handOut: HandOut,
  ) {}

  /**
   * Creates the jobs of these due workflows' slots: QUEUED at once for the
   * workflows in `handOutNow` (the workflows are locked and free: nothing else
   * may hand them out first), handed to the runners after the commit; PENDING
   * for the others, which the hand-out takes when there is room. Returns how
   * the ids of the jobs it moved to QUEUED.
   */
  async createDueJobs(now: number, due: readonly Workflow[], handOutNow: ReadonlySet<string>): Promise<string[]> {
    if (due.length === 0) return [];
    const { store } = this.c;
    const skips: Skip[] = [];
    const handOut = await store.transaction(async (tx) => {
      skips.length = 0; // a retried transaction counts again
      // Locked first, so a job that ends meanwhile is either seen ended here, or
      // sees the workflow set aside below and makes it due again (applyJobOutcome).
      await tx.workflows.lock(due.map((w) => w.id));
      const busy = await tx.jobs.workflowsWithOpenJobs(due.map((w) => w.id));
      // The owners' windows that may hold a slot due since the earliest next_due_at (docs/adr/0019-maintenance-windows.md).
      const since = due.reduce((t, w) => Math.min(t, w.nextDueAt ?? now), now);
      const windows = await tx.maintenanceWindows.inForce(due.map((w) => w.userId), since);
      const missed: Missed[] = [];
      const { jobs, next, passed } = this.plan(due, busy, windows, handOutNow, now, missed);
      // Read before this pass moves next_due_at on.
      const passedNow = await this.stillPassed(tx, passed);
      // The whole batch in two statements; the unique (workflow, slot) key still skips a slot that has its job.
      const inserted = new Set(await tx.jobs.insertMany(jobs.map(([job]) => job)));
      await tx.workflows.setNextDueMany(next);
      const created = jobs.filter(([job]) => inserted.has(job.id));
      // Only where this pass created the slot's job: a second leader's pass over the same slot records nothing.
      const createdFor = new Set(created.map(([job]) => job.workflowId));
      const recorded = await this.notWhileDown(tx, [...missed.filter((m) => createdFor.has(m.skip.id)), ...passedNow], now);
      skips.length = 0;
      skips.push(...recorded);
      await tx.workflows.recordSkippedSlots(recorded.map((k) => ({ id: k.id, skipped: k.skipped, at: now })));
      return created.filter(([job]) => job.status === 'QUEUED');
    });
    this.reportSkipped(skips);
    // After the commit: a leader that dies before this leaves the jobs QUEUED and unconfirmed, and the sweep sends them.
    await this.handOut.send(handOut);
    return handOut.map(([job]) => job.id);
  }

  /**
   * The job each due workflow gets now (if any), its next due time, the slots
   * it skips (pushed onto `missed`), and the workflows whose catch-up policy
   * passed over the slot (`passed`: no job, so no unique key to tell whether
   * another leader's pass recorded them first; see stillPassed). A slot a skip
   * window holds gets no job and counts as no one's miss.
   */
  private plan(due: readonly Workflow[], busy: ReadonlySet<string>, windows: readonly MaintenanceWindow[], handOutNow: ReadonlySet<string>, now: number, missed: Missed[]) {
    const jobs: [Job, Workflow][] = [];
    const next: { id: string; nextDueAt: number }[] = [];
    const passed: Passed[] = [];
    for (const w of due) {
      // Interval or cron, with its jitter (common/src/domain/schedule.ts); none until built.
      const schedule = scheduleOf(w);
      if (!schedule) continue;
      if (busy.has(w.id)) {
        // Runs never overlap: this slot is skipped for now. The workflow waits
        // for its next slot, or, when its job ends first, runs this (most
        // recent missed) slot then (applyJobOutcome).
        next.push({ id: w.id, nextDueAt: schedule.firstSlotAfter(now) });
        continue;
      }
      const slot = schedule.mostRecentSlot(now);
      if (skipsSlot(windows, w, slot)) {
        // A skip window holds the slot (docs/adr/0019-maintenance-windows.md): no job; its fate reads skipped, maintenance.
        next.push({ id: w.id, nextDueAt: schedule.firstSlotAfter(slot) });
        continue;
      }
      // The slots from next_due_at up to this one get no job of their own.
      // (next_due_at is off the slots after a job that ended late made the workflow due at once: it stands for the slot before it.)
      const skipped = schedule.skippedBefore(slot, w.nextDueAt);
      // Due since the slot, or since a job that overran it ended (next_due_at then lies after the slot: an overlap, not a catch-up).
      if (catchUpSkips(w.catchUpPolicy, Math.max(slot, w.nextDueAt ?? slot), now)) {
        // Catch-up `none` (run-policy.ts): the most recent missed slot does not run either.
        passed.push({ skip: { id: w.id, skipped: skipped + 1, slot }, schedule, nextDueAt: w.nextDueAt ?? slot, end: slot + 1, readNextDueAt: w.nextDueAt });
        next.push({ id: w.id, nextDueAt: schedule.firstSlotAfter(slot) });
        continue;
      }
      if (skipped > 0) missed.push({ skip: { id: w.id, skipped, slot }, schedule, nextDueAt: w.nextDueAt ?? slot, end: slot });
      jobs.push([createDueJob(w, slot, now, handOutNow.has(w.id)), w]);
      next.push({ id: w.id, nextDueAt: schedule.firstSlotAfter(slot) });
    }
    return { jobs, next, passed };
  }

  /**
   * The passed-over workflows whose next_due_at is still what this pass read
   * (they are locked now): a second leader's pass over the same slots found
   * it moved on, and records nothing.
   */
  private async stillPassed(tx: Store, passed: readonly Passed[]): Promise<Missed[]> {
    if (passed.length === 0) return [];
    const current = new Map((await tx.workflows.findByIds(passed.map((p) => p.skip.id))).map((w) => [w.id, w.nextDueAt]));
    return passed.filter((p) => current.get(p.skip.id) === p.readNextDueAt).map(({ skip, schedule, nextDueAt, end }) => ({ skip, schedule, nextDueAt, end }));
  }

  /**
   * The skips less the slots that came while orloj itself was down (its
   * uptime record, docs/adr/0021): those are orloj's, not the workflow's, and
   * are not added to its missed runs (its slot fates tell them as
   * `orloj_down`). One read of the record, only when slots were missed.
   */
  private async notWhileDown(tx: Store, missed: readonly Missed[], now: number): Promise<Skip[]> {
    if (missed.length === 0) return [];
    const downtime = await tx.uptime.downtime(Math.min(...missed.map((m) => m.nextDueAt)), now);
    return missed
      .map(({ skip, schedule, nextDueAt, end }) => ({ ...skip, skipped: skip.skipped - missedWhileDown(schedule, downtime, nextDueAt, end) }))
      .filter((k) => k.skipped > 0);
  }

  /** Skipped slots: a warn line per pass and the stats counter (the workflows' own counts are in the store). */
  private reportSkipped(skips: readonly Skip[]): void {
    if (skips.length === 0) return;
    const total = skips.reduce((sum, k) => sum + k.skipped, 0);
    this.c.stats.slotsSkipped += total;
    this.c.log.warn(
      { slotsSkipped: total, workflows: skips.length, sample: skips.slice(0, 5).map((k) => ({ workflowId: k.id, skipped: k.skipped })) },
      'skipped due slots: at most the most recent missed slot of each workflow runs, by its catch-up policy (the runners were behind, or its previous run still went)',
    );
  }
}

/** How many of the slots in [nextDueAt, slot) came while orloj was down. */
function missedWhileDown(schedule: Schedule, downtime: readonly Downtime[], nextDueAt: number, end: number): number {
  let n = 0;
  for (const down of downtime) {
    const from = Math.max(down.from + 1, nextDueAt);
    const to = Math.min(down.to, end);
    if (from < to) n += schedule.countIn(from, to);
  }
  return n;
}
