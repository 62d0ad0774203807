import assert from 'node:assert/strict';
import { newJob, type JobStatus } from '@orloj/common/domain';
import { applyJobOutcome } from '@orloj/common/store';
import { describeApi, key, workflowBody, type ApiHarness } from './support/harness.js';
import { schemaAt } from './support/conformance.js';
import type { TestClient } from './support/client.js';

/**
 * Attention at any size (issue 26; docs/api.md, "Attention"): `sort=attention`,
 * the `attention` filter and `GET /workflow-summary`, computed by the store over
 * all of a user's workflows from the generated column of migration 0019, on both
 * engines; and the state following the alert policy, as the bell does.
 */
function conforms(schema: string, body: unknown): void {
  const validate = schemaAt('components', 'schemas', schema);
  assert.equal(validate(body) as boolean, true, JSON.stringify(validate.errors));
}

describeApi('workflow attention', (h) => {
  const MINUTE = 60_000;

  async function create(c: TestClient, name: string, over: Record<string, unknown> = {}): Promise<string> {
    const res = await c.post('/workflows', workflowBody({ name, ...over }), { headers: key() });
    assert.equal(res.status, 201, res.text);
    return res.json.id as string;
  }

  const set = (id: string, values: Record<string, unknown>) => h().db.store.db.updateTable('workflows').set(values).where('id', '=', id).execute();

  /** A run of the workflow ended as the runners' results end them: the job written, then its outcome applied. */
  async function ended(harness: ApiHarness, id: string, status: JobStatus, at: number): Promise<void> {
    const store = harness.db.store;
    const w = (await store.workflows.findById(id))!;
    const job = { ...newJob(w, 'AUTOMATIC', at, at), status, attempts: 1, queuedAt: at, startedAt: at + 1, completedAt: at + 50 };
    await store.jobs.insert(job);
    await store.transaction((tx) => applyJobOutcome(tx, job, at + 50));
  }

  const names = (body: { workflows: { name: string }[] }) => body.workflows.map((w) => w.name);

  it('lists down, degraded, building, healthy, paused, then terminated, over pages whose cursor keeps the order', async () => {
    const c = await h().user();
    const ids: Record<string, string> = {};
    for (const name of ['healthy-old', 'down-build', 'degraded', 'building', 'down-policy', 'healthy-new', 'resting', 'gone']) ids[name] = await create(c, name);
    for (const name of ['healthy-old', 'degraded', 'down-policy', 'healthy-new', 'resting', 'gone']) await set(ids[name]!, { build_status: 'COMPLETED' });
    await set(ids['down-build']!, { build_status: 'FAILED' });
    await set(ids['degraded']!, { consecutive_job_failures_count: 1 });
    await set(ids['down-policy']!, { alert_down: 1 });
    // Paused by its owner after a failure: paused, not degraded.
    await set(ids['resting']!, { consecutive_job_failures_count: 1 });
    assert.equal((await c.post(`/workflows/${ids['resting']}/pause`)).status, 204);
    assert.equal((await c.patch(`/workflows/${ids['gone']}`)).status, 204);
    ids['stopped'] = await create(c, 'stopped');
    await set(ids['stopped']!, { build_status: 'COMPLETED', terminated_at: Date.now(), consecutive_job_failures_count: 3 });

    const all = await c.get('/workflows?sort=attention&include_terminated=true&limit=100');
    assert.equal(all.status, 200, all.text);
    conforms('WorkflowPage', all.json);
    const order = ['stopped', 'down-policy', 'down-build', 'degraded', 'building', 'healthy-new', 'healthy-old', 'resting', 'gone'];
    assert.deepEqual(names(all.json), order, 'by attention, newest first within a state');
    assert.deepEqual(
      all.json.workflows.map((w: { attention: string }) => w.attention),
      ['down', 'down', 'down', 'degraded', 'building', 'healthy', 'healthy', 'paused', 'terminated'],
    );

    const paged: string[] = [];
    let cursor = '';
    do {
      const page = await c.get(`/workflows?sort=attention&include_terminated=true&limit=2${cursor ? `&cursor=${cursor}` : ''}`);
      assert.equal(page.status, 200, page.text);
      paged.push(...names(page.json));
      cursor = page.json.cursor as string;
    } while (cursor);
    assert.deepEqual(paged, order, 'pages of 2 add up to the same order, each once');

    const second = await c.get('/workflows?sort=attention&limit=2');
    const foreign = await c.get(`/workflows?cursor=${second.json.cursor}`);
    assert.equal(foreign.status, 400, 'a cursor of one order is refused by the other');
    assert.equal(foreign.json.errors[0].field, 'cursor');

    const down = await c.get('/workflows?attention=down&include=health');
    assert.deepEqual(names(down.json).sort(), ['down-build', 'down-policy'], 'active ones only, by default');
    assert.deepEqual(down.json.workflows.map((w: { health: { state: string } }) => w.health.state), ['down', 'down']);
    assert.equal((await c.get('/workflows?attention=down&include_terminated=true')).json.workflows[0].name, 'stopped', 'terminated by the failure limit: down');

    const summary = await c.get('/workflow-summary');
    assert.equal(summary.status, 200, summary.text);
    conforms('AttentionSummary', summary.json);
    assert.deepEqual(summary.json, { attention: { down: 3, degraded: 1, building: 1, healthy: 2, paused: 1, terminated: 1 }, total: 9 });

    const paused = await c.get('/workflows?attention=paused&include=health');
    assert.deepEqual(names(paused.json), ['resting'], 'every paused one, from the server');
    assert.equal(paused.json.workflows[0].health.state, 'paused');
    assert.equal((await c.post(`/workflows/${ids['resting']}/resume`)).status, 204);
    assert.deepEqual((await c.get('/workflow-summary')).json.attention, { down: 3, degraded: 2, building: 1, healthy: 2, paused: 0, terminated: 1 }, 'resumed: by its runs again');

    const other = await h().user();
    assert.deepEqual((await other.get('/workflow-summary')).json.total, 0, 'only the user\'s own');

    for (const bad of ['sort=worst', 'attention=late']) {
      const res = await c.get(`/workflows?${bad}`);
      assert.equal(res.status, 400, bad);
      assert.equal(res.json.errors[0].field, bad.split('=')[0]);
    }
  });

  it('follows the alert policy as the bell does: degraded after one failure of two, down after two, up after the recovery', async () => {
    const c = await h().user();
    const now = Date.now();
    const id = await create(c, 'flaky', { alert_after_failures: 2, recover_after_successes: 2 });
    await create(c, 'steady');
    await set(id, { build_status: 'COMPLETED', build_completed_at: now - 10 * MINUTE, next_due_at: now + MINUTE });
    const first = async () => {
      const res = await c.get('/workflows?sort=attention&include=health&limit=1');
      assert.equal(res.status, 200, res.text);
      return res.json.workflows[0] as { name: string; attention: string; health: { state: string } };
    };

    // The plain (cached) page is read first each time: it must follow too.
    await c.get('/workflows?sort=attention');
    await ended(h(), id, 'FAILED', now - 5 * MINUTE);
    assert.deepEqual([(await first()).name, (await first()).attention, (await first()).health.state], ['flaky', 'degraded', 'degraded']);
    assert.equal((await c.get('/workflows?sort=attention')).json.workflows[0].attention, 'degraded');

    await ended(h(), id, 'FAILED', now - 4 * MINUTE);
    assert.deepEqual([(await first()).attention, (await first()).health.state], ['down', 'down']);
    assert.equal((await c.get('/workflow-summary')).json.attention.down, 1);
    const incidents = await c.get('/incidents');
    assert.equal(incidents.status, 200, incidents.text);

    await ended(h(), id, 'COMPLETED', now - 3 * MINUTE);
    assert.deepEqual([(await first()).attention, (await first()).health.state], ['down', 'down'], 'still down: one success of two');
    assert.equal((await c.get('/workflows?sort=attention')).json.workflows[0].attention, 'down');
    await ended(h(), id, 'COMPLETED', now - 2 * MINUTE);
    const plain = await c.get('/workflows?sort=attention');
    assert.deepEqual(
      plain.json.workflows.map((w: { name: string; attention: string }) => [w.name, w.attention]),
      [
        ['steady', 'building'],
        ['flaky', 'healthy'],
      ],
      'recovered: the cached page moved with alert_down',
    );
    assert.deepEqual((await c.get('/workflow-summary')).json.attention, { down: 0, degraded: 0, building: 1, healthy: 1, paused: 0, terminated: 0 });
  });
});
