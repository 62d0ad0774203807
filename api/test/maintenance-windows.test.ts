import assert from 'node:assert/strict';
import { newId } from '@orloj/common/core';
import { WINDOWS_PER_USER_MAX } from '@orloj/common/domain';
import { describeApi, key, workflowBody } from './support/harness.js';
import { schemaAt } from './support/conformance.js';

/** Issue 25: maintenance windows and a workflow's snooze (docs/api.md, "Maintenance windows and snooze"). */
describeApi('maintenance windows', (h) => {
  const HOUR = 3_600_000;
  const inHours = (n: number) => new Date(Date.now() + n * HOUR).toISOString();
  async function workflow(u: Awaited<ReturnType<ReturnType<typeof h>['user']>>, name = 'Nightly backup') {
    const res = await u.post('/workflows', workflowBody({ name }), { headers: key() });
    assert.equal(res.status, 201, res.text);
    return res.json.id as string;
  }

  it('creates, shows, lists, changes and deletes one-off and recurring windows, as the document describes them', async () => {
    const u = await h().user();
    const id = await workflow(u);
    const oneOff = await u.post('/maintenance-windows', { name: 'DB upgrade', mode: 'skip', workflow_id: id, starts_at: inHours(-1), ends_at: inHours(1) });
    assert.equal(oneOff.status, 201, oneOff.text);
    assert.equal(oneOff.headers.location, `/maintenance-windows/${oneOff.json.id}`);
    assert.deepEqual([oneOff.json.active, oneOff.json.workflow_id, oneOff.json.mode], [true, id, 'skip']);
    const validate = schemaAt('components', 'schemas', 'MaintenanceWindow');
    assert.ok(validate({ ...oneOff.json }), JSON.stringify(validate.errors));

    const weekly = await u.post('/maintenance-windows', { name: 'Backups', mode: 'mute', workflow_query: 'backup', cron: '0 22 * * 6', timezone: 'Europe/Berlin', duration_minutes: 120 });
    assert.equal(weekly.status, 201, weekly.text);
    assert.ok(validate({ ...weekly.json }), JSON.stringify(validate.errors));
    assert.deepEqual([weekly.json.timezone, weekly.json.duration_minutes, weekly.json.workflow_query], ['Europe/Berlin', 120, 'backup']);
    assert.equal(Date.parse(weekly.json.next_ends_at) - Date.parse(weekly.json.next_starts_at), 120 * 60_000);

    const page = await u.get('/maintenance-windows?limit=1');
    assert.ok(schemaAt('components', 'schemas', 'MaintenanceWindowPage')({ ...page.json }));
    assert.deepEqual(page.json.windows.map((w: { id: string }) => w.id), [weekly.json.id], 'newest first');
    const rest = await u.get(`/maintenance-windows?limit=1&cursor=${page.json.cursor}`);
    assert.deepEqual([rest.json.windows.map((w: { id: string }) => w.id), rest.json.cursor], [[oneOff.json.id], '']);
    assert.deepEqual((await u.get(`/maintenance-windows/${oneOff.json.id}`)).json, { ...oneOff.json });

    // A recurring timing given replaces the one-off one; a query replaces the workflow.
    const changed = await u.patch(`/maintenance-windows/${oneOff.json.id}`, { body: { cron: '@daily', duration_minutes: 30, workflow_query: 'night' } });
    assert.equal(changed.status, 200, changed.text);
    assert.deepEqual(
      [changed.json.cron, changed.json.timezone, changed.json.starts_at, changed.json.workflow_id, changed.json.workflow_query, changed.json.name],
      ['@daily', 'UTC', undefined, undefined, 'night', 'DB upgrade'],
    );
    assert.equal((await u.delete(`/maintenance-windows/${oneOff.json.id}`)).status, 204);
    assert.equal((await u.get(`/maintenance-windows/${oneOff.json.id}`)).status, 404);
  });

  it('refuses a bad window with 400 naming the field, and writes nothing', async () => {
    const u = await h().user();
    const id = await workflow(u);
    const base = { name: 'W', mode: 'mute', workflow_id: id, starts_at: inHours(1), ends_at: inHours(2) };
    const { starts_at: _s, ends_at: _e, ...target } = base;
    for (const [body, field] of [
      [{ ...base, name: ' ' }, 'name'],
      [{ ...base, mode: 'silence' }, 'mode'],
      [{ ...base, workflow_id: undefined }, 'workflow_id'],
      [{ ...base, workflow_query: 'x' }, 'workflow_id'],
      [{ ...base, workflow_id: newId() }, 'workflow_id'],
      [{ ...base, ends_at: inHours(0) }, 'ends_at'],
      [{ ...base, ends_at: inHours(24 * 400) }, 'ends_at'],
      [{ ...base, starts_at: 'soon' }, 'starts_at'],
      [{ ...base, cron: '@daily' }, 'cron'],
      [target, 'starts_at'],
      [{ ...target, cron: '0 0 30 2 *', duration_minutes: 5 }, 'cron'],
      [{ ...target, cron: '@daily', duration_minutes: 5, timezone: 'Mars/Olympus' }, 'timezone'],
      [{ ...target, cron: '@daily' }, 'duration_minutes'],
      [{ ...target, cron: '@daily', duration_minutes: 10_081 }, 'duration_minutes'],
      [{ ...base, colour: 'red' }, 'colour'],
    ] as const) {
      const res = await u.post('/maintenance-windows', body);
      assert.equal(res.status, 400, `${JSON.stringify(body)}: ${res.text}`);
      assert.ok(res.json.errors.some((e: { field: string }) => e.field === field), `${JSON.stringify(body)}: ${res.text}`);
    }
    const created = await u.post('/maintenance-windows', base);
    const patched = await u.patch(`/maintenance-windows/${created.json.id}`, { body: { ends_at: inHours(0) } });
    assert.equal(patched.status, 400, patched.text);
    assert.equal(patched.json.errors[0].field, 'ends_at');
    assert.deepEqual((await u.get('/maintenance-windows')).json.windows.map((w: { ends_at: string }) => w.ends_at), [created.json.ends_at], 'unchanged');
  });

  it("keeps windows and snoozes to their owner: another user's are 404 and cover nothing of theirs", async () => {
    const u = await h().user();
    const id = await workflow(u);
    const w = (await u.post('/maintenance-windows', { name: 'W', mode: 'skip', workflow_id: id, starts_at: inHours(1), ends_at: inHours(2) })).json;
    const other = await h().user();
    assert.deepEqual((await other.get('/maintenance-windows')).json.windows, []);
    assert.equal((await other.get(`/maintenance-windows/${w.id}`)).status, 404);
    assert.equal((await other.patch(`/maintenance-windows/${w.id}`, { body: { name: 'mine' } })).status, 404);
    assert.equal((await other.delete(`/maintenance-windows/${w.id}`)).status, 404);
    assert.equal((await other.post('/maintenance-windows', { name: 'W', mode: 'skip', workflow_id: id, starts_at: inHours(1), ends_at: inHours(2) })).json.errors[0].field, 'workflow_id');
    assert.equal((await other.post(`/workflows/${id}/snooze`, { until: inHours(1) })).status, 404);
    assert.equal((await other.get(`/workflows/${id}/snooze`)).status, 404);
    assert.equal((await other.delete(`/workflows/${id}/snooze`)).status, 404);
    assert.equal((await u.get('/maintenance-windows/not-a-uuid')).status, 400);
  });

  it(`bounds a user's windows at ${WINDOWS_PER_USER_MAX} (409), snoozes not counted`, async () => {
    const u = await h().user();
    const id = await workflow(u);
    const body = { name: 'W', mode: 'mute', workflow_query: 'x', cron: '@daily', duration_minutes: 5 };
    await Promise.all(Array.from({ length: WINDOWS_PER_USER_MAX + 2 }, () => u.post('/maintenance-windows', body)));
    let count = 0;
    for (let cursor = ''; ; ) {
      const page = (await u.get(`/maintenance-windows?limit=100${cursor ? `&cursor=${cursor}` : ''}`)).json;
      count += page.windows.length;
      if (!(cursor = page.cursor)) break;
    }
    assert.equal(count, WINDOWS_PER_USER_MAX);
    const refused = await u.post('/maintenance-windows', body);
    assert.deepEqual([refused.status, refused.json.code], [409, 'window_limit_reached']);
    assert.equal((await u.post(`/workflows/${id}/snooze`, { until: inHours(1) })).status, 200);
  });

  it('snoozes a workflow until a time with the bounds of an incident snooze, replaces the snooze, and ends it', async () => {
    const u = await h().user();
    const id = await workflow(u);
    assert.deepEqual((await u.get(`/workflows/${id}/snooze`)).json, { workflow_id: id, snoozed: false });
    const snoozed = await u.post(`/workflows/${id}/snooze`, { until: inHours(1) });
    assert.equal(snoozed.status, 200, snoozed.text);
    assert.ok(schemaAt('components', 'schemas', 'WorkflowSnooze')({ ...snoozed.json }));
    const later = inHours(20);
    assert.deepEqual((await u.post(`/workflows/${id}/snooze`, { until: later })).json, { workflow_id: id, snoozed: true, snoozed_until: later });
    assert.deepEqual((await u.get(`/workflows/${id}/snooze`)).json, { workflow_id: id, snoozed: true, snoozed_until: later });
    assert.deepEqual((await u.get('/maintenance-windows')).json.windows, [], 'a snooze is not a listed window');
    for (const until of ['tomorrow', inHours(-1), inHours(31 * 24)]) {
      const res = await u.post(`/workflows/${id}/snooze`, { until });
      assert.deepEqual([res.status, res.json.errors[0].field], [400, 'until'], until);
    }
    assert.equal((await u.delete(`/workflows/${id}/snooze`)).status, 204);
    assert.equal((await u.delete(`/workflows/${id}/snooze`)).status, 204, 'harmless again');
    assert.deepEqual((await u.get(`/workflows/${id}/snooze`)).json, { workflow_id: id, snoozed: false });
  });
});
