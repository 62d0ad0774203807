// The steady-state verdict of a measured window, from rows of the workflows
// and jobs tables alone: shared by the scheduling suite's db tool (which reads
// them through the store of this tree) and the embedded-api suite (which reads
// the SQLite file of any orloj version with plain SQL).
import { lagSummary, summarize, type Lag, type LagSummary, type Summary } from './stats.js';

export interface JobTimes {
  slot_at: number;
  created_at: number;
  queued_at: number | null;
  started_at: number | null;
  completed_at: number | null;
  updated_at: number;
  status: string;
}

/** Per step between the due slot and COMPLETED in the store (ms). */
export type Phases = Record<string, Summary>;

/** The columns of a workflow the interval arithmetic needs (slots fall at build_completed_at + k × interval). */
export interface WorkflowSlots {
  id: string;
  build_completed_at: number | null;
  interval_minutes: number;
}

/** A workflow's slots in [from, to), in order; the default is the interval arithmetic. */
export type SlotsIn<W extends WorkflowSlots> = (w: W, from: number, to: number) => Iterable<number>;

/** Slots at build_completed_at + k × interval, k ≥ 1. */
function* intervalSlots(w: WorkflowSlots, from: number, to: number): Iterable<number> {
  if (w.build_completed_at === null) return;
  const interval = w.interval_minutes * 60_000;
  const anchor = w.build_completed_at;
  for (let slot = anchor + Math.max(1, Math.ceil((from - anchor) / interval)) * interval; slot < to; slot += interval) yield slot;
}

/** An AUTOMATIC job with the times of its steps. */
export type SlotJob = JobTimes & { workflow_id: string };

export interface SlotCoverage {
  workflows: number;
  dueSlots: number;
  jobsForDueSlots: number;
  /** Due slots with no job while the workflow has a job for a later slot. */
  skipped: number;
  /** Due slots with no job at all when orloj stopped. */
  noJob: number;
  /** Jobs of the due slots by status when orloj stopped. */
  statuses: Record<string, number>;
  lag: LagSummary;
  phases: Phases;
}

/** The coverage and what the tables say about the whole window. */
export interface WindowAnalysis extends SlotCoverage {
  /** Jobs whose completed_at falls in the window. */
  completedInWindow: number;
  /** COMPLETED jobs of the window's slots with no runner recorded: their start was applied after their result. */
  completedWithoutRunner?: number;
  allJobs: Record<string, number>;
  /** Every FAILED job in the table, by "CODE: message". */
  failures: Record<string, number>;
}

/** Where the time between the due slot and the end went, per step (ms). */
export function phases(rows: readonly JobTimes[]): Phases {
  const diff = (pick: (r: JobTimes) => [number | null, number | null]) =>
    summarize(
      rows.flatMap((r) => {
        const [from, to] = pick(r);
        return from === null || to === null ? [] : [to - from];
      }),
    );
  // created_at and queued_at are both the clock reading at the start of the
  // scheduler tick that created and dispatched the job (one `now` per tick).
  return {
    'slot → tick that created the job': diff((r) => [r.slot_at, r.created_at]),
    'created → tick that QUEUED it': diff((r) => [r.created_at, r.queued_at]),
    'that tick → started by a runner': diff((r) => [r.queued_at, r.started_at]),
    'started → finished': diff((r) => [r.started_at, r.completed_at]),
    'finished → COMPLETED in the store': diff((r) => (r.status === 'COMPLETED' ? [r.completed_at, r.updated_at] : [null, null])),
  };
}

/**
 * Every slot of every workflow due in [windowStart, windowEnd) either has its
 * AUTOMATIC job (`jobs`: those with slot_at ≥ windowStart) or is missed:
 * "skipped" when the workflow already has a job for a later slot (orloj runs
 * only the most recent missed slot), "no job" when none existed yet at stopAt.
 * Lag = started_at − slot_at; a job not started by stopAt counts with
 * stopAt − slot_at as a lower bound. `slotsIn` tells the slots of a workflow
 * that is not on an interval (a cron schedule, for the suite that reads it
 * with this tree's code).
 */
export function slotCoverage<W extends WorkflowSlots>(
  workflows: readonly W[],
  jobs: readonly SlotJob[],
  window: { windowStart: number; windowEnd: number; stopAt: number },
  slotsIn: SlotsIn<W> = intervalSlots,
): SlotCoverage {
  const { windowStart: ws, windowEnd: we, stopAt } = window;
  const byWorkflow = new Map<string, { slots: Map<number, JobTimes>; last: number }>();
  for (const j of jobs) {
    let e = byWorkflow.get(j.workflow_id);
    if (!e) byWorkflow.set(j.workflow_id, (e = { slots: new Map(), last: -Infinity }));
    e.slots.set(j.slot_at, j);
    if (j.slot_at > e.last) e.last = j.slot_at;
  }
  let due = 0;
  let skipped = 0;
  let noJob = 0;
  const lags: Lag[] = [];
  const windowJobs: JobTimes[] = [];
  const statuses: Record<string, number> = {};
  for (const w of workflows) {
    if (w.build_completed_at === null) continue;
    const e = byWorkflow.get(w.id);
    for (const slot of slotsIn(w, ws, we)) {
      due += 1;
      const job = e?.slots.get(slot);
      if (!job) {
        if (e && e.last > slot) skipped += 1;
        else noJob += 1;
        continue;
      }
      windowJobs.push(job);
      statuses[job.status] = (statuses[job.status] ?? 0) + 1;
      lags.push(job.started_at !== null ? { v: job.started_at - slot, censored: false } : { v: stopAt - slot, censored: true });
    }
  }
  return {
    workflows: workflows.length,
    dueSlots: due,
    jobsForDueSlots: windowJobs.length,
    skipped,
    noJob,
    statuses,
    lag: lagSummary(lags),
    phases: phases(windowJobs),
  };
}
