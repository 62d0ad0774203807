import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { toIso } from '@orloj/common/core';
import { reasons, type Job, type JobReason, type JobStatus, type JobTrigger, type Workflow } from '@orloj/common/domain';
import { insertJob } from '@orloj/common/test-support';
import { describeApi, key, workflowBody, type ApiHarness } from './support/harness.js';
import type { HttpResponse, TestClient } from './support/client.js';

type Json = Record<string, any>;

const fields = (res: HttpResponse) => ((res.json?.errors ?? []) as { field: string }[]).map((e) => e.field).sort();

async function createWorkflow(c: TestClient, overrides: Record<string, unknown> = {}): Promise<string> {
  const res = await c.post('/workflows', workflowBody(overrides), { headers: key() });
  assert.equal(res.status, 201, res.text);
  return res.json.id as string;
}

const schedulePath = (workflowId: string) => `/workflows/${workflowId}/jobs/schedule`;

interface Spec {
  status: JobStatus;
  trigger?: JobTrigger;
  scheduledAt: number;
  containerId?: string | null;
  attempts?: number;
  reason?: JobReason | null;
}

/** The wire shape the contract and the wire conventions prescribe, written out independently of present.ts. */
function wire(j: Job, inList: boolean): Json {
  const out: Json = { id: j.id, workflow_id: j.workflowId, status: j.status, trigger: j.trigger, scheduled_at: toIso(j.scheduledAt) };
  if (inList) {
    out.attempts = j.attempts;
    if (j.containerId !== null) out.container_id = j.containerId;
  }
  if (j.startedAt !== null) out.started_at = toIso(j.startedAt);
  if (j.completedAt !== null) out.completed_at = toIso(j.completedAt);
  out.created_at = toIso(j.createdAt);
  out.updated_at = toIso(j.updatedAt);
  if (j.status === 'FAILED' || j.status === 'CANCELED') {
    out.status_reason_code = j.statusReasonCode;
    out.status_reason_message = j.statusReasonMessage;
  }
  return out;
}

const newestFirst = (a: Job, b: Job) => b.scheduledAt - a.scheduledAt || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0);
const sortedKeys = (o: Json) => Object.keys(o).sort();

