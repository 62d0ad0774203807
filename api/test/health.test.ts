import assert from 'node:assert/strict';
import { LATE_AFTER_MS, RECENT_RUNS, UPTIME_WINDOW_MS, type CheckResult, type JobStatus } from '@orloj/common/domain';
import { insertJob } from '@orloj/common/test-support';
import { describeApi, key, workflowBody, type ApiHarness } from './support/harness.js';
import { schemaAt } from './support/conformance.js';
import type { TestClient } from './support/client.js';

/**
 * `include=health` on the workflow list and read, `include_terminated`, and
 * the `check` of HEARTBEAT jobs (docs/api.md, "Checks and health"), on both
 * engines, with runs written to the store as the scheduler writes them.
 */
/** Asserts the body matches the named schema of the OpenAPI document. */
function conforms(schema: string, body: unknown): void {
  const validate = schemaAt('components', 'schemas', schema);
  const valid = validate(body) as boolean;
  assert.equal(valid, true, JSON.stringify(validate.errors));
}

describeApi('workflow health', (h) => {
  const MINUTE = 60_000;

  async function create(c: TestClient, name: string): Promise<string> {
    const res = await c.post('/workflows', workflowBody({ name }), { headers: key() });
    assert.equal(res.status, 201, res.text);
    return res.json.id as string;
  }

  /** As the scheduler leaves a workflow once its build completed. */
  async function built(id: string, nextDueAt: number): Promise<void> {
    await h()
      .db.store.db.updateTable('workflows')
      .set({ build_status: 'COMPLETED', build_completed_at: nextDueAt - 5 * MINUTE, next_due_at: nextDueAt })
      .where('id', '=', id)
      .execute();
  }

  async function run(
    harness: ApiHarness,
    workflowId: string,
    status: JobStatus,
    scheduledAt: number,
    check: CheckResult | null = null,
  ): Promise<string> {
    const j = await insertJob(harness.db.store, workflowId, status, { at: scheduledAt, trigger: 'AUTOMATIC', containerId: null, updatedAt: scheduledAt, check });
    return j.id;
  }

  const ok = (ms: number): CheckResult => ({ statusCode: 200, responseTimeMs: ms, failure: null });
  const down = (ms: number): CheckResult => ({ statusCode: 500, responseTimeMs: ms, failure: 'status' });

  function byName(body: unknown): Map<string, any> {
    return new Map((body as { workflows: { name: string; health?: unknown }[] }).workflows.map((w) => [w.name, w.health]));
  }

  it('tells up, down, late, building, pending and paused apart in one list request, terminated ones included', async () => {
    const c = await h().user();
    const now = Date.now();
    const up = await create(c, 'up');
    await built(up, now + 4 * MINUTE);
    await run(h(), up, 'FAILED', now - 20 * MINUTE, down(40));
    await run(h(), up, 'COMPLETED', now - 15 * MINUTE, ok(12));
    await run(h(), up, 'CANCELED', now - 10 * MINUTE);

    const failing = await create(c, 'down');
    await built(failing, now + 4 * MINUTE);
    await run(h(), failing, 'COMPLETED', now - 15 * MINUTE, ok(9));
    await run(h(), failing, 'FAILED', now - 10 * MINUTE, { statusCode: null, responseTimeMs: 3, failure: 'connect' });
    // Down by its alert policy (N = 1), as applying the outcome leaves it (issue 26).
    await h().db.store.db.updateTable('workflows').set({ alert_down: 1 }).where('id', '=', failing).execute();

    const late = await create(c, 'late');
    await built(late, now - LATE_AFTER_MS - 5 * MINUTE);
    await run(h(), late, 'COMPLETED', now - 15 * MINUTE, ok(5));

    const waiting = await create(c, 'late-queued');
    await built(waiting, now + 3 * MINUTE);
    await run(h(), waiting, 'QUEUED', now - 3 * MINUTE);

    const running = await create(c, 'running');
    await built(running, now - 3 * MINUTE);
    const runningJob = await run(h(), running, 'RUNNING', now - 3 * MINUTE);

    await create(c, 'building');
    const fresh = await create(c, 'pending');
    await built(fresh, now + 5 * MINUTE);

    const auto = await create(c, 'auto');
    await built(auto, now + 5 * MINUTE);
    for (const ago of [30, 20, 10]) await run(h(), auto, 'FAILED', now - ago * MINUTE, down(20));
    await h()
      .db.store.db.updateTable('workflows')
      .set({ terminated_at: now - 9 * MINUTE, consecutive_job_failures_count: 3, build_status: 'CANCELED' })
      .where('id', '=', auto)
      .execute();
    const byOwner = await create(c, 'by-owner');
    assert.equal((await c.patch(`/workflows/${byOwner}`)).status, 204);

    const res = await c.get('/workflows?include=health&include_terminated=true&limit=100');
    assert.equal(res.status, 200, res.text);
    conforms('WorkflowPage', res.json);
    const health = byName(res.json);
    assert.equal(health.size, 9);

    assert.equal(health.get('up').state, 'up');
    assert.equal(health.get('up').last_run.status, 'COMPLETED', 'a CANCELED run does not decide the state');
    assert.deepEqual(health.get('up').last_run.check, { status_code: 200, response_time_ms: 12 });
    assert.deepEqual(
      health.get('up').recent_runs.map((r: { status: string }) => r.status),
      ['CANCELED', 'COMPLETED', 'FAILED'],
    );
    assert.deepEqual(health.get('up').uptime, { window_hours: 24, completed: 1, failed: 1, canceled: 1, ratio: 0.5 });
    assert.equal(health.get('up').next_run_at, new Date(now + 4 * MINUTE).toISOString());

    assert.equal(health.get('down').state, 'down');
    assert.deepEqual(health.get('down').last_run.check, { response_time_ms: 3, failure: 'connect' });
    assert.equal(health.get('late').state, 'late');
    assert.equal(health.get('late-queued').state, 'late', 'a job waiting past its slot is late too');
    assert.equal(health.get('running').state, 'pending', 'a run going on is never late');
    assert.equal(health.get('running').running.job_id, runningJob);
    assert.equal(health.get('building').state, 'building');
    assert.equal(health.get('building').next_run_at, undefined);
    assert.equal(health.get('pending').state, 'pending');
    assert.equal(health.get('pending').uptime.ratio, undefined);

    assert.equal(health.get('auto').state, 'paused');
    assert.equal(health.get('auto').auto_terminated, true);
    assert.equal(health.get('auto').next_run_at, undefined);
    assert.equal(health.get('by-owner').state, 'paused');
    assert.equal(health.get('by-owner').auto_terminated, false);

    // The default list still leaves terminated ones out, and carries no health.
    const plain = await c.get('/workflows?limit=100');
    assert.equal(plain.json.workflows.length, 7);
    assert.ok(plain.json.workflows.every((w: object) => !('health' in w)));
    const terminatedOnly = await c.get('/workflows?terminated=true&include=health');
    assert.deepEqual(
      terminatedOnly.json.workflows.map((w: { name: string }) => w.name).sort(),
      ['auto', 'by-owner'],
    );
  });

  it('keeps the strip to the latest runs and counts uptime over its window only', async () => {
    const c = await h().user();
    const now = Date.now();
    const id = await create(c, 'busy');
    await built(id, now + MINUTE);
    await run(h(), id, 'FAILED', now - UPTIME_WINDOW_MS - 10 * MINUTE, down(1));
    for (let i = RECENT_RUNS + 5; i >= 1; i--) await run(h(), id, i % 5 === 0 ? 'FAILED' : 'COMPLETED', now - i * MINUTE, ok(i));
    const res = await c.get(`/workflows/${id}?include=health`);
    assert.equal(res.status, 200, res.text);
    conforms('Workflow', res.json);
    assert.equal(res.json.generation, 0);
    const runs = res.json.health.recent_runs as { scheduled_at: string; check: { response_time_ms: number } }[];
    assert.equal(runs.length, RECENT_RUNS);
    assert.deepEqual(
      runs.map((r) => r.check.response_time_ms),
      Array.from({ length: RECENT_RUNS }, (_, i) => i + 1),
      'newest first',
    );
    assert.deepEqual(res.json.health.uptime, { window_hours: 24, completed: 20, failed: 5, canceled: 0, ratio: 0.8 });
    assert.equal(res.json.health.state, 'up');
  });

  it('reads health fresh while the plain list is still served from its cache', async () => {
    const c = await h().user();
    const now = Date.now();
    const id = await create(c, 'changing');
    await built(id, now + MINUTE);
    await run(h(), id, 'COMPLETED', now - 3 * MINUTE, ok(4));
    const first = await c.get('/workflows?include=health');
    assert.equal(byName(first.json).get('changing').state, 'up');
    await c.get('/workflows');
    await run(h(), id, 'FAILED', now - 2 * MINUTE, down(7));
    await h().db.store.db.updateTable('workflows').set({ alert_down: 1 }).where('id', '=', id).execute();
    const second = await c.get('/workflows?include=health');
    assert.equal(byName(second.json).get('changing').state, 'down');
    assert.equal(byName(second.json).get('changing').recent_runs.length, 2);
  });

  it('carries the missed runs in health, on list items too, as the single read has them', async () => {
    const c = await h().user();
    const now = Date.now();
    const missed = await create(c, 'missed');
    const steady = await create(c, 'steady');
    for (const id of [missed, steady]) await built(id, now + MINUTE);
    // As the scheduler records slots that passed while the previous run went on (recordSkippedSlots).
    await h().db.store.workflows.recordSkippedSlots([{ id: missed, skipped: 2, at: now - 3 * MINUTE }]);
    await h().db.store.workflows.recordSkippedSlots([{ id: missed, skipped: 1, at: now - MINUTE }]);
    const list = await c.get('/workflows?include=health');
    assert.equal(list.status, 200, list.text);
    conforms('WorkflowPage', list.json);
    const health = byName(list.json);
    assert.equal(health.get('missed').skipped_slots, 3);
    assert.equal(health.get('missed').last_slot_skipped_at, new Date(now - MINUTE).toISOString());
    assert.equal(health.get('steady').skipped_slots, 0);
    assert.equal('last_slot_skipped_at' in health.get('steady'), false);
    const one = await c.get(`/workflows/${missed}?include=health`);
    assert.equal(one.json.skipped_slots, 3);
    assert.equal(one.json.health.last_slot_skipped_at, one.json.last_slot_skipped_at);
    // Without health the list stays the contract's.
    const plain = (await c.get('/workflows')).json.workflows as Record<string, unknown>[];
    assert.ok(plain.every((w) => !('skipped_slots' in w) && !('health' in w)));
  });

  it('shows the check on job reads and lists, and nothing for jobs without one', async () => {
    const c = await h().user();
    const now = Date.now();
    const id = await create(c, 'jobs');
    await built(id, now + MINUTE);
    const failed = await run(h(), id, 'FAILED', now - 2 * MINUTE, { statusCode: null, responseTimeMs: 5000, failure: 'timeout' });
    const plain = await run(h(), id, 'COMPLETED', now - MINUTE);
    const one = await c.get(`/workflows/${id}/jobs/${failed}`);
    assert.equal(one.status, 200);
    assert.deepEqual(one.json.check, { response_time_ms: 5000, failure: 'timeout' });
    const list = await c.get(`/workflows/${id}/jobs`);
    conforms('JobPage', list.json);
    const checks = new Map(list.json.jobs.map((j: { id: string; check?: unknown }) => [j.id, j.check]));
    assert.deepEqual(checks.get(failed), { response_time_ms: 5000, failure: 'timeout' });
    assert.equal(checks.get(plain), undefined);
  });

  it('answers 400 naming the parameter for a bad include or a contradictory terminated filter', async () => {
    const c = await h().user();
    const id = await create(c, 'params');
    for (const [path, field] of [
      ['/workflows?include=everything', 'include'],
      ['/workflows?include=health&include=health', 'include'],
      ['/workflows?include_terminated=yes', 'include_terminated'],
      ['/workflows?include_terminated=true&terminated=false', 'include_terminated'],
      [`/workflows/${id}?include=jobs`, 'include'],
    ] as const) {
      const res = await c.get(path);
      assert.equal(res.status, 400, path);
      assert.deepEqual(
        (res.json.errors as { field: string }[]).map((e) => e.field),
        [field],
        path,
      );
    }
  });
});
