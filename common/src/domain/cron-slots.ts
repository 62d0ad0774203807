import { Cron } from 'croner';

/**
 * Cron schedules in a time zone (issue 25): the slots of a 5-field cron
 * expression (or `@hourly`, `@daily`, `@weekly`, `@monthly`, `@yearly`,
 * `@annually`, `@midnight`) read as wall-clock times in an IANA zone.
 *
 * The expression is matched against local wall-clock time; each matching
 * local time becomes one instant by the daylight-saving rule:
 * - a local time that does not exist (the clock springs forward past it) runs
 *   at the next valid minute, the instant the clock jumps: every slot inside
 *   the gap collapses onto that one instant, so it runs once;
 * - a local time that occurs twice (the clock falls back) runs once, at its
 *   first occurrence; the repeated hour's second pass schedules nothing.
 *
 * croner matches the fields (on a "floating" time: the local fields written as
 * if they were UTC); this module alone maps local times to instants, since
 * neither croner nor cron-parser follows the rule above in both directions.
 */

/** The named forms accepted besides the five fields. */
export const CRON_NICKNAMES = ['@yearly', '@annually', '@monthly', '@weekly', '@daily', '@midnight', '@hourly'] as const;

const MINUTE = 60_000;
/** How many minutes' answers a CronSlots keeps (next). */
const BY_MINUTE_MAX = 4_096;
const DAY = 24 * 60 * MINUTE;
/** How far ahead an expression must match at least once (a leap day's 29 February included). */
const MATCH_HORIZON_MS = 8 * 366 * DAY;

/** Why `expression` is not a cron schedule orloj runs, or undefined when it is one. */
export function cronProblem(expression: string): string | undefined {
  const parsed = parseCron(expression);
  return typeof parsed === 'string' ? parsed : undefined;
}

/** The expression's croner pattern (built once), or why it is not a cron schedule orloj runs. */
function parseCron(expression: string): Cron | string {
  const text = expression.trim();
  if (text === '') return 'must not be empty';
  if (text.startsWith('@')) {
    if (!(CRON_NICKNAMES as readonly string[]).includes(text.toLowerCase())) return `must be five fields or one of ${CRON_NICKNAMES.join(', ')}`;
  } else if (text.split(/\s+/).length !== 5) {
    return 'must have five fields (minute hour day-of-month month day-of-week)';
  }
  let cron: Cron;
  try {
    cron = floatingCron(text);
  } catch (err) {
    return `is not a valid cron expression: ${(err as Error).message.replace(/^CronPattern: /, '')}`;
  }
  const from = Date.UTC(2000, 0, 1);
  const next = cron.nextRun(new Date(from));
  if (!next || next.getTime() - from > MATCH_HORIZON_MS) return 'never matches a date (for example the 30th of February)';
  return cron;
}

/** Why `zone` is not an IANA time zone this runtime knows, or undefined when it is one. */
export function timeZoneProblem(zone: string): string | undefined {
  if (zone.trim() !== zone || zone === '') return 'must be an IANA time zone name such as Europe/Berlin';
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: zone });
    return undefined;
  } catch {
    return 'must be an IANA time zone name such as Europe/Berlin';
  }
}

/** croner over floating times: local wall-clock fields written as UTC. */
function floatingCron(expression: string): Cron {
  return new Cron(expression, { utcOffset: 0, paused: true, legacyMode: true });
}

/** The slots of one cron expression in one zone. Build once per workflow definition; `next` is cheap. */
export class CronSlots {
  private readonly cron: Cron;
  private readonly zone: ZoneOffsets | undefined;
  /** next()'s answer for the start of each recent minute, by minute. */
  private readonly byMinute = new Map<number, number>();

  constructor(
    readonly expression: string,
    readonly timeZone = 'UTC',
  ) {
    const parsed = parseCron(expression);
    const problem = typeof parsed === 'string' ? parsed : timeZoneProblem(timeZone);
    if (problem !== undefined || typeof parsed === 'string') throw new Error(`cron schedule "${expression}" in ${timeZone} ${problem}`);
    this.cron = parsed;
    this.zone = isUtc(timeZone) ? undefined : zoneOffsets(timeZone);
  }

  /** The first slot strictly after the instant `after` (epoch ms), by the daylight-saving rule above. */
  next(after: number): number {
    // A herd of workflows on one expression and zone asks about instants that differ only by
    // their jitter, within the same few minutes: the answer for the start of `after`'s minute
    // is kept, and is the answer for `after` too unless a slot lies in between.
    const minute = Math.floor(after / MINUTE) * MINUTE;
    let slot = this.byMinute.get(minute);
    if (slot === undefined) {
      if (this.byMinute.size >= BY_MINUTE_MAX) this.byMinute.clear();
      this.byMinute.set(minute, (slot = this.compute(minute)));
    }
    return slot > after ? slot : this.compute(after);
  }