describeApi('jobs', (h) => {
  const store = () => h().db.store;
  const workflowRow = async (id: string): Promise<Workflow> => {
    const w = await store().workflows.findById(id);
    assert.ok(w, `workflow ${id} not in the store`);
    return w;
  };
  /** A job row (the kit's) as the scheduler and runners would leave it in `spec.status`. */
  const insert = (w: Workflow, spec: Spec, slotAt = spec.scheduledAt): Promise<Job> =>
    insertJob(store(), w, spec.status, {
      at: spec.scheduledAt,
      slotAt,
      trigger: spec.trigger ?? 'AUTOMATIC',
      containerId: spec.containerId ?? null,
      ...(spec.attempts === undefined ? {} : { attempts: spec.attempts }),
      ...(spec.reason === undefined ? {} : { statusReasonCode: spec.reason?.code ?? null, statusReasonMessage: spec.reason?.message ?? null }),
    });
  const setBuildStatus = (h2: ApiHarness, id: string, status: string) =>
    h2.db.handle.db.updateTable('workflows').set({ build_status: status as Workflow['buildStatus'] }).where('id', '=', id).execute();

  describe('POST /workflows/{id}/jobs/schedule', () => {
    it('answers 201 {id}; the job is PENDING, MANUAL, due now, of the current generation', async () => {
      const c = await h().user();
      const wid = await createWorkflow(c);
      const before = Date.now();
      const res = await c.post(schedulePath(wid), undefined, { headers: key() });
      assert.equal(res.status, 201, res.text);
      assert.deepEqual(Object.keys(res.json), ['id']);
      assert.equal(res.headers['content-type'], 'application/json; charset=utf-8');
      const job = await c.get(`/workflows/${wid}/jobs/${res.json.id}`);
      assert.equal(job.status, 200, job.text);
      assert.deepEqual(sortedKeys(job.json), ['created_at', 'id', 'scheduled_at', 'status', 'trigger', 'updated_at', 'workflow_id']);
      assert.equal(job.json.id, res.json.id);
      assert.equal(job.json.workflow_id, wid);
      assert.equal(job.json.status, 'PENDING');
      assert.equal(job.json.trigger, 'MANUAL');
      assert.equal(job.json.scheduled_at, job.json.created_at);
      const scheduled = Date.parse(job.json.scheduled_at);
      assert.ok(scheduled >= before && scheduled <= Date.now(), job.json.scheduled_at);
      const row = await store().jobs.findById(res.json.id);
      assert.equal(row?.generation, 0);
      assert.equal(row?.slotAt, row?.scheduledAt);
      assert.equal(row?.attempts, 0);
      const list = await c.get(`/workflows/${wid}/jobs`);
      assert.deepEqual(list.json, { jobs: [{ ...job.json, attempts: 0 }], cursor: '' });
    });

    it('records the generation of the workflow at the time of scheduling', async () => {
      const c = await h().user();
      const wid = await createWorkflow(c);
      const update = { name: 'v2', payload: workflowBody().payload, interval: 5, max_consecutive_job_failures_allowed: 3 };
      assert.equal((await c.put(`/workflows/${wid}`, update, { headers: key() })).status, 204);
      assert.equal((await c.put(`/workflows/${wid}`, update, { headers: key() })).status, 204);
      const res = await c.post(schedulePath(wid), undefined, { headers: key() });
      assert.equal((await store().jobs.findById(res.json.id))?.generation, 2);
    });

    it('does not touch the workflow (the automatic schedule stays where it was)', async () => {
      const c = await h().user();
      const wid = await createWorkflow(c);
      await h().db.handle.db.updateTable('workflows').set({ next_due_at: 1_900_000_000_000 }).where('id', '=', wid).execute();
      const before = await workflowRow(wid);
      assert.equal((await c.post(schedulePath(wid), undefined, { headers: key() })).status, 201);
      assert.equal((await c.post(schedulePath(wid), {}, { headers: key() })).status, 201);
      assert.deepEqual(await workflowRow(wid), before);
    });

    it('accepts no body and an empty object, as the same logical request', async () => {
      const c = await h().user();
      const wid = await createWorkflow(c);
      const headers = key();
      const none = await c.post(schedulePath(wid), undefined, { headers });
      assert.equal(none.status, 201);
      const empty = await c.post(schedulePath(wid), {}, { headers });
      assert.equal(empty.status, 201);
      assert.equal(empty.text, none.text);
      assert.equal(empty.headers['idempotent-replayed'], 'true');
      const spaced = await c.send('POST', schedulePath(wid), { rawBody: ' { } ', headers: { ...key(), 'content-type': 'application/json' } });
      assert.equal(spaced.status, 201);
      assert.equal((await c.get(`/workflows/${wid}/jobs`)).json.jobs.length, 2);
    });

    it('answers 400 for any other body, naming the field', async () => {
      const c = await h().user();
      const wid = await createWorkflow(c);
      const extra = await c.post(schedulePath(wid), { x: 1 }, { headers: key() });
      assert.equal(extra.status, 400);
      assert.equal(extra.json.code, 'validation_failed');
      assert.deepEqual(fields(extra), ['x']);
      for (const raw of ['[]', 'null', '"x"', '1', 'true']) {
        const res = await c.send('POST', schedulePath(wid), { rawBody: raw, headers: { ...key(), 'content-type': 'application/json' } });
        assert.equal(res.status, 400, raw);
        assert.deepEqual(fields(res), ['body'], raw);
      }
      const malformed = await c.send('POST', schedulePath(wid), { rawBody: '{', headers: { ...key(), 'content-type': 'application/json' } });
      assert.equal(malformed.json.code, 'malformed_json');
      const text = await c.send('POST', schedulePath(wid), { rawBody: 'x=1', headers: { ...key(), 'content-type': 'text/plain' } });
      assert.equal(text.json.code, 'unsupported_media_type');
      assert.deepEqual((await c.get(`/workflows/${wid}/jobs`)).json.jobs, []);
    });

    it('replays a retry byte for byte, and answers 409 for the same key on another workflow', async () => {
      const c = await h().user();
      const a = await createWorkflow(c);
      const b = await createWorkflow(c);
      const headers = key();
      const first = await c.post(schedulePath(a), undefined, { headers });
      const again = await c.post(schedulePath(a), undefined, { headers });
      assert.equal(again.status, 201);
      assert.equal(again.text, first.text);
      assert.equal(again.headers['idempotent-replayed'], 'true');
      const other = await c.post(schedulePath(b), undefined, { headers });
      assert.equal(other.status, 409);
      assert.equal(other.json.code, 'idempotency_key_reused');
      const create = await c.post('/workflows', workflowBody(), { headers });
      assert.equal(create.status, 409);
      assert.equal((await c.get(`/workflows/${a}/jobs`)).json.jobs.length, 1);
      assert.equal((await c.get(`/workflows/${b}/jobs`)).json.jobs.length, 0);
    });

    it('creates exactly one job for 10 concurrent requests with one key', async () => {
      const c = await h().user();
      const wid = await createWorkflow(c);
      const headers = key();
      const responses = await Promise.all(Array.from({ length: 10 }, () => c.post(schedulePath(wid), undefined, { headers })));
      for (const r of responses) assert.equal(r.status, 201, r.text);
      assert.equal(new Set(responses.map((r) => r.text)).size, 1);
      assert.equal((await c.get(`/workflows/${wid}/jobs`)).json.jobs.length, 1);
    });

    it('answers 400 for a missing or invalid Idempotency-Key', async () => {
      const c = await h().user();
      const wid = await createWorkflow(c);
      const missing = await c.post(schedulePath(wid));
      assert.equal(missing.status, 400);
      assert.equal(missing.json.code, 'idempotency_key_missing');
      const blank = await c.post(schedulePath(wid), undefined, { headers: { 'idempotency-key': '  ' } });
      assert.equal(blank.status, 400);
      assert.equal(blank.json.code, 'idempotency_key_invalid');
      assert.deepEqual((await c.get(`/workflows/${wid}/jobs`)).json.jobs, []);
    });

    it("answers 404 for another user's workflow and for an unknown one, 400 for a non-UUID id", async () => {
      const owner = await h().user();
      const wid = await createWorkflow(owner);
      const other = await h().user();
      const stranger = await other.post(schedulePath(wid), undefined, { headers: key() });
      assert.equal(stranger.status, 404);
      assert.equal(stranger.json.code, 'not_found');
      assert.equal((await owner.post(schedulePath(crypto.randomUUID()), undefined, { headers: key() })).status, 404);
      const bad = await owner.post(schedulePath('not-a-uuid'), undefined, { headers: key() });
      assert.equal(bad.status, 400);
      assert.deepEqual(fields(bad), ['workflow_id']);
      assert.deepEqual((await owner.get(`/workflows/${wid}/jobs`)).json.jobs, []);
    });

    it('answers 412 workflow_terminated for a terminated workflow, and the key stays usable', async () => {
      const c = await h().user();
      const wid = await createWorkflow(c);
      assert.equal((await c.patch(`/workflows/${wid}`)).status, 204);
      const headers = key();
      const res = await c.post(schedulePath(wid), undefined, { headers });
      assert.equal(res.status, 412);
      assert.equal(res.json.code, 'workflow_terminated');
      assert.deepEqual((await c.get(`/workflows/${wid}/jobs`)).json.jobs, []);
      // Reactivated by a PUT: the same key now schedules (a failed request is not recorded).
      const update = { name: 'again', payload: workflowBody().payload, interval: 5, max_consecutive_job_failures_allowed: 3 };
      assert.equal((await c.put(`/workflows/${wid}`, update, { headers: key() })).status, 204);
      assert.equal((await c.post(schedulePath(wid), undefined, { headers })).status, 201);
    });

    it('answers 412 workflow_build_failed when the build FAILED; other build states are accepted', async () => {
      const c = await h().user();
      const wid = await createWorkflow(c, { kind: 'CONTAINER', payload: JSON.stringify({ image: 'busybox' }) });
      await setBuildStatus(h(), wid, 'FAILED');
      const res = await c.post(schedulePath(wid), undefined, { headers: key() });
      assert.equal(res.status, 412);
      assert.equal(res.json.code, 'workflow_build_failed');
      assert.equal(res.headers['content-type'], 'application/problem+json');
      assert.deepEqual((await c.get(`/workflows/${wid}/jobs`)).json.jobs, []);
      for (const status of ['QUEUED', 'STARTED', 'COMPLETED']) {
        await setBuildStatus(h(), wid, status);
        assert.equal((await c.post(schedulePath(wid), undefined, { headers: key() })).status, 201, status);
      }
    });

    it('needs a session (401) and the CSRF cookie (403)', async () => {
      const c = await h().user();
      const wid = await createWorkflow(c);
      assert.equal((await h().client().post(schedulePath(wid), undefined, { headers: key() })).status, 401);
      const noCsrf = c.clone();
      noCsrf.cookies.delete('csrf');
      const res = await noCsrf.post(schedulePath(wid), undefined, { headers: key() });
      assert.equal(res.status, 403);
      assert.equal(res.json.code, 'csrf_failed');
    });

    it('answers 405 with Allow: POST for other methods, also below /api', async () => {
      const c = await h().user();
      const wid = await createWorkflow(c);
      for (const prefix of ['', '/api']) {
        for (const m of ['GET', 'PUT', 'DELETE', 'PATCH']) {
          const res = await c.send(m, prefix + schedulePath(wid), { headers: key() });
          assert.equal(res.status, 405, `${m} ${prefix}`);
          assert.deepEqual(String(res.headers.allow).split(/,\s*/).filter((x) => x !== 'HEAD' && x !== 'OPTIONS'), ['POST']);
        }
      }
      assert.equal((await c.post(`/api${schedulePath(wid)}`, undefined, { headers: key() })).status, 201);
    });
  });

  describe('GET /workflows/{id}/jobs', () => {
    let c: TestClient;
    let wid: string;
    const all: Job[] = [];
    let otherWid: string;
    const statuses: JobStatus[] = ['PENDING', 'QUEUED', 'RUNNING', 'COMPLETED', 'FAILED', 'CANCELED'];

    before(async () => {
      c = await h().user();
      wid = await createWorkflow(c, { kind: 'CONTAINER', payload: JSON.stringify({ image: 'busybox' }) });
      const w = await workflowRow(wid);
      const base = Date.now() - 24 * 60 * 60 * 1000;
      // 43 stored jobs of both triggers, scheduled_at in groups of three (ties broken by
      // id), plus 2 scheduled through the API: 45. At most one job of a workflow is
      // QUEUED or RUNNING (a unique index says so), so the stored rows are PENDING or
      // terminal, and two of the PENDING ones are then moved through the state machine
      // the way the scheduler and a runner would: one ends FAILED, one stays RUNNING.
      const stored: JobStatus[] = ['PENDING', 'COMPLETED', 'FAILED', 'CANCELED'];
      for (let i = 0; i < 43; i++) {
        const status = stored[i % stored.length]!;
        const trigger: JobTrigger = i % 3 === 0 ? 'MANUAL' : 'AUTOMATIC';
        const containerId = status !== 'PENDING' && i % 2 === 0 ? `c0ffee${String(i).padStart(2, '0')}` : null;
        all.push(await insert(w, { status, trigger, scheduledAt: base + Math.floor(i / 3) * 60_000, containerId, attempts: i % 3 }, base + i));
      }
      for (let i = 0; i < 2; i++) {
        const res = await c.post(schedulePath(wid), undefined, { headers: key() });
        assert.equal(res.status, 201);
        all.push((await store().jobs.findById(res.json.id))!);
      }
      const move = async (index: number, end: 'FAILED' | 'RUNNING', containerId: string) => {
        const job = all[index]!;
        assert.equal(job.status, 'PENDING');
        const t0 = job.scheduledAt + 10_000;
        assert.ok(await store().jobMoves.transition(job.id, 'QUEUED', t0, { attempts: 1, queuedAt: t0 }));
        let moved = await store().jobMoves.transition(job.id, 'RUNNING', t0 + 1, { startedAt: t0 + 1, containerId }, { attempts: 1 });
        if (end === 'FAILED') {
          moved = await store().jobMoves.transition(job.id, 'FAILED', t0 + 2, { completedAt: t0 + 2, reason: reasons.timeLimitExceeded(30_000) });
        }
        assert.ok(moved);
        all[index] = moved;
      };
      await move(4, 'FAILED', 'feedface');
      await move(8, 'RUNNING', 'cafebabe');
      all.sort(newestFirst);
      assert.equal(all.length, 45);
      // Jobs of another workflow of the same user never show up.
      otherWid = await createWorkflow(c);
      const other = await workflowRow(otherWid);
      for (let i = 0; i < 3; i++) await insert(other, { status: 'COMPLETED', scheduledAt: base + i * 60_000 });
    });

    async function pages(query: string, limit?: number): Promise<Json[]> {
      const items: Json[] = [];
      let cursor = '';
      for (let n = 0; n < 100; n++) {
        const qs = new URLSearchParams(query);
        if (cursor) qs.set('cursor', cursor);
        if (limit) qs.set('limit', String(limit));
        const res = await c.get(`/workflows/${wid}/jobs?${qs}`);
        assert.equal(res.status, 200, res.text);
        assert.deepEqual(sortedKeys(res.json), ['cursor', 'jobs']);
        assert.ok(res.json.jobs.length <= (limit ?? 20));
        items.push(...res.json.jobs);
        cursor = res.json.cursor;
        if (cursor === '') return items;
        assert.equal(res.json.jobs.length, limit ?? 20, 'only the last page may be short');
      }
      throw new Error('pagination did not end');
    }

    const filters: [string, (j: Job) => boolean][] = [
      ['', () => true],
      ...statuses.map((s): [string, (j: Job) => boolean] => [`status=${s}`, (j) => j.status === s]),
      ['trigger=AUTOMATIC', (j) => j.trigger === 'AUTOMATIC'],
      ['trigger=MANUAL', (j) => j.trigger === 'MANUAL'],
      ['status=FAILED&trigger=AUTOMATIC', (j) => j.status === 'FAILED' && j.trigger === 'AUTOMATIC'],
      ['status=PENDING&trigger=MANUAL', (j) => j.status === 'PENDING' && j.trigger === 'MANUAL'],
      ['status=RUNNING&trigger=MANUAL', () => false],
      ['cache_buster=1', () => true],
    ];
    for (const [query, predicate] of filters) {
      it(`pages through every match newest first, no gap or repeat, exact wire shape: ${query || '(no filter)'}`, async () => {
        const expected = all.filter(predicate).map((j) => wire(j, true));
        assert.ok(expected.length > 0 || query.includes('&') || query === 'status=QUEUED');
        assert.deepEqual(await pages(query), expected);
        assert.deepEqual(await pages(query, 7), expected);
        assert.deepEqual(await pages(query, 1), expected);
      });
    }

    it('pages of 20 by default; the last page carries an empty cursor, also when it is exactly full', async () => {
      const first = await c.get(`/workflows/${wid}/jobs`);
      assert.equal(first.json.jobs.length, 20);
      assert.notEqual(first.json.cursor, '');
      assert.match(first.json.cursor, /^[A-Za-z0-9_-]+$/);
      const sizes: number[] = [];
      let cursor = '';
      do {
        const res = await c.get(`/workflows/${wid}/jobs?limit=15${cursor ? `&cursor=${cursor}` : ''}`);
        sizes.push(res.json.jobs.length);
        cursor = res.json.cursor;
      } while (cursor);
      assert.deepEqual(sizes, [15, 15, 15]);
      const whole = await c.get(`/workflows/${wid}/jobs?limit=45`);
      assert.equal(whole.json.cursor, '');
      assert.equal((await c.get(`/workflows/${wid}/jobs?limit=100`)).json.jobs.length, 45);
    });

    it('shows container_id only when set, reasons only for FAILED and CANCELED jobs', async () => {
      const res = await c.get(`/workflows/${wid}/jobs?limit=100`);
      for (const j of res.json.jobs as Json[]) {
        assert.equal(typeof j.attempts, 'number');
        const hasReason = j.status === 'FAILED' || j.status === 'CANCELED';
        assert.equal('status_reason_code' in j, hasReason, JSON.stringify(j));
        assert.equal('status_reason_message' in j, hasReason, JSON.stringify(j));
        if (j.status === 'PENDING' || j.status === 'QUEUED') assert.equal(j.container_id, undefined);
        if (j.status === 'PENDING') assert.equal(j.started_at, undefined);
      }
      assert.ok((res.json.jobs as Json[]).some((j) => j.container_id === 'feedface' && j.status_reason_code === 'TIME_LIMIT_EXCEEDED'));
      assert.ok((res.json.jobs as Json[]).some((j) => j.container_id === 'cafebabe' && j.status === 'RUNNING' && j.started_at && !j.completed_at));
      assert.ok((res.json.jobs as Json[]).some((j) => j.status === 'COMPLETED' && j.container_id === undefined));
    });

    it('answers 400 for bad filter values, naming each', async () => {
      const bad: [string, string[]][] = [
        ['status=DONE', ['status']],
        ['status=pending', ['status']],
        ['status=', ['status']],
        ['trigger=CRON', ['trigger']],
        ['trigger=manual', ['trigger']],
        ['status=FAILED&status=CANCELED', ['status']],
        ['limit=0', ['limit']],
        ['limit=101', ['limit']],
        ['limit=1.5', ['limit']],
        ['limit=-1', ['limit']],
        ['status=X&trigger=Y&limit=0', ['limit', 'status', 'trigger']],
        ['cursor=garbage!', ['cursor']],
        ['cursor=eyJsIjoieCJ9', ['cursor']],
      ];
      for (const [qs, expected] of bad) {
        const res = await c.get(`/workflows/${wid}/jobs?${qs}`);
        assert.equal(res.status, 400, qs);
        assert.equal(res.json.code, 'validation_failed', qs);
        assert.deepEqual(fields(res), expected, qs);
      }
    });

    it("answers 400 for a cursor from another workflow's job list or from another list", async () => {
      const ofOther = await c.get(`/workflows/${otherWid}/jobs?limit=1`);
      assert.notEqual(ofOther.json.cursor, '');
      const res = await c.get(`/workflows/${wid}/jobs?cursor=${ofOther.json.cursor}`);
      assert.equal(res.status, 400);
      assert.deepEqual(fields(res), ['cursor']);
      const workflowsCursor = (await c.get('/workflows?limit=1')).json.cursor as string;
      assert.notEqual(workflowsCursor, '');
      assert.equal((await c.get(`/workflows/${wid}/jobs?cursor=${workflowsCursor}`)).status, 400);
      const unbound = Buffer.from(JSON.stringify({ l: 'jobs', k: 1, i: crypto.randomUUID() })).toString('base64url');
      assert.equal((await c.get(`/workflows/${wid}/jobs?cursor=${unbound}`)).status, 400);
      // while this list's own cursor works
      const own = (await c.get(`/workflows/${wid}/jobs?limit=1`)).json.cursor as string;
      assert.equal((await c.get(`/workflows/${wid}/jobs?cursor=${own}`)).status, 200);
    });

    it("answers 404 for another user's workflow and an unknown one; 400 for a non-UUID id", async () => {
      const stranger = await (await h().user()).get(`/workflows/${wid}/jobs`);
      assert.equal(stranger.status, 404);
      assert.equal(stranger.json.code, 'not_found');
      assert.equal((await c.get(`/workflows/${crypto.randomUUID()}/jobs`)).status, 404);
      const bad = await c.get('/workflows/123/jobs');
      assert.equal(bad.status, 400);
      assert.deepEqual(fields(bad), ['workflow_id']);
      assert.equal((await h().client().get(`/workflows/${wid}/jobs`)).status, 401);
    });

    it('filters a QUEUED job exactly (a workflow holds at most one QUEUED or RUNNING job)', async () => {
      const other = await createWorkflow(c);
      const w = await workflowRow(other);
      const t = Date.now();
      const queued = await insert(w, { status: 'QUEUED', scheduledAt: t, attempts: 2 });
      await insert(w, { status: 'COMPLETED', scheduledAt: t - 60_000 });
      assert.deepEqual((await c.get(`/workflows/${other}/jobs?status=QUEUED`)).json, { jobs: [wire(queued, true)], cursor: '' });
      assert.deepEqual((await c.get(`/workflows/${other}/jobs?status=RUNNING`)).json, { jobs: [], cursor: '' });
      assert.equal((await c.get(`/workflows/${other}/jobs?status=QUEUED&trigger=MANUAL`)).json.jobs.length, 0);
    });

    it('answers an empty page for a workflow without jobs, also below /api', async () => {
      const fresh = await createWorkflow(c);
      assert.deepEqual((await c.get(`/workflows/${fresh}/jobs`)).json, { jobs: [], cursor: '' });
      assert.equal((await c.get(`/api/workflows/${wid}/jobs`)).json.jobs.length, 20);
    });
  });

  describe('GET /workflows/{id}/jobs/{job_id}', () => {
    it('answers the job without container_id and attempts; reasons only for FAILED and CANCELED', async () => {
      const c = await h().user();
      const wid = await createWorkflow(c, { kind: 'CONTAINER', payload: JSON.stringify({ image: 'busybox' }) });
      const w = await workflowRow(wid);
      const t = Date.now() - 60_000;
      const specs: Spec[] = [
        { status: 'PENDING', scheduledAt: t },
        { status: 'QUEUED', scheduledAt: t + 1, attempts: 2 },
        { status: 'RUNNING', scheduledAt: t + 2, containerId: 'abc123' },
        { status: 'COMPLETED', scheduledAt: t + 3, containerId: 'abc124', trigger: 'MANUAL' },
        { status: 'FAILED', scheduledAt: t + 4, containerId: 'abc125', reason: reasons.unexpectedStatusCode(200, 503) },
        { status: 'CANCELED', scheduledAt: t + 5, reason: reasons.workflowUpdated() },
      ];
      for (const spec of specs) {
        // at most one QUEUED or RUNNING job per workflow: the QUEUED one goes to a second workflow
        const target = spec.status === 'QUEUED' ? await workflowRow(await createWorkflow(c)) : w;
        const job = await insert(target, spec);
        const res = await c.get(`/workflows/${target.id}/jobs/${job.id}`);
        assert.equal(res.status, 200, res.text);
        assert.deepEqual(res.json, wire(job, false), spec.status);
        assert.equal(res.json.container_id, undefined);
        assert.equal(res.json.attempts, undefined);
        const reasoned = spec.status === 'FAILED' || spec.status === 'CANCELED';
        assert.equal('status_reason_code' in res.json, reasoned, spec.status);
        assert.equal('status_reason_message' in res.json, reasoned, spec.status);
      }
      const failed = await c.get(`/workflows/${wid}/jobs?status=FAILED`);
      assert.equal(failed.json.jobs[0].status_reason_message, 'The endpoint answered with status 503; expected 200.');
    });

    it('gives a FAILED or CANCELED job without a stored reason the "reason unavailable" codes', async () => {
      const c = await h().user();
      const wid = await createWorkflow(c);
      const w = await workflowRow(wid);
      const t = Date.now();
      const failed = await insert(w, { status: 'FAILED', scheduledAt: t, reason: null });
      const canceled = await insert(w, { status: 'CANCELED', scheduledAt: t + 1, reason: null });
      const completedWithStrayReason = await insert(w, { status: 'COMPLETED', scheduledAt: t + 2, reason: reasons.nonZeroExit(1) });
      const f = (await c.get(`/workflows/${wid}/jobs/${failed.id}`)).json;
      assert.equal(f.status_reason_code, 'FAILURE_REASON_UNAVAILABLE');
      assert.equal(f.status_reason_message, 'The job failed.');
      const x = (await c.get(`/workflows/${wid}/jobs/${canceled.id}`)).json;
      assert.equal(x.status_reason_code, 'CANCELLATION_REASON_UNAVAILABLE');
      assert.equal(x.status_reason_message, 'The job was canceled.');
      const ok = (await c.get(`/workflows/${wid}/jobs/${completedWithStrayReason.id}`)).json;
      assert.equal(ok.status_reason_code, undefined);
      assert.equal(ok.status_reason_message, undefined);
    });

    it("answers 404 for another user's job, another workflow's job and an unknown job", async () => {
      const owner = await h().user();
      const a = await createWorkflow(owner);
      const b = await createWorkflow(owner);
      const jobId = (await owner.post(schedulePath(a), undefined, { headers: key() })).json.id as string;
      assert.equal((await owner.get(`/workflows/${a}/jobs/${jobId}`)).status, 200);
      const stranger = await (await h().user()).get(`/workflows/${a}/jobs/${jobId}`);
      assert.equal(stranger.status, 404);
      assert.equal(stranger.json.code, 'not_found');
      assert.equal((await owner.get(`/workflows/${b}/jobs/${jobId}`)).status, 404);
      assert.equal((await owner.get(`/workflows/${a}/jobs/${crypto.randomUUID()}`)).status, 404);
      assert.equal((await owner.get(`/workflows/${crypto.randomUUID()}/jobs/${jobId}`)).status, 404);
      assert.equal((await h().client().get(`/workflows/${a}/jobs/${jobId}`)).status, 401);
    });

    it('answers 400 naming each path parameter that is not a UUID', async () => {
      const c = await h().user();
      const wid = await createWorkflow(c);
      const jid = crypto.randomUUID();
      const cases: [string, string[]][] = [
        [`/workflows/nope/jobs/${jid}`, ['workflow_id']],
        [`/workflows/${wid}/jobs/nope`, ['job_id']],
        ['/workflows/nope/jobs/nope', ['job_id', 'workflow_id']],
        [`/workflows/${wid}/jobs/${jid}x`, ['job_id']],
        [`/workflows/${wid}/jobs/%E0%A4%A`, ['job_id']],
        [`/workflows/${wid}/jobs/schedules`, ['job_id']],
      ];
      for (const [path, expected] of cases) {
        const res = await c.get(path);
        assert.equal(res.status, 400, path);
        assert.equal(res.json.code, 'validation_failed', path);
        assert.deepEqual(fields(res), expected, path);
      }
    });

    it('is served below /api and with a trailing slash', async () => {
      const c = await h().user();
      const wid = await createWorkflow(c);
      const jobId = (await c.post(schedulePath(wid), undefined, { headers: key() })).json.id as string;
      assert.equal((await c.get(`/api/workflows/${wid}/jobs/${jobId}`)).json.id, jobId);
      assert.equal((await c.get(`/workflows/${wid}/jobs/${jobId}/`)).json.id, jobId);
      const wrong = await c.send('DELETE', `/workflows/${wid}/jobs/${jobId}`);
      assert.equal(wrong.status, 405);
      assert.equal(String(wrong.headers.allow).split(/,\s*/).filter((x) => x !== 'HEAD').join(), 'GET');
    });
  });
});
