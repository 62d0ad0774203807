import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { insertJob } from '@orloj/common/test-support';
import { describeApi, key, workflowBody } from './support/harness.js';
import { rawRequest, TestClient } from './support/client.js';
import { systemClock } from '@orloj/common/core';
import type { JobStatus } from '@orloj/common/domain';
import { silentLogger } from '@orloj/common/logging';
import { openDatabase, Store, type DatabaseHandle } from '@orloj/common/store';
import { ApiServer } from '@orloj/api';

const containerPayload = (image = 'localhost/orloj-test/busybox:1') => JSON.stringify({ image, cmd: ['echo', 'hi'] });

async function create(c: TestClient, overrides: Record<string, unknown> = {}): Promise<string> {
  const res = await c.post('/workflows', workflowBody(overrides), { headers: key() });
  assert.equal(res.status, 201, res.text);
  return res.json.id as string;
}

const fields = (res: { json: { errors?: { field: string }[] } }) => (res.json.errors ?? []).map((e) => e.field).sort();

describeApi('workflows', (h) => {
  describe('POST /workflows', () => {
    it('creates a HEARTBEAT workflow: 201 {id}, QUEUED, log_retention false', async () => {
      const c = await h().user();
      const res = await c.post('/workflows', workflowBody(), { headers: key() });
      assert.equal(res.status, 201);
      assert.deepEqual(Object.keys(res.json), ['id']);
      const w = (await c.get(`/workflows/${res.json.id}`)).json;
      assert.equal(w.build_status, 'QUEUED');
      assert.equal(w.log_retention, false);
      assert.equal(w.generation, 0);
      assert.equal(w.consecutive_job_failures_count, 0);
      assert.equal(w.terminated_at, undefined);
      assert.equal(w.payload, workflowBody().payload);
    });

    it('keeps the payload string exactly as sent', async () => {
      const c = await h().user();
      const payload = '{ "endpoint" : "https://example.com/ü?x=1" ,"timeout":"1m30s"}';
      const id = await create(c, { payload });
      assert.equal((await c.get(`/workflows/${id}`)).json.payload, payload);
    });

    it('defaults log_retention to true for CONTAINER and honours false', async () => {
      const c = await h().user();
      const a = await create(c, { kind: 'CONTAINER', payload: containerPayload() });
      const b = await create(c, { kind: 'CONTAINER', payload: containerPayload(), log_retention: false });
      assert.equal((await c.get(`/workflows/${a}`)).json.log_retention, true);
      assert.equal((await c.get(`/workflows/${b}`)).json.log_retention, false);
    });

    it('answers 400 for log_retention true on HEARTBEAT', async () => {
      const c = await h().user();
      const res = await c.post('/workflows', workflowBody({ log_retention: true }), { headers: key() });
      assert.equal(res.status, 400);
      assert.deepEqual(fields(res), ['log_retention']);
    });

    it('answers 400 naming each out-of-range or missing field', async () => {
      const c = await h().user();
      const res = await c.post(
        '/workflows',
        { name: 'x', payload: '{}', kind: 'CRON', interval: 10081, max_consecutive_job_failures_allowed: 2 },
        { headers: key() },
      );
      assert.equal(res.status, 400);
      assert.deepEqual(fields(res), ['interval', 'kind', 'max_consecutive_job_failures_allowed']);
      const missing = await c.post('/workflows', {}, { headers: key() });
      assert.deepEqual(fields(missing), ['interval', 'kind', 'max_consecutive_job_failures_allowed', 'name', 'payload']);
      const low = await c.post('/workflows', workflowBody({ interval: 0, max_consecutive_job_failures_allowed: 101 }), { headers: key() });
      assert.deepEqual(fields(low), ['interval', 'max_consecutive_job_failures_allowed']);
      const float = await c.post('/workflows', workflowBody({ interval: 1.5 }), { headers: key() });
      assert.deepEqual(fields(float), ['interval']);
      const extra = await c.post('/workflows', workflowBody({ colour: 'red' }), { headers: key() });
      assert.deepEqual(fields(extra), ['colour']);
    });

    it('validates the HEARTBEAT payload field by field', async () => {
      const c = await h().user();
      const cases: [unknown, string][] = [
        ['not json', 'payload'],
        [[], 'payload'],
        [{}, 'payload.endpoint'],
        [{ endpoint: 'ftp://example.com' }, 'payload.endpoint'],
        [{ endpoint: '/relative' }, 'payload.endpoint'],
        [{ endpoint: `https://example.com/${'a'.repeat(2100)}` }, 'payload.endpoint'],
        [{ endpoint: 'https://example.com', expected_status_code: 99 }, 'payload.expected_status_code'],
        [{ endpoint: 'https://example.com', expected_status_code: 600 }, 'payload.expected_status_code'],
        [{ endpoint: 'https://example.com', timeout: '6m' }, 'payload.timeout'],
        [{ endpoint: 'https://example.com', timeout: 'soon' }, 'payload.timeout'],
        [{ endpoint: 'https://example.com', headers: { a: 1 } }, 'payload.headers.a'],
        [{ endpoint: 'https://example.com', method: 'DELETE' }, 'payload.method'],
        [{ endpoint: 'https://example.com', body: 'x' }, 'payload.body'],
        [{ endpoint: 'https://example.com', extra: true }, 'payload.extra'],
      ];
      for (const [payload, field] of cases) {
        const text = typeof payload === 'string' ? payload : JSON.stringify(payload);
        const res = await c.post('/workflows', workflowBody({ payload: text }), { headers: key() });
        assert.equal(res.status, 400, `${text} → ${res.status}`);
        assert.deepEqual(fields(res), [field], text);
      }
      const ok = { endpoint: 'http://10.0.0.1:8080/x', method: 'POST', body: '{}', headers: { 'X-Token': 'a' }, timeout: '1m30s', expected_status_code: 204, body_contains: 'ok' };
      assert.equal((await c.post('/workflows', workflowBody({ payload: JSON.stringify(ok) }), { headers: key() })).status, 201);
    });

    it('validates the CONTAINER payload field by field', async () => {
      const c = await h().user();
      const cases: [unknown, string][] = [
        [{}, 'payload.image'],
        [{ image: 'Not A Valid Image!' }, 'payload.image'],
        [{ image: 'busybox', cmd: 'echo hi' }, 'payload.cmd'],
        [{ image: 'busybox', env: { 'BAD-NAME': 'x' } }, 'payload.env'],
        [{ image: 'busybox', timeout: '2h' }, 'payload.timeout'],
        [{ image: 'busybox', network: 'host' }, 'payload.network'],
        [{ image: 'busybox', memory_mb: 1 }, 'payload.memory_mb'],
        [{ image: 'busybox', privileged: true }, 'payload.privileged'],
      ];
      for (const [payload, field] of cases) {
        const res = await c.post('/workflows', workflowBody({ kind: 'CONTAINER', payload: JSON.stringify(payload) }), { headers: key() });
        assert.equal(res.status, 400, JSON.stringify(payload));
        assert.deepEqual(fields(res), [field], JSON.stringify(payload));
      }
      for (const image of ['busybox', 'library/busybox:1.36', 'docker.io/team/app:v1', 'localhost/team/app:v1', `alpine@sha256:${'a'.repeat(64)}`]) {
        assert.equal((await c.post('/workflows', workflowBody({ kind: 'CONTAINER', payload: JSON.stringify({ image }) }), { headers: key() })).status, 201, image);
      }
    });

    it('answers 400 for NUL characters, which no text column can store', async () => {
      const c = await h().user();
      const res = await c.post('/workflows', workflowBody({ name: 'a\u0000b' }), { headers: key() });
      assert.equal(res.status, 400);
      assert.deepEqual(fields(res), ['name']);
      const list = await c.get('/workflows?query=%00');
      assert.equal(list.status, 400);
      assert.deepEqual(fields(list), ['query']);
    });

    it('needs a session (401) and a CSRF cookie (403)', async () => {
      assert.equal((await h().client().post('/workflows', workflowBody(), { headers: key() })).status, 401);
      const c = await h().user();
      c.cookies.delete('csrf');
      assert.equal((await c.post('/workflows', workflowBody(), { headers: key() })).status, 403);
    });
  });

  describe('Idempotency-Key', () => {
    it('answers 400 idempotency_key_missing without the header', async () => {
      const c = await h().user();
      const res = await c.post('/workflows', workflowBody());
      assert.equal(res.status, 400);
      assert.equal(res.json.code, 'idempotency_key_missing');
    });

    it('answers 400 idempotency_key_invalid for empty, blank, too long, control characters and invalid UTF-8', async () => {
      const c = await h().user();
      for (const value of ['', '   ', 'a'.repeat(256), 'é'.repeat(128), 'a\tb']) {
        const res = await c.post('/workflows', workflowBody(), { headers: { 'idempotency-key': value } });
        assert.equal(res.status, 400, JSON.stringify(value));
        assert.equal(res.json.code, 'idempotency_key_invalid', JSON.stringify(value));
      }
      const twice = await c.post('/workflows', workflowBody(), { headers: { 'idempotency-key': ['a', 'b'] } });
      assert.equal(twice.json.code, 'idempotency_key_invalid');
      // Bytes a well-behaved client will not send: DEL, a C1 control (U+0085 in UTF-8), invalid UTF-8.
      const body = Buffer.from(JSON.stringify(workflowBody()));
      for (const keyBytes of [Buffer.from('a\x7fb', 'latin1'), Buffer.from('a\u0085b', 'utf8'), Buffer.from([0x6b, 0xc3, 0x28])]) {
        const head = Buffer.concat([
          Buffer.from(`POST /workflows HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: ${c.cookieHeader()}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\nIdempotency-Key: `),
          keyBytes,
          Buffer.from('\r\n\r\n'),
        ]);
        const res = await rawRequest(h().baseUrl, head, body);
        assert.equal(res.status, 400, keyBytes.toString('hex'));
        // DEL is refused by Node's HTTP parser itself (malformed_request); the others reach the key validation.
        assert.match(JSON.parse(res.body).code, /^(idempotency_key_invalid|malformed_request)$/, keyBytes.toString('hex'));
      }
    });

    it('accepts 255 bytes after trimming outer spaces, and multi-byte UTF-8', async () => {
      const c = await h().user();
      const padded = `  ${'k'.repeat(255)}  `;
      assert.equal((await c.post('/workflows', workflowBody(), { headers: { 'idempotency-key': padded } })).status, 201);
      const utf8 = Buffer.from(`clé-${crypto.randomUUID()}`, 'utf8').toString('latin1');
      assert.equal((await c.post('/workflows', workflowBody(), { headers: { 'idempotency-key': utf8 } })).status, 201);
    });

    it('treats the key trimmed of spaces as the same key', async () => {
      const c = await h().user();
      const k = crypto.randomUUID();
      const a = await c.post('/workflows', workflowBody(), { headers: { 'idempotency-key': k } });
      const b = await c.post('/workflows', workflowBody(), { headers: { 'idempotency-key': ` ${k}  ` } });
      assert.equal(b.text, a.text);
    });

    it('replays the original status and byte-identical body for a retry', async () => {
      const c = await h().user();
      const headers = key();
      const first = await c.post('/workflows', workflowBody(), { headers });
      // same logical request: key order and whitespace differ
      const body = workflowBody();
      const reordered = JSON.stringify(Object.fromEntries(Object.entries(body).reverse()), null, 2);
      const second = await c.send('POST', '/workflows', { rawBody: reordered, headers: { ...headers, 'content-type': 'application/json' } });
      assert.equal(second.status, 201);
      assert.equal(second.text, first.text);
      assert.equal(second.headers['idempotent-replayed'], 'true');
      assert.equal((await c.get('/workflows')).json.workflows.length, 1);
    });

    it('answers 409 when the key was used for a different request', async () => {
      const c = await h().user();
      const headers = key();
      const id = (await c.post('/workflows', workflowBody(), { headers })).json.id;
      const other = await c.post('/workflows', workflowBody({ name: 'Other' }), { headers });
      assert.equal(other.status, 409);
      assert.equal(other.json.code, 'idempotency_key_reused');
      const put = await c.put(`/workflows/${id}`, { name: 'x', payload: workflowBody().payload, interval: 5, max_consecutive_job_failures_allowed: 3 }, { headers });
      assert.equal(put.status, 409);
    });

    it('keeps keys per user', async () => {
      const a = await h().user();
      const b = await h().user();
      const headers = key();
      const ra = await a.post('/workflows', workflowBody(), { headers });
      const rb = await b.post('/workflows', workflowBody(), { headers });
      assert.equal(rb.status, 201);
      assert.notEqual(ra.json.id, rb.json.id);
    });

    it('does not record a request that failed, so it can be retried with the same key', async () => {
      const c = await h().user();
      const headers = key();
      const missing = await c.put(`/workflows/${crypto.randomUUID()}`, workflowBody({ kind: undefined }), { headers });
      assert.equal(missing.status, 404);
      const id = await create(c);
      const put = await c.put(`/workflows/${id}`, { ...workflowBody(), kind: undefined }, { headers });
      assert.equal(put.status, 204);
    });

    it('creates exactly one workflow for 20 concurrent identical requests with one key', async () => {
      const c = await h().user();
      const headers = key();
      const responses = await Promise.all(Array.from({ length: 20 }, () => c.post('/workflows', workflowBody(), { headers })));
      for (const r of responses) assert.equal(r.status, 201, r.text);
      assert.equal(new Set(responses.map((r) => r.text)).size, 1);
      assert.equal((await c.get('/workflows')).json.workflows.length, 1);
    });
  });

  describe('GET /workflows/{id}', () => {
    it("answers 404 for another user's workflow and for an unknown id", async () => {
      const owner = await h().user();
      const id = await create(owner);
      const other = await h().user();
      const res = await other.get(`/workflows/${id}`);
      assert.equal(res.status, 404);
      assert.equal(res.json.code, 'not_found');
      assert.equal((await owner.get(`/workflows/${crypto.randomUUID()}`)).status, 404);
    });

    it('answers 400 naming workflow_id when it is not a UUID', async () => {
      const c = await h().user();
      const res = await c.get('/workflows/not-a-uuid');
      assert.equal(res.status, 400);
      assert.deepEqual(fields(res), ['workflow_id']);
    });
  });

  describe('PUT /workflows/{id}', () => {
    const update = (overrides: Record<string, unknown> = {}) => ({
      name: 'Renamed',
      payload: JSON.stringify({ endpoint: 'https://example.com/v2' }),
      interval: 10,
      max_consecutive_job_failures_allowed: 5,
      ...overrides,
    });

    it('updates the fields, bumps generation and answers 204', async () => {
      const c = await h().user();
      const id = await create(c);
      const res = await c.put(`/workflows/${id}`, update(), { headers: key() });
      assert.equal(res.status, 204);
      assert.equal(res.text, '');
      const w = (await c.get(`/workflows/${id}`)).json;
      assert.equal(w.name, 'Renamed');
      assert.equal(w.interval, 10);
      assert.equal(w.max_consecutive_job_failures_allowed, 5);
      assert.equal(w.generation, 1);
      assert.equal(w.kind, 'HEARTBEAT');
      await c.put(`/workflows/${id}`, update(), { headers: key() });
      assert.equal((await c.get(`/workflows/${id}`)).json.generation, 2);
    });

    it('validates the payload against the existing kind', async () => {
      const c = await h().user();
      const id = await create(c, { kind: 'CONTAINER', payload: containerPayload() });
      const res = await c.put(`/workflows/${id}`, update(), { headers: key() });
      assert.equal(res.status, 400);
      assert.deepEqual(fields(res), ['payload.endpoint', 'payload.image']);
      assert.equal((await c.get(`/workflows/${id}`)).json.generation, 0);
    });

    it('refuses a kind change and unknown fields with 400', async () => {
      const c = await h().user();
      const id = await create(c);
      const res = await c.put(`/workflows/${id}`, update({ kind: 'CONTAINER' }), { headers: key() });
      assert.equal(res.status, 400);
      assert.deepEqual(fields(res), ['kind']);
    });

    it('reactivates a terminated workflow and rebuilds it', async () => {
      const c = await h().user();
      const id = await create(c);
      assert.equal((await c.patch(`/workflows/${id}`)).status, 204);
      assert.equal((await c.put(`/workflows/${id}`, update(), { headers: key() })).status, 204);
      const w = (await c.get(`/workflows/${id}`)).json;
      assert.equal(w.terminated_at, undefined);
      assert.equal(w.build_status, 'QUEUED');
      assert.equal(w.consecutive_job_failures_count, 0);
    });

    it("answers 404 for another user's workflow and changes nothing", async () => {
      const owner = await h().user();
      const id = await create(owner);
      const other = await h().user();
      assert.equal((await other.put(`/workflows/${id}`, update(), { headers: key() })).status, 404);
      assert.equal((await owner.get(`/workflows/${id}`)).json.name, 'Homepage check');
    });

    it('needs an Idempotency-Key', async () => {
      const c = await h().user();
      const id = await create(c);
      assert.equal((await c.put(`/workflows/${id}`, update())).json.code, 'idempotency_key_missing');
    });
  });

  describe('PATCH /workflows/{id} (terminate)', () => {
    it('terminates an active workflow (204) and answers 412 the second time', async () => {
      const c = await h().user();
      const id = await create(c);
      const res = await c.patch(`/workflows/${id}`);
      assert.equal(res.status, 204);
      const w = (await c.get(`/workflows/${id}`)).json;
      assert.ok(w.terminated_at);
      assert.equal(w.build_status, 'CANCELED');
      const again = await c.patch(`/workflows/${id}`);
      assert.equal(again.status, 412);
      assert.equal(again.json.code, 'workflow_terminated');
    });

    it('lets exactly one of concurrent terminations succeed', async () => {
      const c = await h().user();
      const id = await create(c);
      const statuses = (await Promise.all(Array.from({ length: 5 }, () => c.patch(`/workflows/${id}`)))).map((r) => r.status).sort();
      assert.deepEqual(statuses, [204, 412, 412, 412, 412]);
    });

    it("answers 404 for another user's workflow", async () => {
      const owner = await h().user();
      const id = await create(owner);
      assert.equal((await (await h().user()).patch(`/workflows/${id}`)).status, 404);
      assert.equal((await owner.get(`/workflows/${id}`)).json.terminated_at, undefined);
    });
  });

  describe('DELETE /workflows/{id}', () => {
    it('answers 412 workflow_active for an active workflow, 204 once terminated, then 404', async () => {
      const c = await h().user();
      const id = await create(c);
      const active = await c.delete(`/workflows/${id}`);
      assert.equal(active.status, 412);
      assert.equal(active.json.code, 'workflow_active');
      await c.patch(`/workflows/${id}`);
      assert.equal((await c.delete(`/workflows/${id}`)).status, 204);
      assert.equal((await c.get(`/workflows/${id}`)).status, 404);
      assert.equal((await c.delete(`/workflows/${id}`)).status, 404);
    });

    it("answers 404 for another user's workflow", async () => {
      const owner = await h().user();
      const id = await create(owner);
      await owner.patch(`/workflows/${id}`);
      assert.equal((await (await h().user()).delete(`/workflows/${id}`)).status, 404);
      assert.equal((await owner.get(`/workflows/${id}`)).status, 200);
    });
  });

  describe('GET /workflows', () => {
    let c: TestClient;
    const all: { id: string; name: string; kind: string; interval: number; terminated: boolean }[] = [];

    before(async () => {
      c = await h().user();
      // 55 workflows: mixed kinds, intervals and names; every fifth terminated.
      for (let i = 0; i < 55; i++) {
        const kind = i % 3 === 0 ? 'CONTAINER' : 'HEARTBEAT';
        const name = i % 4 === 0 ? `Alpha_${i}%` : `beta ${i}`;
        const interval = (i % 7) + 1;
        const id = await create(c, {
          name,
          kind,
          interval,
          payload: kind === 'CONTAINER' ? containerPayload() : workflowBody().payload,
        });
        const terminated = i % 5 === 0;
        if (terminated) assert.equal((await c.patch(`/workflows/${id}`)).status, 204);
        all.push({ id, name, kind, interval, terminated });
      }
      all.reverse(); // newest first
    });

    async function pages(query: string, limit?: number): Promise<string[]> {
      const ids: string[] = [];
      let cursor = '';
      for (let n = 0; n < 100; n++) {
        const qs = new URLSearchParams(query);
        if (cursor) qs.set('cursor', cursor);
        if (limit) qs.set('limit', String(limit));
        const res = await c.get(`/workflows?${qs}`);
        assert.equal(res.status, 200, res.text);
        assert.ok(res.json.workflows.length <= (limit ?? 20));
        ids.push(...res.json.workflows.map((w: { id: string }) => w.id));
        cursor = res.json.cursor;
        if (cursor === '') return ids;
      }
      throw new Error('pagination did not end');
    }

    const filters: [string, (w: (typeof all)[number]) => boolean][] = [
      ['', (w) => !w.terminated],
      ['terminated=true', (w) => w.terminated],
      ['terminated=false', (w) => !w.terminated],
      ['kind=CONTAINER', (w) => !w.terminated && w.kind === 'CONTAINER'],
      ['kind=HEARTBEAT&terminated=true', (w) => w.terminated && w.kind === 'HEARTBEAT'],
      ['build_status=QUEUED', (w) => !w.terminated],
      ['build_status=CANCELED&terminated=true', (w) => w.terminated],
      ['build_status=COMPLETED', () => false],
      ['query=alpha_', (w) => !w.terminated && w.name.toLowerCase().includes('alpha_')],
      ['query=%25', (w) => !w.terminated && w.name.includes('%')],
      ['query=BETA%201', (w) => !w.terminated && w.name.toLowerCase().includes('beta 1')],
      ['interval_min=3', (w) => !w.terminated && w.interval >= 3],
      ['interval_max=2', (w) => !w.terminated && w.interval <= 2],
      ['interval_min=2&interval_max=4', (w) => !w.terminated && w.interval >= 2 && w.interval <= 4],
      ['interval_min=0&interval_max=0', (w) => !w.terminated],
      ['kind=HEARTBEAT&interval_min=4&query=beta', (w) => !w.terminated && w.kind === 'HEARTBEAT' && w.interval >= 4 && w.name.includes('beta')],
    ];
    for (const [query, predicate] of filters) {
      it(`pages through every match newest first with no gap or repeat: ${query || '(no filter)'}`, async () => {
        const expected = all.filter(predicate).map((w) => w.id);
        assert.deepEqual(await pages(query), expected);
        assert.deepEqual(await pages(query, 7), expected);
      });
    }

    it('answers the list shape without generation and an empty cursor on the last page', async () => {
      const res = await c.get('/workflows?limit=100');
      assert.equal(res.json.cursor, '');
      assert.equal(res.json.workflows[0].generation, undefined);
      assert.equal(typeof res.json.workflows[0].log_retention, 'boolean');
    });

    it("never lists another user's workflows", async () => {
      const other = await h().user();
      const res = await other.get('/workflows');
      assert.deepEqual(res.json, { workflows: [], cursor: '' });
    });

    it('answers 400 for bad filters, naming each', async () => {
      const bad: [string, string[]][] = [
        ['kind=CRON', ['kind']],
        ['build_status=DONE', ['build_status']],
        ['terminated=yes', ['terminated']],
        ['terminated=1', ['terminated']],
        ['interval_min=-1', ['interval_min']],
        ['interval_max=2147483648', ['interval_max']],
        ['interval_min=1.5', ['interval_min']],
        ['interval_min=5&interval_max=4', ['interval_max']],
        ['limit=0', ['limit']],
        ['limit=101', ['limit']],
        ['kind=HEARTBEAT&kind=CONTAINER', ['kind']],
        ['cursor=garbage!', ['cursor']],
        ['cursor=eyJsIjoieCJ9', ['cursor']],
      ];
      for (const [qs, expected] of bad) {
        const res = await c.get(`/workflows?${qs}`);
        assert.equal(res.status, 400, qs);
        assert.deepEqual(fields(res), expected, qs);
      }
    });

    it('refuses a cursor produced for another list', async () => {
      const foreign = Buffer.from(JSON.stringify({ l: 'jobs', k: 1, i: crypto.randomUUID() })).toString('base64url');
      assert.equal((await c.get(`/workflows?cursor=${foreign}`)).status, 400);
    });
  });

  describe('effects on jobs', () => {
    const job = async (workflowId: string, status: JobStatus, generation = 0) =>
      (await insertJob(h().db.store, workflowId, status, { at: Date.now(), generation, containerId: null })).id;

    it('PUT cancels PENDING and QUEUED jobs of the older generation with WORKFLOW_UPDATED; a RUNNING job goes on', async () => {
      const c = await h().user();
      const id = await create(c);
      const pending = await job(id, 'PENDING');
      const running = await job(id, 'RUNNING');
      assert.equal((await c.put(`/workflows/${id}`, { ...workflowBody(), kind: undefined }, { headers: key() })).status, 204);
      const p = await h().db.store.jobs.findById(pending);
      assert.equal(p?.status, 'CANCELED');
      assert.equal(p?.statusReasonCode, 'WORKFLOW_UPDATED');
      assert.equal((await h().db.store.jobs.findById(running))?.status, 'RUNNING');
    });

    it('PATCH cancels open jobs with WORKFLOW_TERMINATED', async () => {
      const c = await h().user();
      const id = await create(c);
      const pending = await job(id, 'PENDING');
      assert.equal((await c.patch(`/workflows/${id}`)).status, 204);
      const p = await h().db.store.jobs.findById(pending);
      assert.equal(p?.status, 'CANCELED');
      assert.equal(p?.statusReasonCode, 'WORKFLOW_TERMINATED');
    });

    it('DELETE answers 412 workflow_has_running_jobs while a job runs, and deletes the jobs with the workflow', async () => {
      const c = await h().user();
      const id = await create(c);
      const running = await job(id, 'RUNNING');
      await c.patch(`/workflows/${id}`);
      const res = await c.delete(`/workflows/${id}`);
      assert.equal(res.status, 412);
      assert.equal(res.json.code, 'workflow_has_running_jobs');
      await h().db.store.jobMoves.transition(running, 'CANCELED', Date.now());
      assert.equal((await c.delete(`/workflows/${id}`)).status, 204);
      assert.equal(await h().db.store.jobs.findById(running), undefined);
    });
  });

  describe('GET /workflows after changes elsewhere', () => {
    let replica: ApiServer;
    let replicaDb: DatabaseHandle;

    before(async () => {
      // Another api process over the same database: its own connections, its own page cache.
      replicaDb = openDatabase(h().db.url);
      replica = new ApiServer({ store: Store.fromHandle(replicaDb), config: h().config, clock: systemClock, logger: silentLogger });
    });
    after(async () => {
      await replica.stop();
      await replicaDb.close();
    });

    it('shows every change at once, whichever replica or role made it', async () => {
      const c = await h().user();
      const { port } = await replica.start();
      const elsewhere = new TestClient(`http://127.0.0.1:${port}`);
      for (const [name, value] of c.cookies) elsewhere.cookies.set(name, value);
      const listed = async (client: TestClient) => {
        const res = await client.get('/workflows');
        assert.equal(res.status, 200, res.text);
        assert.match(String(res.headers['content-type']), /^application\/json; charset=utf-8$/);
        return res.json.workflows as Record<string, unknown>[];
      };
      const id = await create(c);
      assert.equal((await listed(c))[0]?.build_status, 'QUEUED');
      assert.equal((await listed(elsewhere))[0]?.build_status, 'QUEUED');
      // The scheduler builds it and counts a failed job: writes of another role.
      const { workflows } = h().db.store;
      const token = await workflows.startBuild(id, 0, Date.now());
      await workflows.finishBuild(id, token!, true, Date.now());
      await workflows.recordFailure(id, Date.now());
      for (const client of [c, elsewhere]) {
        const [w] = await listed(client);
        assert.equal(w?.build_status, 'COMPLETED');
        assert.equal(w?.consecutive_job_failures_count, 1);
      }
      // Renamed through the replica: this api's cached page is stale and must not be sent.
      const { kind: _kind, ...renamed } = workflowBody({ name: 'Renamed' });
      const put = await elsewhere.put(`/workflows/${id}`, renamed, { headers: key() });
      assert.equal(put.status, 204, put.text);
      assert.equal((await listed(c))[0]?.name, 'Renamed');
      assert.equal((await c.patch(`/workflows/${id}`)).status, 204);
      assert.deepEqual(await listed(c), []);
      assert.equal((await listed(elsewhere)).length, 0);
    });
  });
});
