import type { Job } from './job.js';
import type { Schedule } from './schedule.js';
import type { Workflow } from './workflow.js';

/**
 * What became of each automatic slot of a workflow (issue 25, ADR 0015),
 * told from its schedule, its automatic jobs and its scheduler bookkeeping:
 *
 * - `ran`: its job finished (COMPLETED or FAILED); `lateMs` is how long after
 *   the slot the job started; `afterOverlap` when the previous run was still
 *   going at the slot and this one waited for it (overlap `run_after`).
 * - `running`, `pending`: its job is RUNNING, or PENDING/QUEUED; a slot that
 *   has come and is the workflow's next due one, without a job yet, is
 *   `pending` too.
 * - `canceled`: its job was canceled (the workflow was updated or terminated).
 * - `skipped`: no job of its own. `reason`: `maintenance` when a skip window
 *   held it (docs/adr/0019-maintenance-windows.md; a window since deleted
 *   leaves no trace); `still_running` when the previous run was still going
 *   at the slot (runs never overlap; with overlap `skip`, every slot that came
 *   during a run); `orloj_down` when the slot came while orloj itself was not
 *   running (its uptime record, `Downtime` below); otherwise `not_run` (the
 *   runners were behind). Only the most recent missed slot runs, unless the
 *   catch-up policy is `none` (run-policy.ts): then that slot, the one
 *   `latest` would have run, reads `catch_up_none`.
 * - `paused`: the workflow is paused and the slot came (or comes) since, or
 *   was due and not yet taken when it was paused.
 * - `upcoming`: not come yet.
 *
 * What cannot be told: slots are those of the current schedule, so before a
 * change of interval or cron the past reads by today's schedule; a pause that
 * has since been resumed leaves no trace, its slots read `skipped`/`not_run`;
 * jobs removed by retention read as `skipped`.
 */
export const SLOT_FATES = ['ran', 'running', 'pending', 'canceled', 'skipped', 'paused', 'upcoming'] as const;
export type SlotFate = (typeof SLOT_FATES)[number];
export const SKIP_REASONS = ['still_running', 'orloj_down', 'not_run', 'catch_up_none', 'maintenance'] as const;
export type SkipReason = (typeof SKIP_REASONS)[number];

export interface SlotRecord {
  slotAt: number;
  fate: SlotFate;
  jobId?: string;
  lateMs?: number;
  reason?: SkipReason;
  afterOverlap?: true;
}

/** A time orloj was not running: from the last tick of one leader period to the first of the next. */
export interface Downtime {
  from: number;
  to: number;
}

/** Whether `t` falls in one of the periods (sorted by `from`). */
export function isDown(downtime: readonly Downtime[], t: number): boolean {
  return downtime.some((d) => d.from < t && t < d.to);
}

/** The most slots one listing tells of. */
export const SLOTS_MAX = 1000;

/**
 * The fate of each slot in [from, to). `jobs`: the workflow's AUTOMATIC jobs
 * with slots in [from, to), and the last one before `from` (to tell whether
 * it was still running at the first slots). `around.downtime`: the times orloj
 * was down that reach into the range; `around.inMaintenance`: whether a skip
 * window held a slot.
 */
export function slotFates(
  w: Pick<Workflow, 'pausedAt' | 'nextDueAt' | 'terminatedAt' | 'catchUpPolicy'>,
  schedule: Schedule,
  jobs: readonly Job[],
  range: { from: number; to: number; now: number },
  around: { downtime?: readonly Downtime[]; inMaintenance?: (slotAt: number) => boolean } = {},
): SlotRecord[] {
  const bySlot = new Map(jobs.map((j) => [j.slotAt, j]));
  const ordered = [...jobs].sort((a, b) => a.slotAt - b.slotAt);
  const out: SlotRecord[] = [];
  let previous: Job | undefined;
  let k = 0;
  for (const slotAt of schedule.slotsIn(range.from, range.to, SLOTS_MAX)) {
    while (k < ordered.length && ordered[k]!.slotAt < slotAt) previous = ordered[k++];
    const job = bySlot.get(slotAt);
    if (job) out.push(fateOfJob(job, previous));
    // while paused: every slot from the pause, and those due before it that the leader had not yet taken
    else if (w.pausedAt !== null && (slotAt >= w.pausedAt || (w.nextDueAt !== null && slotAt >= w.nextDueAt))) out.push({ slotAt, fate: 'paused' });
    else if (slotAt > range.now) out.push({ slotAt, fate: 'upcoming' });
    else if (w.terminatedAt === null && w.nextDueAt !== null && slotAt >= w.nextDueAt && schedule.firstSlotAfter(slotAt) > range.now) out.push({ slotAt, fate: 'pending' });
    else if (around.inMaintenance?.(slotAt)) out.push({ slotAt, fate: 'skipped', reason: 'maintenance' });
    else out.push({ slotAt, fate: 'skipped', reason: skipReason(previous, slotAt, around.downtime ?? []) });
  }
  return w.catchUpPolicy === 'none' ? markPassedOver(out) : out;
}

function skipReason(previous: Job | undefined, slotAt: number, downtime: readonly Downtime[]): SkipReason {
  if (isDown(downtime, slotAt)) return 'orloj_down';
  return previous && ranPast(previous, slotAt) ? 'still_running' : 'not_run';
}

/** Catch-up `none`: the last slot of each run of missed slots (runners behind, or orloj down) is the one `latest` would have run. */
function markPassedOver(records: SlotRecord[]): SlotRecord[] {
  const missed = (r: SlotRecord | undefined) => r?.fate === 'skipped' && (r.reason === 'not_run' || r.reason === 'orloj_down');
  return records.map((r, i) => (missed(r) && i + 1 < records.length && !missed(records[i + 1]) ? { ...r, reason: 'catch_up_none' } : r));
}

function fateOfJob(job: Job, previous: Job | undefined): SlotRecord {
  const base = { slotAt: job.slotAt, jobId: job.id, ...(previous && ranPast(previous, job.slotAt) ? { afterOverlap: true as const } : {}) };
  switch (job.status) {
    case 'COMPLETED':
    case 'FAILED':
      return { ...base, fate: 'ran', ...(job.startedAt !== null ? { lateMs: Math.max(0, job.startedAt - job.slotAt) } : {}) };
    case 'RUNNING':
      return { ...base, fate: 'running', ...(job.startedAt !== null ? { lateMs: Math.max(0, job.startedAt - job.slotAt) } : {}) };
    case 'CANCELED':
      return { ...base, fate: 'canceled' };
    default:
      return { ...base, fate: 'pending' };
  }
}

/** Whether the job was still going at `t`: started (or waiting) before it, and ended after it or not yet. */
function ranPast(job: Job, t: number): boolean {
  return job.status !== 'CANCELED' && (job.completedAt === null || job.completedAt > t);
}
