/**
 * Time source, injected everywhere so tests can control it. Milliseconds since
 * the epoch. `sleep` waits for an amount of *clock* time, so loops, leases and
 * timeouts all run on one time base — an accelerated clock speeds them all up.
 */
export interface Clock {
  now(): number;
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

function realSleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, Math.max(0, ms));
    function done() {
      signal?.removeEventListener('abort', done);
      clearTimeout(timer);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
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
  sleep(ms: number, signal?: AbortSignal): Promise<void> {
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
  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      if (signal?.aborted) return resolve();
      const onAbort = () => {
        this.sleepers = this.sleepers.filter((s) => s !== sleeper);
        resolve();
      };
      // Woken by the clock: the listener goes, so a long-lived signal does not collect one per sleep.
      const sleeper = { at: this.current + ms, wake: () => (signal?.removeEventListener('abort', onAbort), resolve()) };
      this.sleepers.push(sleeper);
      signal?.addEventListener('abort', onAbort, { once: true });
      this.wakeDue();
    });
  }
  private wakeDue(): void {
    const due = this.sleepers.filter((s) => s.at <= this.current);
    this.sleepers = this.sleepers.filter((s) => s.at > this.current);
    for (const s of due) s.wake();
  }
}

export function toIso(ms: number): string {
  return new Date(ms).toISOString();
}
