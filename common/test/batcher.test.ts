import assert from 'node:assert/strict';
import { AsyncLocalStorage } from 'node:async_hooks';
import { Batcher } from '../src/core/batcher.js';
import { deferred, waitFor } from './support/async.js';

describe('Batcher', () => {
  it('applies what arrives together as one batch, and what arrives while it applies as the next', async () => {
    const batches: number[][] = [];
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const batcher = new Batcher<number>({
      many: async (items) => {
        batches.push([...items]);
        if (batches.length === 1) await gate;
      },
      one: () => Promise.reject(new Error('not expected')),
    });
    const first = [1, 2, 3].map((n) => batcher.receive(n));
    await new Promise((resolve) => setImmediate(resolve));
    const second = [4, 5].map((n) => batcher.receive(n));
    release();
    await Promise.all([...first, ...second]);
    assert.deepEqual(batches, [[1, 2, 3], [4, 5]]);
  });

  it('applies each item alone when its batch fails, and fails only the items that fail then', async () => {
    const alone: number[] = [];
    const failures: number[] = [];
    const batcher = new Batcher<number>({
      many: () => Promise.reject(new Error('batch')),
      one: async (n) => {
        alone.push(n);
        if (n === 2) throw new Error('bad item');
      },
      onBatchFailure: (_err, size) => failures.push(size),
    });
    const outcomes = await batcher.apply([1, 2, 3]);
    assert.deepEqual(outcomes.map((o) => o.status), ['fulfilled', 'rejected', 'fulfilled']);
    assert.deepEqual(alone.sort(), [1, 2, 3]);
    assert.deepEqual(failures, [3]);
  });

  it("applies a failed batch's items of one key in the order received, each after the one before it, other keys meanwhile", async () => {
    const log: string[] = [];
    const slow = deferred();
    const batcher = new Batcher<{ key: string; n: number }>({
      many: () => Promise.reject(new Error('batch')),
      one: async ({ key, n }) => {
        log.push(`start ${key}${n}`);
        // The job's first event is slow: its second must still wait for it.
        if (key === 'a' && n === 1) await slow.promise;
        log.push(`end ${key}${n}`);
      },
      key: (item) => item.key,
    });
    const applied = batcher.apply([{ key: 'a', n: 1 }, { key: 'b', n: 1 }, { key: 'a', n: 2 }]);
    await waitFor(() => log.includes('end b1'), 'the other key applied while the first key waits');
    assert.ok(!log.includes('start a2'), `a2 started before a1 ended: ${log.join(', ')}`);
    slow.resolve();
    await applied;
    assert.deepEqual(log.filter((l) => / a\d$/.test(l)), ['start a1', 'end a1', 'start a2', 'end a2']);
  });

  it('settles each item by the outcome the batch returns for it', async () => {
    const batcher = new Batcher<string>({
      many: async (items) => Promise.allSettled(items.map((s) => (s === 'stale' ? Promise.reject(new Error(s)) : Promise.resolve()))),
      one: () => Promise.reject(new Error('not expected')),
    });
    const outcomes = await batcher.apply(['ok', 'stale', 'ok']);
    assert.deepEqual(outcomes.map((o) => o.status), ['fulfilled', 'rejected', 'fulfilled']);
  });

  it("applies a batch outside any one item's async context, and each item's own work inside it", async () => {
    const als = new AsyncLocalStorage<string>();
    const seen: (string | undefined)[] = [];
    let fail = false;
    const batcher = new Batcher<string>({
      many: async (items, within) => {
        seen.push(als.getStore());
        if (fail) throw new Error('batch');
        items.forEach((_, i) => seen.push(within(i, () => als.getStore())));
      },
      one: async () => void seen.push(als.getStore()),
    });
    await Promise.all(['a', 'b'].map((id) => als.run(id, () => batcher.receive(id))));
    assert.deepEqual(seen, [undefined, 'a', 'b']);
    seen.length = 0;
    fail = true;
    await Promise.all(['c', 'd'].map((id) => als.run(id, () => batcher.receive(id))));
    assert.deepEqual(seen, [undefined, 'c', 'd']);
  });
});
