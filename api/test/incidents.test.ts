import assert from 'node:assert/strict';
import { newId } from '@orloj/common/core';
import { reasons } from '@orloj/common/domain';
import { endJob } from '@orloj/notifier/test-support';
import { describeApi, key, workflowBody } from './support/harness.js';
import { schemaAt } from './support/conformance.js';

/** Issue 26: the alert policy on the Workflow, and the incidents endpoints (docs/api.md, "Incidents"). */
describeApi('incidents', (h) => {
  async function flapping(u: Awaited<ReturnType<ReturnType<typeof h>['user']>>, policy: Record<string, number> = {}) {
    const res = await u.post('/workflows', workflowBody({ max_consecutive_job_failures_allowed: 100, ...policy }), { headers: key() });
    assert.equal(res.status, 201, res.text);
    return res.json.id as string;
  }
  const end = async (workflowId: string, status: 'COMPLETED' | 'FAILED') =>
    endJob(h().db.store, (await h().db.store.workflows.findById(workflowId))!, { status, ranMs: 5, reason: status === 'FAILED' ? reasons.connectionRefused() : undefined });

  it('takes the alert policy on create and update, keeps it when a PUT leaves it out, and refuses a bad one naming the field', async () => {
    const u = await h().user();
    const id = await flapping(u, { alert_after_failures: 3, recover_after_successes: 2 });
    const w = (await u.get(`/workflows/${id}`)).json;
    assert.deepEqual([w.alert_after_failures, w.recover_after_successes, w.build_error], [3, 2, null]);
    const validate = schemaAt('components', 'schemas', 'Workflow');
    assert.ok(validate(w), JSON.stringify(validate.errors));
    const body = workflowBody({ max_consecutive_job_failures_allowed: 100 });
    const { kind: _kind, ...put } = body as Record<string, unknown>;
    assert.equal((await u.put(`/workflows/${id}`, { ...put, recover_after_successes: 4 }, { headers: key() })).status, 204);
    const updated = (await u.get(`/workflows/${id}`)).json;
    assert.deepEqual([updated.alert_after_failures, updated.recover_after_successes], [3, 4]);
    const plain = (await u.get(`/workflows/${await flapping(u)}`)).json;
    assert.deepEqual([plain.alert_after_failures, plain.recover_after_successes], [1, 1]);
    for (const bad of [{ alert_after_failures: 0 }, { recover_after_successes: 101 }, { alert_after_failures: 'x' }]) {
      const res = await u.post('/workflows', workflowBody(bad), { headers: key() });
      assert.equal(res.status, 400, res.text);
      assert.equal(res.json.errors[0].field, Object.keys(bad)[0]);
    }
  });

  it('lists, pages, filters, acknowledges and snoozes incidents, and keeps them to their owner', async () => {
    const u = await h().user();
    const id = await flapping(u, { alert_after_failures: 2 });
    // F F (down) C (up) F F (down again)
    for (const s of ['FAILED', 'FAILED', 'COMPLETED', 'FAILED', 'FAILED'] as const) await end(id, s);
    const all = await u.get('/incidents');
    assert.equal(all.status, 200, all.text);
    const validate = schemaAt('components', 'schemas', 'IncidentPage');
    const listed = all.json as { incidents: Record<string, any>[] };
    assert.ok(validate(listed), JSON.stringify(validate.errors));
    assert.deepEqual(listed.incidents.map((i) => i.status), ['open', 'closed']);
    const [open, closed] = listed.incidents as [Record<string, any>, Record<string, any>];
    assert.equal(open.failed_runs, 2);
    assert.equal(open.first_failure.reason_message, reasons.connectionRefused().message);
    assert.equal(closed.resolution, 'recovered');
    assert.ok(closed.duration_ms >= 0);
    assert.deepEqual((await u.get('/incidents?status=closed')).json.incidents.map((i: { id: string }) => i.id), [closed.id]);
    assert.deepEqual((await u.get(`/workflows/${id}/incidents?status=open`)).json.incidents.map((i: { id: string }) => i.id), [open.id]);
    assert.deepEqual((await u.get(`/incidents?workflow_id=${id}`)).json.incidents.length, 2);
    const first = await u.get('/incidents?limit=1');
    assert.notEqual(first.json.cursor, '');
    const second = await u.get(`/incidents?limit=1&cursor=${first.json.cursor}`);
    assert.deepEqual(second.json.incidents.map((i: { id: string }) => i.id), [closed.id]);
    assert.equal(second.json.cursor, '');

    const acked = await u.post(`/incidents/${open.id}/acknowledge`);
    assert.equal(acked.status, 200, acked.text);
    assert.equal(acked.json.acknowledged_by, u.email);
    assert.ok(acked.json.acknowledged_at);
    const until = new Date(Date.now() + 3_600_000).toISOString();
    const snoozed = await u.post(`/incidents/${open.id}/snooze`, { until });
    assert.equal(snoozed.status, 200, snoozed.text);
    assert.deepEqual([snoozed.json.snoozed, Date.parse(snoozed.json.snoozed_until)], [true, Date.parse(until)]);

    for (const [body, field] of [
      [{}, 'until'],
      [{ until: 'tomorrow' }, 'until'],
      [{ until: new Date(Date.now() - 1000).toISOString() }, 'until'],
      [{ until: new Date(Date.now() + 31 * 86_400_000).toISOString() }, 'until'],
      [{ until, extra: 1 }, 'extra'],
    ] as const) {
      const res = await u.post(`/incidents/${open.id}/snooze`, body);
      assert.equal(res.status, 400, `${JSON.stringify(body)}: ${res.text}`);
      assert.equal(res.json.errors[0].field, field);
    }
    for (const q of ['status=maybe', 'workflow_id=nope', 'limit=0', 'cursor=%%%']) assert.equal((await u.get(`/incidents?${q}`)).status, 400, q);
    assert.equal((await u.post('/incidents/not-a-uuid/acknowledge')).status, 400);

    const other = await h().user();
    assert.deepEqual((await other.get('/incidents')).json.incidents, []);
    assert.equal((await other.post(`/incidents/${open.id}/acknowledge`)).status, 404);
    assert.equal((await other.post(`/incidents/${open.id}/snooze`, { until })).status, 404);
    assert.equal((await other.get(`/workflows/${id}/incidents`)).status, 404);
    assert.equal((await u.post(`/incidents/${newId()}/acknowledge`)).status, 404);
  });
});