  /** next() without its memory: walks that visit each minute once would only fill it. */
  private compute(after: number): number {
    if (!this.zone) return this.nextFloating(after);
    const zone = this.zone;
    // A local time's first instant is never before `after` unless the local time is too;
    // the loop passes over the second pass of a repeated hour and over a gap's collapsed slots.
    let local = zone.localOf(after);
    for (let i = 0; i < 100_000; i++) {
      local = this.nextFloating(local);
      const at = zone.firstInstantOf(local);
      if (at > after) return at;
    }
    throw new Error(`cron schedule "${this.expression}" in ${this.timeZone}: no slot found after ${new Date(after).toISOString()}`);
  }

  /** The `count` slots after `after`, in order. */
  upcoming(after: number, count: number): number[] {
    const out: number[] = [];
    for (let t = after; out.length < count; ) out.push((t = this.compute(t)));
    return out;
  }

  /**
   * The longest gap between consecutive slots among the next `runs` (at most
   * a year ahead), in whole minutes: what a cron workflow's `interval` shows
   * contract clients, who read it as "runs at least this often".
   */
  longestGapMinutes(after: number, runs = 2_000): number {
    let longest = 0;
    let t = this.compute(after);
    for (let i = 0; i < runs && t - after < 366 * DAY; i++) {
      const next = this.compute(t);
      longest = Math.max(longest, next - t);
      t = next;
    }
    return Math.max(1, Math.round(longest / MINUTE));
  }

  private nextFloating(t: number): number {
    const next = this.cron.nextRun(new Date(t));
    if (!next) throw new Error(`cron schedule "${this.expression}" has no run after ${new Date(t).toISOString()}`);
    return next.getTime();
  }
}

function isUtc(zone: string): boolean {
  return zone === 'UTC' || zone === 'Etc/UTC' || zone === 'Etc/GMT' || zone === 'GMT';
}

/** UTC offsets of one zone, looked up through Intl and remembered per quarter hour (every offset change of today's zones falls on one). */
interface ZoneOffsets {
  /** The local wall-clock time at `instant`, as a floating time. */
  localOf(instant: number): number;
  /** The first instant whose local time is `local`; for a local time in a gap, the instant the clock jumps past it. */
  firstInstantOf(local: number): number;
}

const QUARTER_HOUR = 15 * MINUTE;
const zones = new Map<string, ZoneOffsets>();

function zoneOffsets(zone: string): ZoneOffsets {
  let z = zones.get(zone);
  if (!z) zones.set(zone, (z = makeZoneOffsets(zone)));
  return z;
}

function makeZoneOffsets(zone: string): ZoneOffsets {
  const format = new Intl.DateTimeFormat('en-US', {
    timeZone: zone,
    hourCycle: 'h23',
    year: 'numeric',
    month: 'numeric',
    day: 'numeric',
    hour: 'numeric',
    minute: 'numeric',
    second: 'numeric',
  });
  const byQuarter = new Map<number, number>();
  const offsetAt = (instant: number): number => {
    const quarter = Math.floor(instant / QUARTER_HOUR);
    let offset = byQuarter.get(quarter);
    if (offset === undefined) {
      const start = quarter * QUARTER_HOUR;
      const p: Record<string, number> = {};
      for (const part of format.formatToParts(start)) if (part.type !== 'literal') p[part.type] = Number(part.value);
      offset = Date.UTC(p.year!, p.month! - 1, p.day!, p.hour!, p.minute!, p.second!) - start;
      if (byQuarter.size > 50_000) byQuarter.clear();
      byQuarter.set(quarter, offset);
    }
    return offset;
  };
  const localOf = (instant: number): number => instant + offsetAt(instant);
  return {
    localOf,
    firstInstantOf(local) {
      const before = offsetAt(local - DAY);
      const after = offsetAt(local + DAY);
      const candidates = [local - before, local - after].filter((t) => localOf(t) === local).sort((a, b) => a - b);
      if (candidates.length > 0) return candidates[0]!;
      // In a gap: the clock jumps at some instant in (local - after, local - before]; find
      // the first instant whose local time is at or past `local`.
      let lo = local - Math.max(before, after);
      let hi = local - Math.min(before, after);
      while (hi - lo > 1) {
        const mid = Math.floor((lo + hi) / 2);
        if (localOf(mid) >= local) hi = mid;
        else lo = mid;
      }
      return hi;
    },
  };
}
