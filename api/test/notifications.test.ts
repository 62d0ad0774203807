import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { silentLogger } from '@orloj/common/logging';
import { MemoryBus } from '@orloj/common/bus';
import type { Store } from '@orloj/common/store';
import type { Notifier } from '@orloj/notifier';
import { describeApi, key, workflowBody } from './support/harness.js';
import { seedNotifications, userIdOf } from './support/notifications.js';
import { generateKeys } from '@orloj/common/test-support';
import { drained, endJob, notifierOn } from '@orloj/notifier/test-support';

describeApi('notifications and analytics routes', (h) => {
  const store = (): Store => h().db.store;

  describe('GET /notifications', () => {
    it('lists unread ones newest first in pages by default, read ones too with include_read=true, and hides everything under preference NONE', async () => {
      const u = await h().user();
      const ids = await seedNotifications(store(), u, 5);
      const all = await u.get('/notifications');
      assert.equal(all.status, 200);
      assert.deepEqual(all.json.notifications.map((n: { id: string }) => n.id), [...ids].reverse());
      assert.equal(all.json.cursor, '');
      const n0 = all.json.notifications[4];
      assert.deepEqual(Object.keys(n0).sort(), ['created_at', 'id', 'kind', 'payload', 'updated_at']);
      assert.equal(JSON.parse(n0.payload).title, 'N0');

      const seen: string[] = [];
      let cursor = '';
      do {
        const page = await u.get(`/api/notifications?limit=2${cursor ? `&cursor=${cursor}` : ''}`);
        assert.equal(page.status, 200);
        seen.push(...page.json.notifications.map((n: { id: string }) => n.id));
        cursor = page.json.cursor;
      } while (cursor);
      assert.deepEqual(seen, [...ids].reverse());

      assert.equal((await u.put('/notifications', { ids: [ids[1], ids[3]] })).status, 204);
      const listed = async (q: string) => ((await u.get(`/notifications${q}`)).json.notifications as { id: string }[]).map((n) => n.id);
      // Unread only by default, as the reference implementation lists them; unread=true says the same.
      for (const q of ['', '?unread=true', '?include_read=false', '?unread=true&include_read=false']) assert.deepEqual(await listed(q), [ids[4], ids[2], ids[0]], q);
      // include_read=true (or unread=false, as before) is the history, read ones with their read_at.
      for (const q of ['?include_read=true', '?unread=false', '?unread=false&include_read=true']) assert.deepEqual(await listed(q), [...ids].reverse(), q);
      const read = (await u.get('/notifications?include_read=true')).json.notifications.filter((n: { read_at?: string }) => n.read_at);
      assert.deepEqual(read.map((n: { id: string }) => n.id), [ids[3], ids[1]]);

      assert.equal((await u.put('/users', { notification_preference: 'NONE' })).status, 204);
      assert.deepEqual((await u.get('/notifications?include_read=true')).json, { notifications: [], cursor: '' });
      assert.equal((await u.put('/users', { notification_preference: 'ALL' })).status, 204);
      assert.equal((await u.get('/notifications?include_read=true')).json.notifications.length, 5);

      for (const [q, field] of [['?unread=true&include_read=true', 'include_read'], ['?unread=false&include_read=false', 'include_read'], ['?include_read=yes', 'include_read'], ['?include_read=true&include_read=true', 'include_read']]) {
        const r = await u.get(`/notifications${q}`);
        assert.equal(r.status, 400, q);
        assert.deepEqual((r.json.errors as { field: string }[]).map((e) => e.field), [field], q);
      }
      for (const q of ['?unread=yes', '?limit=0', '?limit=101', '?cursor=%%%', `?cursor=${Buffer.from('{"l":"workflows","k":1,"i":"x"}').toString('base64url')}`]) {
        const r = await u.get(`/notifications${q}`);
        assert.equal(r.status, 400, q);
      }
      assert.equal((await h().client().get('/notifications')).status, 401);
      assert.deepEqual((await (await h().user()).get('/notifications')).json.notifications, [], 'another user sees none of them');
    });
  });

  describe('PUT /notifications', () => {
    it('marks every listed notification read, ignoring repeats and keeping the first read_at', async () => {
      const u = await h().user();
      const ids = await seedNotifications(store(), u, 3);
      assert.equal((await u.put('/notifications', { ids: [ids[0], ids[0], ids[1]] })).status, 204);
      const first = new Map((await u.get('/notifications?include_read=true')).json.notifications.map((n: { id: string; read_at?: string }) => [n.id, n.read_at]));
      assert.ok(first.get(ids[0]!) && first.get(ids[1]!));
      assert.equal(first.get(ids[2]!), undefined);
      await new Promise((r) => setTimeout(r, 5)); // wall time must pass: a second marking would then show a later read_at
      assert.equal((await u.put('/notifications', { ids })).status, 204);
      const second = new Map((await u.get('/notifications?include_read=true')).json.notifications.map((n: { id: string; read_at?: string }) => [n.id, n.read_at]));
      assert.equal(second.get(ids[0]!), first.get(ids[0]!));
      assert.equal(second.get(ids[1]!), first.get(ids[1]!));
      assert.ok(second.get(ids[2]!));
    });

    it('marks read under concurrent requests: overlapping ones all succeed, each id read once, a refused one changes nothing', async () => {
      const u = await h().user();
      const ids = await seedNotifications(store(), u, 30);
      const stranger = await h().user();
      const [theirs] = await seedNotifications(store(), stranger, 1);
      // Ten overlapping sets (ids 0–19 only), and one set of the last ten with another user's id in it.
      const sets = Array.from({ length: 10 }, (_, i) => ids.slice(i, i + 10 - (i % 3)));
      const refused = [...ids.slice(20), theirs!];
      const answers = await Promise.all([...sets, refused].map((set) => u.put('/notifications', { ids: set })));
      assert.deepEqual(answers.map((a) => a.status), [...sets.map(() => 204), 404]);
      const readAt = async () => new Map((await u.get('/notifications?include_read=true&limit=100')).json.notifications.map((n: { id: string; read_at?: string }) => [n.id, n.read_at]));
      const first = await readAt();
      for (const id of ids.slice(0, 19)) assert.ok(first.get(id), `${id} was marked read`);
      for (const id of ids.slice(20)) assert.equal(first.get(id), undefined, 'the refused request marked nothing');
      assert.equal((await stranger.get('/notifications?unread=true')).json.notifications.length, 1);
      // Marked again, all at once: every read_at stays the first one.
      assert.deepEqual((await Promise.all(sets.map((set) => u.put('/notifications', { ids: set })))).map((a) => a.status), sets.map(() => 204));
      assert.deepEqual(await readAt(), first);
    });

    it('changes nothing and answers 404 when one id among 50 is another user\'s, or missing', async () => {
      const u = await h().user();
      const mine = await seedNotifications(store(), u, 49);
      const stranger = await h().user();
      const [theirs] = await seedNotifications(store(), stranger, 1);
      for (const ids of [[...mine.slice(0, 25), theirs!, ...mine.slice(25)], [...mine, crypto.randomUUID()]]) {
        assert.equal(ids.length, 50);
        const res = await u.put('/notifications', { ids });
        assert.equal(res.status, 404);
        assert.equal(res.json.code, 'not_found');
        const unread = await u.get('/notifications?unread=true&limit=100');
        assert.equal(unread.json.notifications.length, 49, 'none of mine was marked read');
        assert.equal((await stranger.get('/notifications?unread=true')).json.notifications.length, 1, 'theirs was not marked read');
      }
      assert.equal((await stranger.put('/notifications', { ids: [theirs] })).status, 204);
    });

    it('refuses bad bodies with 400 naming the field', async () => {
      const u = await h().user();
      const [id] = await seedNotifications(store(), u, 1);
      for (const [body, field] of [
        [{ ids: [] }, 'ids'],
        [{ ids: [id, 'nope'] }, 'ids.1'],
        [{ ids: [id!.toUpperCase()] }, 'ids.0'],
        [{ ids: Array.from({ length: 1001 }, () => crypto.randomUUID()) }, 'ids'],
        [{ ids: [1] }, 'ids.0'],
        [{}, 'ids'],
        [{ ids: [id], x: 1 }, 'x'],
      ] as [unknown, string][]) {
        const res = await u.put('/notifications', body);
        assert.equal(res.status, 400, JSON.stringify(body).slice(0, 80));
        assert.ok(
          (res.json.errors as { field: string }[]).some((e) => e.field === field || e.field.startsWith(field)),
          `${field} in ${res.text}`,
        );
      }
      assert.equal((await u.put('/notifications', { ids: Array.from({ length: 1000 }, () => id) })).status, 204, '1000 repeats of one id');
    });
  });

  describe('analytics', () => {
    let notifier: Notifier | undefined;
    let bus: MemoryBus | undefined;
    before(async () => {
      bus = new MemoryBus({ logger: silentLogger });
      notifier = notifierOn(store(), bus, generateKeys());
      await notifier.start();
    });
    after(async () => {
      await notifier?.stop();
      await bus?.close();
    });

    it('reports totals per user and per workflow, and "Deleted workflow" with the final totals after a delete', async () => {
      const u = await h().user();
      const userId = await userIdOf(store(), u);
      const empty = await u.get('/analytics');
      assert.deepEqual(empty.json, { total_workflows: 0, total_jobs: 0, total_joblogs: 0, total_job_execution_duration: 0, workflow_kinds: [], top_workflows: [] });
      const a = (await u.post('/workflows', workflowBody({ name: 'Alpha' }), { headers: key() })).json.id as string;
      const b = (await u.post('/workflows', workflowBody({ name: 'Beta' }), { headers: key() })).json.id as string;
      const wa = (await store().workflows.findById(a))!;
      const wb = (await store().workflows.findById(b))!;
      const ja = await endJob(store(), wa, { status: 'COMPLETED', ranMs: 2_999 });
      await endJob(store(), wa, { status: 'FAILED', ranMs: 61_000 });
      await endJob(store(), wa, { status: 'CANCELED' });
      await endJob(store(), wb, { status: 'COMPLETED', ranMs: 1_000 });
      await store().logs.recordCount({ jobId: ja.id, attempt: 1, workflowId: a, userId, lines: 7 });
      await drained(store());

      const totalsA = { total_jobs: 3, total_joblogs: 7, total_job_execution_duration: 2 + 61 };
      const totalsB = { total_jobs: 1, total_joblogs: 0, total_job_execution_duration: 1 };
      assert.deepEqual((await u.get(`/analytics/${a}`)).json, { workflow_id: a, ...totalsA });
      assert.deepEqual((await u.get(`/api/analytics/${b}`)).json, { workflow_id: b, ...totalsB });
      const before = await u.get('/analytics');
      assert.deepEqual(before.json, {
        total_workflows: 2,
        total_jobs: 4,
        total_joblogs: 7,
        total_job_execution_duration: 64,
        workflow_kinds: [{ kind: 'HEARTBEAT', total_workflows: 2, total_jobs: 4, total_joblogs: 7, total_job_execution_duration: 64 }],
        top_workflows: [
          { workflow_id: a, workflow_name: 'Alpha', kind: 'HEARTBEAT', ...totalsA },
          { workflow_id: b, workflow_name: 'Beta', kind: 'HEARTBEAT', ...totalsB },
        ],
      });

      assert.equal((await u.patch(`/workflows/${a}`)).status, 204);
      assert.equal((await u.delete(`/workflows/${a}`)).status, 204);
      await drained(store());
      const after = await u.get('/analytics');
      assert.equal(after.json.total_jobs, 4);
      assert.deepEqual(after.json.top_workflows[0], { workflow_id: a, workflow_name: 'Deleted workflow', kind: 'HEARTBEAT', ...totalsA });
      assert.deepEqual((await u.get(`/analytics/${a}`)).json, { workflow_id: a, ...totalsA }, 'a deleted workflow answers its final totals');
      const notes = (await u.get('/notifications?limit=100')).json.notifications.map((n: { payload: string }) => JSON.parse(n.payload).workflow_id);
      assert.ok(notes.length > 0 && !notes.includes(a), 'the deleted workflow\'s notifications went with it');

      const stranger = await h().user();
      assert.equal((await stranger.get(`/analytics/${a}`)).status, 404);
      assert.equal((await stranger.get(`/analytics/${b}`)).status, 404);
      assert.equal((await u.get(`/analytics/${crypto.randomUUID()}`)).status, 404);
      assert.equal((await u.get('/analytics/nope')).status, 400);
      assert.equal((await h().client().get('/analytics')).status, 401);
    });

    it('ranks at most 10 workflows by jobs, ties by name', async () => {
      const u = await h().user();
      const ids: string[] = [];
      for (const name of ['k', 'j', 'i', 'h', 'g', 'f', 'e', 'd', 'c', 'b', 'a', 'busy']) {
        ids.push((await u.post('/workflows', workflowBody({ name }), { headers: key() })).json.id as string);
      }
      const busy = (await store().workflows.findById(ids[11]!))!;
      await endJob(store(), busy, { status: 'COMPLETED', ranMs: 10 });
      await drained(store());
      const res = await u.get('/analytics');
      assert.equal(res.json.total_workflows, 12);
      assert.deepEqual(res.json.top_workflows.map((w: { workflow_name: string }) => w.workflow_name), ['busy', 'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i']);
    });
  });
});
