import assert from 'node:assert/strict';
import type { RollupTotals } from '@orloj/common/store';
import { insertUser, workflowFixture } from './support/fixtures.js';
import { describeEachEngine } from './support/stores.js';

const HOUR = 3_600_000;
const T0 = Date.UTC(2026, 0, 1);

/** Runs and failures of each workflow, in the order given; histograms as their totals. */
const summary = (totals: Map<string, RollupTotals>, ids: readonly string[]) =>
  ids.map((id) => {
    const t = totals.get(id);
    return t ? [t.runs, t.failures, t.histogram.reduce((a, b) => a + b, 0)] : null;
  });

describeEachEngine('rollups repo (running totals)', (db) => {
  it("answers any period's runs from a workflow's latest row and its latest before the period, runs out of order included", async () => {
    const { store } = db();
    const userId = await insertUser(store);
    const [a, b, other] = [workflowFixture(userId), workflowFixture(userId), workflowFixture(await insertUser(store))];
    for (const w of [a, b, other]) await store.workflows.insert(w);
    const add = (w: typeof a, hour: number, failed = false, responseMs: number | null = 20) =>
      store.rollups.add({ workflowId: w.id, userId: w.userId, at: T0 + hour * HOUR + 1_000, failed, responseMs });
    await add(a, 0);
    await add(a, 0, true, 3_000);
    await add(a, 5);
    await add(a, 9, false, null);
    // a run that ended in hour 3, written after hour 9's: hours 3 to 9 count it
    await add(a, 3, true);
    // and one in hour 5, which has a row already
    await add(a, 5);
    await add(b, 9);
    await add(other, 9);

    const at = (hour: number) => store.rollups.totals(userId, T0 + hour * HOUR + 123);
    assert.deepEqual(summary(await at(0), [a.id, b.id, other.id]), [[6, 2, 5], [1, 0, 1], null], 'everything, only the user’s');
    assert.deepEqual(summary(await at(3), [a.id, b.id]), [[4, 1, 3], [1, 0, 1]]);
    assert.deepEqual(summary(await at(4), [a.id, b.id]), [[3, 0, 2], [1, 0, 1]]);
    assert.deepEqual(summary(await at(6), [a.id, b.id]), [[1, 0, 0], [1, 0, 1]]);
    assert.deepEqual(summary(await at(10), [a.id, b.id]), [null, null], 'no runs since');
    assert.deepEqual(summary(await store.rollups.totals(userId, T0 + 4 * HOUR, b.id), [a.id, b.id]), [null, [1, 0, 1]], 'one workflow');
    const first = (await at(0)).get(a.id)!;
    assert.equal(first.histogram[2], 4, 'four runs of 20 ms in the ≤ 25 ms bucket');
  });
});
