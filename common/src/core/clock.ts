import { onAbort, type AbortLike } from './cancellation.js';

/**
 * Time source, injected everywhere so tests can control it. Milliseconds since
 * the epoch. `sleep` waits for an amount of *clock* time, so loops, leases and
 * timeouts all run on one time base — an accelerated clock speeds them all up.
 */
export interface Clock {
  now(): number;
  sleep(ms: number, signal?: AbortLike): Promise<void>;
}

function realSleep(ms: number, signal?: AbortLike): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, Math.max(0, ms));
    const stopListening = signal && onAbort(signal, done);
    function done() {
      stopListening?.();
      clearTimeout(timer);
      resolve();
    }
  });
}

export const systemClock: Clock = { now: () => Date.now(), sleep: realSleep };

/**
 * Clock time that runs `speed` times faster than real time from `origin`
 * (same formula in every process, so a multi-process test shares one clock).
 * Configured with ORLOJ_CLOCK=accelerated:<origin-ms>:<speed>; for tests only.
 */
export class AcceleratedClock implements Clock {
  constructor(
    readonly origin: number,
    readonly speed: number,
  ) {}
  now(): number {
    return Math.floor(this.origin + (Date.now() - this.origin) * this.speed);
  }
  sleep(ms: number, signal?: AbortLike): Promise<void> {
    return realSleep(ms / this.speed, signal);
  }
}

/** A clock tests move by hand; sleepers wake when advance() passes their time. */
export class ManualClock implements Clock {
  private sleepers: { at: number; wake: () => void }[] = [];
  constructor(private current: number = Date.UTC(2026, 0, 1)) {}
  now(): number {
    return this.current;
  }
  set(ms: number): void {
    this.current = ms;
    this.wakeDue();
  }
  advance(ms: number): void {
    this.set(this.current + ms);
  }
  sleep(ms: number, signal?: AbortLike): Promise<void> {
    return new Promise((resolve) => {
      if (signal?.aborted) return resolve();
      // Woken by the clock: the listener goes, so a long-lived signal does not collect one per sleep.
      const sleeper = { at: this.current + ms, wake: () => (stopListening?.(), resolve()) };
      const stopListening =
        signal &&
        onAbort(signal, () => {
          this.sleepers = this.sleepers.filter((s) => s !== sleeper);
          resolve();
        });
      this.sleepers.push(sleeper);
      this.wakeDue();
    });
  }
  private wakeDue(): void {
    const due = this.sleepers.filter((s) => s.at <= this.current);
    this.sleepers = this.sleepers.filter((s) => s.at > this.current);
    for (const s of due) s.wake();
  }
}

/**
 * RFC 3339 in UTC with milliseconds, exactly as `Date#toISOString` writes it.
 * Every page the api sends carries dozens of timestamps, and toISOString
 * costs about half a microsecond each; most of them fall on the same day, so
 * the date part is kept from the previous call and the time of day written
 * out here, about five times faster. Anything but a whole number of
 * milliseconds within the Date range goes to toISOString (which throws for
 * an invalid time).
 */
export function toIso(ms: number): string {
  if (!Number.isSafeInteger(ms) || Math.abs(ms) > MAX_TIME) return new Date(ms).toISOString();
  const day = Math.floor(ms / DAY_MS);
  if (day !== isoDay.day) {
    const iso = new Date(day * DAY_MS).toISOString();
    isoDay.day = day;
    isoDay.prefix = iso.slice(0, iso.indexOf('T') + 1);
  }
  const t = ms - day * DAY_MS;
  return `${isoDay.prefix}${two(Math.floor(t / 3_600_000))}:${two(Math.floor(t / 60_000) % 60)}:${two(Math.floor(t / 1000) % 60)}.${three(t % 1000)}Z`;
}
const DAY_MS = 86_400_000;
/** The largest distance from the epoch a Date can hold, in ms. */
const MAX_TIME = 8.64e15;
/** The day toIso wrote last, and its "YYYY-MM-DDT". */
const isoDay = { day: Number.NaN, prefix: '' };
const two = (n: number): string => (n < 10 ? `0${n}` : `${n}`);
const three = (n: number): string => (n < 10 ? `00${n}` : n < 100 ? `0${n}` : `${n}`);
