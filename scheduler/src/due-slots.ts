import { createDueJob, scheduleOf, skipsSlot, type Job, type MaintenanceWindow, type Workflow } from '@orloj/common/domain';
import type { SchedulerContext } from './context.js';
import type { HandOut } from './hand-out.js';

/** A workflow whose due slots from next_due_at up to `slot` got no job of their own. */
interface Skip {
  id: string;
  skipped: number;
  slot: number;
}

/**
 * The leader's due slots: one job per due slot of each workflow. Exactly once
 * comes from the unique (workflow, slot) key; runs never overlap (one open job
 * per workflow). Whether a slot's job goes to the runners now or waits
 * PENDING for room is the fair hand-out's choice (leader.ts, fair-share.ts);
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
      const { jobs, next } = this.plan(due, busy, windows, handOutNow, now, skips);
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
      return created.filter(([job]) => job.status === 'QUEUED');
    });
    this.reportSkipped(skips);
    // After the commit: a leader that dies before this leaves the jobs QUEUED and unconfirmed, and the sweep sends them.
    await this.handOut.send(handOut);
    return handOut.map(([job]) => job.id);
  }

  /** The job each due workflow gets now (if any), its next due time, and the slots it skips (pushed onto `skips`). */
  private plan(due: readonly Workflow[], busy: ReadonlySet<string>, windows: readonly MaintenanceWindow[], handOutNow: ReadonlySet<string>, now: number, skips: Skip[]) {
    const jobs: [Job, Workflow][] = [];
    const next: { id: string; nextDueAt: number }[] = [];
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
      if (skipped > 0) skips.push({ id: w.id, skipped, slot });
      jobs.push([createDueJob(w, slot, now, handOutNow.has(w.id)), w]);
      next.push({ id: w.id, nextDueAt: schedule.firstSlotAfter(slot) });
    }
    return { jobs, next };
  }

  /** Skipped slots: a warn line per pass and the stats counter (the workflows' own counts are in the store). */
  private reportSkipped(skips: readonly Skip[]): void {
    if (skips.length === 0) return;
    const total = skips.reduce((sum, k) => sum + k.skipped, 0);
    this.c.stats.slotsSkipped += total;
    this.c.log.warn(
      { slotsSkipped: total, workflows: skips.length, sample: skips.slice(0, 5).map((k) => ({ workflowId: k.id, skipped: k.skipped })) },
      'skipped due slots: only the most recent missed slot of each workflow runs (runners behind, or orloj was down)',
    );
  }
}
