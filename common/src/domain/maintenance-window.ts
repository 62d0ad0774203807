import { cronSlotsOf } from './schedule.js';
import type { Workflow } from './workflow.js';

/**
 * Maintenance windows and snooze (issue 25, docs/adr/0019-maintenance-windows.md).
 *
 * A window is a span of time, one-off (`startsAt` to `endsAt`) or recurring
 * (each instant of a cron expression in an IANA zone, for `durationMinutes`),
 * over one workflow or over every workflow of its owner whose name contains
 * `workflowQuery` (case-insensitive, read when the window applies, so a
 * workflow created or renamed later is covered too).
 *
 * While a window applies to a workflow its failures alert nobody: no
 * incident, no down or recovered state change, no failure notification. A
 * `skip` window also runs nothing: the scheduler creates no job for a slot
 * that falls inside it, and the slot's fate reads `skipped`, `maintenance`.
 * A snooze is a one-off `mute` window of one workflow from now.
 *
 * The recurring occurrences follow the schedule's daylight-saving rule
 * (cron-slots.ts): one starting at a local time that does not exist starts
 * when the clock jumps; one at a local time that occurs twice starts once,
 * at its first occurrence, and lasts `durationMinutes` of real time.
 */

export const WINDOW_MODES = ['skip', 'mute'] as const;
export type WindowMode = (typeof WINDOW_MODES)[number];

/** The longest a recurring window's occurrence lasts: a week. */
export const WINDOW_DURATION_MAX_MINUTES = 10_080;
/** The most windows a user keeps (each due pass and each failure reads its owner's). */
export const WINDOWS_PER_USER_MAX = 100;
export const WINDOW_NAME_MAX_LENGTH = 200;
/** The furthest ahead a snooze (of a workflow or of an incident) may reach. */
export const SNOOZE_MAX_MS = 30 * 24 * 3_600_000;

/** Why `until` (epoch ms, NaN when unreadable) is not a time to snooze until, or undefined: one rule for workflows and incidents. */
export function snoozeProblem(until: number, now: number): string | undefined {
  if (!Number.isFinite(until)) return 'must be an RFC 3339 date-time';
  if (until <= now) return 'must be in the future';
  if (until > now + SNOOZE_MAX_MS) return 'must be at most 30 days ahead';
  return undefined;
}

/** When a window applies: once, or at each instant of a cron expression in a zone. */
export type WindowTiming = { startsAt: number; endsAt: number; cron?: undefined } | { cron: string; timeZone: string; durationMinutes: number; startsAt?: undefined };

/** Which workflows a window covers: exactly one of the two. */
export type WindowTarget = { workflowId: string; workflowQuery?: undefined } | { workflowQuery: string; workflowId?: undefined };

export type MaintenanceWindow = {
  id: string;
  userId: string;
  name: string;
  mode: WindowMode;
  /** A snooze of its workflow (one a workflow, replaced by the next snooze). */
  snooze: boolean;
  createdAt: number;
  updatedAt: number;
} & WindowTarget &
  WindowTiming;

/** One occurrence of a window: [start, end). */
export interface WindowSpan {
  start: number;
  end: number;
}

/** The occurrence of `w` that contains `t`, if any. */
export function spanAt(w: WindowTiming, t: number): WindowSpan | undefined {
  if (w.cron === undefined) return w.startsAt <= t && t < w.endsAt ? { start: w.startsAt, end: w.endsAt } : undefined;
  const length = w.durationMinutes * 60_000;
  // The first occurrence starting after t - length starts at or before t exactly when t falls inside it.
  const start = cronSlotsOf(w.cron, w.timeZone).next(t - length);
  return start <= t ? { start, end: start + length } : undefined;
}

/** The occurrence containing `t`, or else the next one to start (undefined when a one-off window is over). */
export function currentOrNextSpan(w: WindowTiming, t: number): WindowSpan | undefined {
  const now = spanAt(w, t);
  if (now) return now;
  if (w.cron === undefined) return t < w.startsAt ? { start: w.startsAt, end: w.endsAt } : undefined;
  const start = cronSlotsOf(w.cron, w.timeZone).next(t);
  return { start, end: start + w.durationMinutes * 60_000 };
}

/** Whether the window covers the workflow (its name read now). */
export function covers(w: WindowTarget, workflow: Pick<Workflow, 'id' | 'name'>): boolean {
  if (w.workflowId !== undefined) return w.workflowId === workflow.id;
  return workflow.name.toLowerCase().includes(w.workflowQuery.toLowerCase());
}

/** The windows among `windows` (any owner's) that apply to the workflow at `t`: its owner's, covering it, in an occurrence. */
function applying(windows: readonly MaintenanceWindow[], workflow: Pick<Workflow, 'id' | 'name' | 'userId'>, t: number): MaintenanceWindow[] {
  return windows.filter((w) => w.userId === workflow.userId && covers(w, workflow) && spanAt(w, t) !== undefined);
}

/** Whether a slot at `t` of the workflow is skipped for maintenance. */
export function skipsSlot(windows: readonly MaintenanceWindow[], workflow: Pick<Workflow, 'id' | 'name' | 'userId'>, t: number): boolean {
  return applying(windows, workflow, t).some((w) => w.mode === 'skip');
}

/** Whether the workflow's alerts are muted at `t` (any window applying, `skip` or `mute`). */
export function isMuted(windows: readonly MaintenanceWindow[], workflow: Pick<Workflow, 'id' | 'name' | 'userId'>, t: number): boolean {
  return applying(windows, workflow, t).length > 0;
}
