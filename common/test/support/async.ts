/**
 * Awaiting things instead of sleeping: a test waits for the event it needs,
 * and fails with a named timeout when it never comes.
 */

export interface Deferred<T> {
  readonly promise: Promise<T>;
  resolve(value: T): void;
  reject(err: unknown): void;
  readonly settled: boolean;
}

export function deferred<T = void>(): Deferred<T> {
  let resolve!: (value: T) => void;
  let reject!: (err: unknown) => void;
  let settled = false;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  promise.catch(() => {});
  return {
    promise,
    resolve: (value) => {
      settled = true;
      resolve(value);
    },
    reject: (err) => {
      settled = true;
      reject(err);
    },
    get settled() {
      return settled;
    },
  };
}

/** Rejects with `what` in the message when the promise takes longer than ms. */
export async function within<T>(promise: Promise<T>, what: string, ms = 30_000): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms); // bounds the wait: the promise settling is the event
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** For state no event announces: re-checks on every timer turn until true. */
export async function waitFor(predicate: () => boolean, what: string, ms = 30_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 1)); // poll interval: the predicate is plain state, announced by nothing
  }
}

/** Collects values pushed by handlers; next() awaits the next one in order. */
export class Inbox<T> {
  readonly all: T[] = [];
  private taken = 0;
  private readonly waiting: Array<(value: T) => void> = [];

  push = (value: T): void => {
    this.all.push(value);
    const waiter = this.waiting.shift();
    if (waiter) {
      this.taken += 1;
      waiter(value);
    }
  };

  next(what = 'the next message', ms?: number): Promise<T> {
    if (this.taken < this.all.length) return Promise.resolve(this.all[this.taken++] as T);
    let waiter!: (value: T) => void;
    const arrived = new Promise<T>((resolve) => this.waiting.push((waiter = resolve)));
    return within(arrived, what, ms).catch((err: unknown) => {
      // a value arriving later belongs to the next caller
      const i = this.waiting.indexOf(waiter);
      if (i >= 0) this.waiting.splice(i, 1);
      throw err;
    });
  }

  async take(n: number, what = `${n} messages`, ms?: number): Promise<T[]> {
    const out: T[] = [];
    for (let i = 0; i < n; i++) out.push(await this.next(what, ms));
    return out;
  }
}

export interface UntilOptions {
  /** Real milliseconds between reads (default 20). */
  everyMs?: number;
  /** A read that throws counts as "not yet" (a server still starting) instead of failing at once. */
  retryErrors?: boolean;
}

/**
 * The one polling helper of every package's tests: reads until `ok` holds, for state
 * another component writes and announces by nothing a test can await. Fails after `ms`
 * (30 s by default: generous, as three test lanes share two cores) naming `what` and the
 * last value read (or error).
 */
export async function until<T>(read: () => Promise<T>, ok: (v: T) => boolean, what: string, ms = 30_000, options: UntilOptions = {}): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    let last: unknown;
    try {
      const v = await read();
      if (ok(v)) return v;
      last = v;
    } catch (err) {
      if (!options.retryErrors) throw err;
      last = err instanceof Error ? err.message : err;
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}; last: ${String(JSON.stringify(last)).slice(0, 400)}`);
    await new Promise((r) => setTimeout(r, options.everyMs ?? 20)); // the poll interval: nothing to await
  }
}
