import assert from 'node:assert/strict';
import { newId } from '@orloj/common/core';
import { silentLogger } from '@orloj/common/logging';
import { MemoryBus } from '@orloj/common/bus';
import type { NotificationKind } from '@orloj/common/store';
import { describeApi } from './support/harness.js';
import { userIdOf } from './support/notifications.js';
import { heartbeatWorkflow } from './support/logs.js';
import { schemaAt } from './support/conformance.js';
import { generateKeys } from '@orloj/common/test-support';
import { drained, endJob, notifierOn } from '@orloj/notifier/test-support';

/** `GET /notifications?kind=…` and `?state_change=…`: alerts and state changes apart from routine notifications (docs/api.md, "Notifications"). */
describeApi('notification kind filter', (h) => {
  it('lists only the kinds asked for, newest first, in pages, unread ones by default and read ones with include_read', async () => {
    const u = await h().user();
    const userId = await userIdOf(h().db.store, u);
    const workflowId = await heartbeatWorkflow(u);
    const kinds: NotificationKind[] = ['WEB_SUCCESS', 'WEB_ERROR', 'WEB_SUCCESS', 'WEB_INFO', 'WEB_ALERT', 'WEB_SUCCESS', 'WEB_ERROR'];
    const ids: string[] = [];
    const t0 = Date.UTC(2030, 0, 1);
    for (const [i, kind] of kinds.entries()) {
      const id = newId();
      await h().db.store.notifications.insert({
        id,
        userId,
        workflowId,
        dedupeKey: `${userId}:filter:${id}`,
        kind,
        payload: JSON.stringify({ title: `${kind} ${i}` }),
        readAt: null,
        createdAt: t0 + i * 1000,
        updatedAt: t0 + i * 1000,
      });
      ids.push(id);
    }
    const alerts = [ids[6], ids[4], ids[1]];

    const res = await u.get('/notifications?kind=WEB_ALERT,WEB_ERROR');
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.json.notifications.map((n: { id: string }) => n.id), alerts);

    const seen: string[] = [];
    let cursor = '';
    do {
      const page = await u.get(`/notifications?kind=WEB_ERROR,WEB_ALERT&limit=1${cursor ? `&cursor=${cursor}` : ''}`);
      seen.push(...page.json.notifications.map((n: { id: string }) => n.id));
      cursor = page.json.cursor;
    } while (cursor);
    assert.deepEqual(seen, alerts);

    assert.equal((await u.put('/notifications', { ids: [ids[4]] })).status, 204);
    for (const q of ['', '&unread=true']) {
      const unread = await u.get(`/notifications?kind=WEB_ALERT,WEB_ERROR${q}`);
      assert.deepEqual(unread.json.notifications.map((n: { id: string }) => n.id), [ids[6], ids[1]], `unread only${q}`);
    }
    const history = await u.get('/notifications?kind=WEB_ALERT,WEB_ERROR&include_read=true');
    assert.deepEqual(history.json.notifications.map((n: { id: string }) => n.id), alerts, 'with include_read=true, the read one too');
    assert.equal((await u.get('/notifications?kind=WEB_SUCCESS')).json.notifications.length, 3);
    assert.equal((await u.get('/notifications')).json.notifications.length, 6, 'without kind: every kind (unread)');
    assert.equal((await u.get('/notifications?include_read=true')).json.notifications.length, 7);
  });

  it('lists only state changes with state_change=true, and only the rest with false, in pages, with unread, include_read and kind', async () => {
    const store = h().db.store;
    const bus = new MemoryBus({ logger: silentLogger });
    const notifier = notifierOn(store, bus, generateKeys());
    await notifier.start();
    try {
      const u = await h().user();
      const workflowId = await heartbeatWorkflow(u);
      const w = (await store.workflows.findById(workflowId))!;
      // up, down (a state change), still down (routine), recovered (a state change and its routine "Job completed"), up.
      for (const status of ['COMPLETED', 'FAILED', 'FAILED', 'COMPLETED', 'COMPLETED'] as const) await endJob(store, w, { status, ranMs: 5 });
      await drained(store);

      const changes = await u.get('/notifications?state_change=true');
      assert.equal(changes.status, 200, changes.text);
      const validate = schemaAt('components', 'schemas', 'NotificationPage');
      assert.ok(validate(changes.json), JSON.stringify(validate.errors));
      const page = changes.json as { notifications: { id: string; kind: string; payload: string }[] };
      const payloads = page.notifications.map((n): Record<string, string | undefined> => ({ kind: n.kind, ...(JSON.parse(n.payload) as Record<string, string>) }));
      // The jobs end within a millisecond or two of each other: compared without their order.
      assert.deepEqual(payloads.map((p) => [p.kind, p.title, p.state_change]).sort(), [
        ['WEB_ERROR', 'Job failed', 'down'],
        ['WEB_SUCCESS', 'Workflow recovered', 'recovered'],
      ]);
      const recovered = payloads.find((p) => p.state_change === 'recovered')!;
      assert.deepEqual(
        { ...recovered, message: '' },
        { kind: 'WEB_SUCCESS', title: 'Workflow recovered', message: '', entity_type: 'WORKFLOW', entity_id: workflowId, workflow_id: workflowId, action_url: `/workflows/${workflowId}`, state_change: 'recovered' },
      );
      assert.match(recovered.message!, /is up again: a job completed after 2 consecutive failed jobs\./);

      const rest = (await u.get('/notifications?state_change=false&limit=100')).json.notifications as { kind: string; payload: string }[];
      assert.ok(rest.every((n) => !('state_change' in JSON.parse(n.payload))), 'no state change among the rest');
      assert.deepEqual(rest.map((n) => JSON.parse(n.payload).title).filter((t) => t.startsWith('Job')).sort(), ['Job completed', 'Job completed', 'Job completed', 'Job failed']);
      const every = (await u.get('/notifications?limit=100')).json.notifications as { kind: string }[];
      assert.equal(every.length, rest.length + 2, 'without the filter: both');
      assert.ok(every.every((n) => ['WEB_INFO', 'WEB_SUCCESS', 'WEB_ALERT', 'WEB_ERROR'].includes(n.kind)), "the contract's kinds only");

      // Pages of one, combined with kind and unread.
      const seen: string[] = [];
      let cursor = '';
      do {
        const one = await u.get(`/notifications?state_change=true&limit=1${cursor ? `&cursor=${cursor}` : ''}`);
        seen.push(...one.json.notifications.map((n: { id: string }) => n.id));
        cursor = one.json.cursor;
      } while (cursor);
      assert.deepEqual(seen, page.notifications.map((n) => n.id));
      const down = await u.get('/notifications?state_change=true&kind=WEB_ERROR');
      assert.deepEqual(down.json.notifications.map((n: { payload: string }) => JSON.parse(n.payload).state_change), ['down']);
      assert.equal((await u.put('/notifications', { ids: [down.json.notifications[0].id] })).status, 204);
      for (const q of ['unread=true&', '']) {
        const unread = await u.get(`/notifications?${q}state_change=true`);
        assert.deepEqual(unread.json.notifications.map((n: { payload: string }) => JSON.parse(n.payload).state_change), ['recovered'], q);
      }
      const both = await u.get('/notifications?include_read=true&state_change=true');
      assert.deepEqual(both.json.notifications.map((n: { payload: string }) => JSON.parse(n.payload).state_change).sort(), ['down', 'recovered']);
    } finally {
      await notifier.stop();
      await bus.close();
    }
  });

  it('answers 400 naming state_change for anything but true or false, or the parameter twice', async () => {
    const u = await h().user();
    for (const q of ['state_change=yes', 'state_change=', 'state_change=TRUE', 'state_change=1', 'state_change=true&state_change=false']) {
      const res = await u.get(`/notifications?${q}`);
      assert.equal(res.status, 400, q);
      assert.deepEqual(res.json.errors.map((e: { field: string }) => e.field), ['state_change'], q);
      assert.match(res.json.detail, /state_change/, q);
    }
  });

  it('answers 400 naming kind for an unknown kind, an empty one, or kind given twice', async () => {
    const u = await h().user();
    for (const q of ['kind=WEB_PANIC', 'kind=WEB_RECOVERED', 'kind=', 'kind=WEB_ALERT,', 'kind=web_alert', 'kind=WEB_ALERT&kind=WEB_ERROR']) {
      const res = await u.get(`/notifications?${q}`);
      assert.equal(res.status, 400, q);
      assert.deepEqual(res.json.errors.map((e: { field: string }) => e.field), ['kind'], q);
    }
  });
});
