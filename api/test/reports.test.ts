import assert from 'node:assert/strict';
import { reasons } from '@orloj/common/domain';
import { endJob } from '@orloj/notifier/test-support';
import { describeApi, key, workflowBody } from './support/harness.js';
import { schemaAt } from './support/conformance.js';

/** Issue 26: reliability reports from the hourly rollups (docs/api.md, "Reliability reports"). */
describeApi('reliability reports', (h) => {
  it('reports uptime, response-time percentiles, incidents and downtime per workflow and in total, and keeps them when raw jobs go', async () => {
    const u = await h().user();
    const make = async (name: string) => (await u.post('/workflows', workflowBody({ name, max_consecutive_job_failures_allowed: 100 }), { headers: key() })).json.id as string;
    const [steady, flaky] = [await make('steady'), await make('flaky')];
    const end = async (id: string, status: 'COMPLETED' | 'FAILED', ranMs: number) =>
      endJob(h().db.store, (await h().db.store.workflows.findById(id))!, { status, ranMs, reason: status === 'FAILED' ? reasons.connectionRefused() : undefined });
    for (const ms of [20, 20, 20, 400]) await end(steady, 'COMPLETED', ms);
    for (const [status, ms] of [['COMPLETED', 20], ['FAILED', 3_000], ['FAILED', 3_000], ['COMPLETED', 20]] as const) await end(flaky, status, ms);

    const res = await u.get('/reports/reliability?period=7d');
    assert.equal(res.status, 200, res.text);
    const validate = schemaAt('components', 'schemas', 'ReliabilityReport');
    assert.ok(validate(res.json), JSON.stringify(validate.errors));
    const r = res.json as { total: Record<string, any>; workflows: Record<string, any>[] };
    assert.deepEqual(r.workflows.map((w) => w.workflow_name), ['flaky', 'steady'], 'least up first');
    const [f, s] = r.workflows as [Record<string, any>, Record<string, any>];
    assert.deepEqual([s.runs, s.failures, s.uptime_percent, s.incidents, s.downtime_ms], [4, 0, 100, 0, 0]);
    assert.deepEqual(s.response_ms, { p50: 25, p95: 500, p99: 500 });
    assert.deepEqual([f.runs, f.failures, f.uptime_percent, f.incidents], [4, 2, 50, 1]);
    assert.ok(f.downtime_ms >= 0);
    assert.deepEqual(f.response_ms, { p50: 25, p95: 3_000, p99: 3_000 });
    assert.deepEqual([r.total.runs, r.total.failures, r.total.uptime_percent, r.total.incidents], [8, 2, 75, 1]);

    const one = await u.get(`/reports/reliability?workflow_id=${steady}`);
    assert.deepEqual([one.json.period, one.json.workflows.length, one.json.total.runs], ['24h', 1, 4]);

    // Raw jobs go (retention): the rollups stay.
    await h().db.store.db.deleteFrom('jobs').where('workflow_id', 'in', [steady, flaky]).execute();
    assert.equal((await u.get('/reports/reliability?period=7d')).json.total.runs, 8);

    for (const q of ['period=1y', 'workflow_id=nope', 'period=24h&period=7d']) {
      const bad = await u.get(`/reports/reliability?${q}`);
      assert.equal(bad.status, 400, q);
      assert.equal(bad.json.errors[0].field, q.split('=')[0]);
    }
    const other = await h().user();
    assert.equal((await other.get(`/reports/reliability?workflow_id=${steady}`)).status, 404);
    assert.deepEqual((await other.get('/reports/reliability')).json.workflows, []);
  });
});
