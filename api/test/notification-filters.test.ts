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

/** `GET /notifications?kind=…`: alerts apart from routine notifications (docs/api.md, "Notifications"). */
describeApi('notification kind filter', (h) => {
  it('lists only the kinds asked for, newest first, in pages, unread filter included', async () => {
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
    const unread = await u.get('/notifications?kind=WEB_ALERT,WEB_ERROR&unread=true');
    assert.deepEqual(unread.json.notifications.map((n: { id: string }) => n.id), [ids[6], ids[1]]);
    assert.equal((await u.get('/notifications?kind=WEB_SUCCESS')).json.notifications.length, 3);
    assert.equal((await u.get('/notifications')).json.notifications.length, 7, 'without kind: every kind');
  });

  it('lists a recovery as WEB_RECOVERED among the state changes, once, as the document describes it', async () => {
    const store = h().db.store;
    const bus = new MemoryBus({ logger: silentLogger });
    const notifier = notifierOn(store, bus, generateKeys());
    await notifier.start();
    try {
      const u = await h().user();
      const workflowId = await heartbeatWorkflow(u);
      const w = (await store.workflows.findById(workflowId))!;
      await endJob(store, w, { status: 'COMPLETED', ranMs: 5 });
      await endJob(store, w, { status: 'FAILED', ranMs: 5 });
      await endJob(store, w, { status: 'COMPLETED', ranMs: 5 });
      await endJob(store, w, { status: 'COMPLETED', ranMs: 5 });
      await drained(store);

      const changes = await u.get('/notifications?kind=WEB_ALERT,WEB_ERROR,WEB_RECOVERED');
      const page = changes.json as { notifications: { kind: string; payload: string }[] };
      assert.equal(changes.status, 200, changes.text);
      const validate = schemaAt('components', 'schemas', 'NotificationPage');
      assert.ok(validate(changes.json), JSON.stringify(validate.errors));
      // The jobs end within a millisecond or two of each other: compared without their order.
      const seen = page.notifications.map((n) => [n.kind, (JSON.parse(n.payload) as { title: string }).title]).sort();
      assert.deepEqual(seen, [
        ['WEB_ERROR', 'Job failed'],
        ['WEB_RECOVERED', 'Workflow recovered'],
      ]);
      const recovered = JSON.parse(page.notifications.find((n) => n.kind === 'WEB_RECOVERED')!.payload) as { message: string };
      assert.deepEqual(
        { ...recovered, message: '' },
        { title: 'Workflow recovered', message: '', entity_type: 'WORKFLOW', entity_id: workflowId, workflow_id: workflowId, action_url: `/workflows/${workflowId}` },
      );
      assert.match(recovered.message, /is up again: a job completed after 1 consecutive failed job\./);
      assert.equal((await u.get('/notifications?kind=WEB_SUCCESS')).json.notifications.filter((n: { payload: string }) => JSON.parse(n.payload).title === 'Job completed').length, 3);
    } finally {
      await notifier.stop();
      await bus.close();
    }
  });

  it('answers 400 naming kind for an unknown kind, an empty one, or kind given twice', async () => {
    const u = await h().user();
    for (const q of ['kind=WEB_PANIC', 'kind=', 'kind=WEB_ALERT,', 'kind=web_alert', 'kind=WEB_ALERT&kind=WEB_ERROR']) {
      const res = await u.get(`/notifications?${q}`);
      assert.equal(res.status, 400, q);
      assert.deepEqual(res.json.errors.map((e: { field: string }) => e.field), ['kind'], q);
    }
  });
});
