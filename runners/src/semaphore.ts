/**
 * A counting semaphore: at most `size` holders at once, waiters served in
 * arrival order. acquire() resolves with a release function (calling it twice
 * is harmless) and rejects when its signal aborts before a slot was free.
 */
export type Release = () => void;

interface Waiter {
  grant: (release: Release) => void;
}

export class Semaphore {
  private held = 0;
  private readonly waiters: Waiter[] = [];

  constructor(readonly size: number) {
    if (!Number.isInteger(size) || size < 1) throw new Error(`semaphore size must be a positive integer, got ${size}`);
  }

  /** Slots currently held. */
  get inUse(): number {
    return this.held;
  }

  /** Callers waiting for a slot. */
  get waiting(): number {
    return this.waiters.length;
  }

  acquire(signal?: AbortSignal): Promise<Release> {
    if (signal?.aborted) return Promise.reject(abortReason(signal));
    if (this.held < this.size && this.waiters.length === 0) {
      this.held += 1;
      return Promise.resolve(this.releaser());
    }
    return new Promise<Release>((resolve, reject) => {
      const waiter: Waiter = {
        grant: (release) => {
          signal?.removeEventListener('abort', onAbort);
          resolve(release);
        },
      };
      const onAbort = (): void => {
        const i = this.waiters.indexOf(waiter);
        if (i >= 0) this.waiters.splice(i, 1);
        reject(abortReason(signal));
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.waiters.push(waiter);
    });
  }

  private releaser(): Release {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.waiters.shift();
      // The slot passes straight to the next waiter: nobody can jump the queue.
      if (next) next.grant(this.releaser());
      else this.held -= 1;
    };
  }
}

function abortReason(signal: AbortSignal | undefined): unknown {
  return signal?.reason ?? new Error('aborted');
}
