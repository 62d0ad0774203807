import assert from 'node:assert/strict';
import { applyJobOutcomes, ROLLUP_BUCKET_COLUMNS, type RollupTotals, type Store } from '@orloj/common/store';
import { insertUser, jobFixture, workflowFixture } from './support/fixtures.js';
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

  it('adds a batch as its runs one by one: several runs of a workflow in one hour, across an hour’s end and out of order, row by row in a transaction and set-wise outside one', async () => {
    const { store } = db();
    const userId = await insertUser(store);
    const [oneByOne, inTransaction, setWise] = [workflowFixture(userId), workflowFixture(userId), workflowFixture(userId)];
    for (const w of [oneByOne, inTransaction, setWise]) await store.workflows.insert(w);
    const run = (hour: number, failed = false, responseMs: number | null = 20) => ({ at: T0 + hour * HOUR + 1_000, failed, responseMs });
    // Stored before the batch: hours 0 and 5.
    const before = [run(0), run(5)];
    // Three runs in hour 5 (the latest row's hour), one in 6 and 7 (new rows), one in 3 (before the latest row: out of order, no row yet), one more in 0 (out of order, a row).
    const batch = [run(5, true, 3_000), run(6), run(3, true), run(5, false, null), run(7, false, 400), run(0), run(5)];
    const samples = (w: typeof oneByOne, runs: typeof batch) => runs.map((r) => ({ workflowId: w.id, userId, ...r }));
    for (const w of [oneByOne, inTransaction, setWise]) for (const s of samples(w, before)) await store.rollups.add(s);
    for (const s of samples(oneByOne, batch)) await store.rollups.add(s);
    await store.transaction((tx) => tx.rollups.addMany(samples(inTransaction, batch)));
    await store.rollups.addMany(samples(setWise, batch));

    const rowsOf = async (w: typeof oneByOne) =>
      (await store.db.selectFrom('workflow_rollups').select(['hour_at', 'runs', 'failures', ...ROLLUP_BUCKET_COLUMNS]).where('workflow_id', '=', w.id).orderBy('hour_at').execute()).map((r) => [
        (Number(r.hour_at) - T0) / HOUR,
        r.runs,
        r.failures,
        ROLLUP_BUCKET_COLUMNS.map((c) => r[c]),
      ]);
    const expected = await rowsOf(oneByOne);
    assert.deepEqual(
      expected.map(([hour, runs, failures]) => [hour, runs, failures]),
      [[0, 2, 0], [3, 3, 1], [5, 7, 2], [6, 8, 2], [7, 9, 2]],
      'running totals: every row counts the runs of its hour and before',
    );
    assert.deepEqual(await rowsOf(inTransaction), expected, 'in a transaction (compiled statements on SQLite)');
    assert.deepEqual(await rowsOf(setWise), expected, 'set-wise');
    const totals = await store.rollups.totals(userId, T0 + 4 * HOUR, setWise.id);
    assert.deepEqual(summary(totals, [setWise.id]), [[6, 1, 5]], 'hours 4 on: 5, 5, 5, 5, 6, 7 — one without a response time');
    assert.equal(totals.get(setWise.id)!.histogram[14], 1, 'the 3 s run in the ≤ 3,000 ms bucket');
  });

  it('writes the rollups of a batch of outcomes in its transaction, the failed runs among them', async () => {
    const { store } = db();
    const userId = await insertUser(store);
    const workflows = [workflowFixture(userId), workflowFixture(userId), workflowFixture(userId)];
    for (const w of workflows) await store.workflows.insert(w);
    const at = T0 + 30 * 60_000;
    const end = (tx: Store, statuses: readonly ('COMPLETED' | 'FAILED')[], minute: number) =>
      applyJobOutcomes(tx, workflows.map((w, i) => jobFixture(w, statuses[i], { at: at + minute * 60_000 })), at + minute * 60_000 + 10);
    await store.transaction((tx) => end(tx, ['COMPLETED', 'FAILED', 'COMPLETED'], 0));
    await store.transaction((tx) => end(tx, ['COMPLETED', 'COMPLETED', 'FAILED'], 40));
    // In the hour of each workflow's latest row: added to it in place (on SQLite).
    await store.transaction((tx) => end(tx, ['FAILED', 'COMPLETED', 'COMPLETED'], 50));
    const totals = await store.rollups.totals(userId, T0);
    assert.deepEqual(summary(totals, workflows.map((w) => w.id)), [[3, 1, 3], [3, 1, 3], [3, 1, 3]]);
    assert.deepEqual(summary(await store.rollups.totals(userId, T0 + HOUR), workflows.map((w) => w.id)), [[2, 1, 2], [2, 0, 2], [2, 1, 2]]);
    const hours = await store.db.selectFrom('workflow_rollups').select('hour_at').distinct().where('workflow_id', 'in', workflows.map((w) => w.id)).execute();
    assert.deepEqual(hours.map((h) => (Number(h.hour_at) - T0) / HOUR).sort(), [0, 1], 'the second batch in the next hour');
  });
});
