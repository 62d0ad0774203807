import { AsyncResource } from 'node:async_hooks';

/**
 * Applies messages that wait at the same moment as one batch: a consumer's
 * handler hands each message in (`receive`) and is answered once its batch is
 * applied. While one batch is being applied the next one gathers (up to the
 * consumer's prefetch, the most the bus hands out unacknowledged), so one
 * transaction serves many messages under load and a lone message goes at
 * once. When a batch fails as a whole, nothing of it was applied (one
 * transaction) and each of its messages is applied on its own, so one bad
 * message costs the others nothing (those of one `key` in the order received).
 *
 * Async context: a batch is applied outside the context of any one item
 * (its log lines carry no single message's request id); `within(i, fn)` and
 * `one` run in the context the item was received in.
 */
export interface BatcherOptions<T> {
  /**
   * Applies the batch (all or nothing). May return an outcome per item, in
   * order, for work done after the batch committed (an item rejected there
   * fails alone); nothing means every item succeeded.
   */
  many(items: readonly T[], within: Within): Promise<readonly PromiseSettledResult<unknown>[] | void>;
  /** Applies one item on its own: after `many` failed for its batch. */
  one(item: T): Promise<void>;
  /**
   * Items of one key (a job's events) are applied on their own one after
   * another, in the order received; items of different keys at once. No key:
   * every item of a failed batch at once.
   */
  key?(item: T): string;
  /** Told when a batch failed and its items go one by one. */
  onBatchFailure?(err: unknown, size: number): void;
}

/** Runs `fn` in the async context item `index` was received in. */
export type Within = <R>(index: number, fn: () => R) => R;

type InContext = <R>(fn: () => R) => R;

// An AsyncResource of its own rather than AsyncResource.bind(), which also
// defines a deprecated property (two deprecate() wrappers) on every bound
// function: that alone was 3 % of the embedded process's CPU, once per message.
const inContext = (): InContext => {
  const resource = new AsyncResource('orloj.batcher');
  return <R>(fn: () => R): R => resource.runInAsyncScope(fn);
};

interface Waiting<T> {
  item: T;
  context: InContext;
  resolve: () => void;
  reject: (err: unknown) => void;
}

export class Batcher<T> {
  private waiting: Waiting<T>[] = [];
  private flushing = false;
  /** The context the batcher was made in (a role's start, outside any request): batches run there. */
  private readonly detached: InContext = inContext();

  constructor(private readonly options: BatcherOptions<T>) {}

  /** Resolves once the item is applied, with its batch or on its own. */
  receive(item: T): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.waiting.push({ item, context: inContext(), resolve, reject });
      if (!this.flushing) this.detached(() => void this.flush());
    });
  }

  /** Applies these items as one batch now, as the batcher would (tests choose a batch this way). */
  async apply(items: readonly T[]): Promise<PromiseSettledResult<void>[]> {
    const batch: Waiting<T>[] = [];
    const outcomes = items.map((item) => new Promise<void>((resolve, reject) => batch.push({ item, context: inContext(), resolve, reject })));
    await this.applyBatch(batch);
    return Promise.allSettled(outcomes);
  }

  private async flush(): Promise<void> {
    this.flushing = true;
    try {
      // Let the deliveries of this turn of the event loop join the first batch.
      await new Promise((resolve) => setImmediate(resolve));
      while (this.waiting.length > 0) {
        const batch = this.waiting;
        this.waiting = [];
        await this.applyBatch(batch);
      }
    } finally {
      // In the same step as the last look at `waiting`: an item that arrives
      // from here on starts the next flush instead of waiting for one.
      this.flushing = false;
    }
  }

  /** Never throws: each item of the batch is settled. */
  private async applyBatch(batch: readonly Waiting<T>[]): Promise<void> {
    if (batch.length === 0) return;
    let outcomes: readonly PromiseSettledResult<unknown>[] | void;
    try {
      outcomes = await this.options.many(
        batch.map((w) => w.item),
        (index, fn) => batch[index]!.context(fn),
      );
    } catch (err) {
      this.options.onBatchFailure?.(err, batch.length);
      await this.applyEach(batch);
      return;
    }
    batch.forEach((w, i) => {
      const outcome = outcomes?.[i];
      if (outcome?.status === 'rejected') w.reject(outcome.reason);
      else w.resolve();
    });
  }

  /** Each item on its own: those of one key in turn, the keys at once. Never throws. */
  private async applyEach(batch: readonly Waiting<T>[]): Promise<void> {
    const { key } = this.options;
    const last = new Map<string, Promise<void>>();
    await Promise.all(
      batch.map((w) => {
        const apply = (): Promise<void> => w.context(() => this.options.one(w.item)).then(w.resolve, w.reject);
        if (!key) return apply();
        const k = key(w.item);
        const applied = (last.get(k) ?? Promise.resolve()).then(apply);
        last.set(k, applied);
        return applied;
      }),
    );
  }
}
