import { CronSlots } from './cron-slots.js';
import { firstSlotAfter, mostRecentSlot } from './due-slots.js';
import { INTERVAL_MAX, INTERVAL_MIN, type Workflow } from './workflow.js';

/** A workflow's offset, fixed when its jitter is chosen; a schedule reads it (ScheduleFields). */
export { jitterOffsetMs } from './jitter.js';

/**
 * A workflow's automatic slots, whatever they come from (ADR 0015): every
 * `interval` minutes from the build's completion, or the instants of a cron
 * expression in a time zone after it; either moved later by the workflow's
 * jitter offset. The scheduler, the lifecycle and the slot listing ask this one
 * object, so they agree on every slot.
 */
export interface Schedule {
  /** The latest slot at or before `now`, or the first slot when none has come yet. */
  mostRecentSlot(now: number): number;
  /** The first slot strictly after `t`. */
  firstSlotAfter(t: number): number;
  /** Whether `t` is one of the slots. */
  isSlot(t: number): boolean;
  /** How many slots lie in [from, to) (for a cron schedule past {@link COUNT_EXACT_UP_TO}, an estimate from the gaps so far). */
  countIn(from: number, to: number): number;
  /** The slots in [from, to), in order, at most `max`. */
  slotsIn(from: number, to: number, max: number): number[];
  /**
   * The slots that get no job of their own when `slot` runs and the workflow
   * was due at `nextDueAt`: those in [nextDueAt, slot). A `nextDueAt` off the
   * slots (set after a job that ended late made the workflow due at once)
   * stands for the slot before it, which counts too.
   */
  skippedBefore(slot: number, nextDueAt: number | null): number;
}

/** What of a workflow its schedule depends on. */
export type ScheduleFields = Pick<Workflow, 'buildCompletedAt' | 'intervalMinutes' | 'cron' | 'timeZone' | 'jitterOffsetMs' | 'firstRun'>;

export const JITTER_MAX_SECONDS = 3600;
/** Past this many slots, countIn of a cron schedule extrapolates instead of walking every slot. */
export const COUNT_EXACT_UP_TO = 10_000;

/** The workflow's schedule, or undefined while it is not built (slots are anchored to the build). */
export function scheduleOf(w: ScheduleFields): Schedule | undefined {
  if (w.buildCompletedAt === null) return undefined;
  const base = w.cron === null ? intervalBase(w.buildCompletedAt, w.intervalMinutes * 60_000) : cronBase(w.buildCompletedAt, cronSlotsOf(w.cron, w.timeZone));
  const jittered = withOffset(base, w.jitterOffsetMs);
  // First run `now` (run-policy.ts): one more slot, at the build itself, not moved by the jitter.
  return complete(w.firstRun === 'now' ? withSlotAt(jittered, w.buildCompletedAt) : jittered);
}

/** The unshifted slots: mostRecentSlot, firstSlotAfter and a walk between two instants. */
interface Base {
  mostRecentSlot(now: number): number;
  firstSlotAfter(t: number): number;
  countIn(from: number, to: number): number;
}

function intervalBase(anchor: number, intervalMs: number): Base {
  return {
    mostRecentSlot: (now) => mostRecentSlot(anchor, intervalMs, now),
    firstSlotAfter: (t) => firstSlotAfter(anchor, intervalMs, t),
    countIn(from, to) {
      if (to <= from) return 0;
      // slots ≥ from: first is firstSlotAfter(from - 1); those < to
      const first = firstSlotAfter(anchor, intervalMs, from - 1);
      return first >= to ? 0 : Math.floor((to - 1 - first) / intervalMs) + 1;
    },
  };
}

function cronBase(anchor: number, slots: CronSlots): Base {
  const first = slots.next(anchor);
  const after = (t: number) => (t < anchor ? first : slots.next(t));
  return {
    firstSlotAfter: after,
    mostRecentSlot(now) {
      if (now < first) return first;
      // Back off (doubling) until a slot at or before `now` is found, then walk forward to the last one.
      let step = 60_000;
      let s = after(now - step);
      while (s > now && now - step > anchor) {
        step *= 2;
        s = after(Math.max(anchor, now - step));
      }
      for (let next = slots.next(s); next <= now; next = slots.next(s)) s = next;
      return s;
    },
    countIn(from, to) {
      let n = 0;
      const start = after(from - 1);
      for (let s = start; s < to; s = slots.next(s)) {
        if (++n === COUNT_EXACT_UP_TO) return Math.round((n * (to - start)) / (s - start + 1));
      }
      return n;
    },
  };
}

function withOffset(base: Base, offset: number): Base {
  if (offset === 0) return base;
  return {
    mostRecentSlot: (now) => base.mostRecentSlot(now - offset) + offset,
    firstSlotAfter: (t) => base.firstSlotAfter(t - offset) + offset,
    countIn: (from, to) => base.countIn(from - offset, to - offset),
  };
}

/** `base` and one more slot at `at`, which lies before all of base's. */
function withSlotAt(base: Base, at: number): Base {
  const firstOfBase = base.firstSlotAfter(at);
  return {
    mostRecentSlot: (now) => (now < firstOfBase ? at : base.mostRecentSlot(now)),
    firstSlotAfter: (t) => (t < at ? at : base.firstSlotAfter(t)),
    countIn: (from, to) => base.countIn(from, to) + (from <= at && at < to ? 1 : 0),
  };
}

/** The rest of the questions, answered from the three a Base answers. */
function complete(base: Base): Schedule {
  const { firstSlotAfter, countIn } = base;
  const isSlot = (t: number) => firstSlotAfter(t - 1) === t;
  return {
    mostRecentSlot: base.mostRecentSlot,
    firstSlotAfter,
    isSlot,
    countIn,
    slotsIn(from, to, max) {
      const out: number[] = [];
      for (let s = firstSlotAfter(from - 1); s < to && out.length < max; s = firstSlotAfter(s)) out.push(s);
      return out;
    },
    skippedBefore(slot, nextDueAt) {
      if (nextDueAt === null || nextDueAt >= slot) return 0;
      return countIn(nextDueAt, slot) + (isSlot(nextDueAt) ? 0 : 1);
    },
  };
}

/** CronSlots are built once per (expression, zone) and kept: every pass of the leader asks for them (and maintenance windows, maintenance-window.ts). */
const cronSlotsCache = new Map<string, CronSlots>();
const CRON_CACHE_MAX = 10_000;

export function cronSlotsOf(expression: string, timeZone: string): CronSlots {
  const key = `${timeZone}\u0000${expression}`;
  let slots = cronSlotsCache.get(key);
  if (!slots) {
    if (cronSlotsCache.size >= CRON_CACHE_MAX) cronSlotsCache.clear();
    cronSlotsCache.set(key, (slots = new CronSlots(expression, timeZone)));
  }
  return slots;
}

/**
 * What a workflow's `interval` holds for contract clients: its own interval,
 * or for a cron workflow the longest gap between consecutive runs over the
 * coming year, in minutes, clamped to the contract's range (1 to 10080).
 */
export function contractInterval(cron: string | null, timeZone: string, intervalMinutes: number, now: number): number {
  if (cron === null) return intervalMinutes;
  return Math.min(INTERVAL_MAX, Math.max(INTERVAL_MIN, cronSlotsOf(cron, timeZone).longestGapMinutes(now)));
}
