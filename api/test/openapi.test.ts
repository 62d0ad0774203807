import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { systemClock } from '@orloj/common/core';
import { reasons, WINDOWS_PER_USER_MAX, type Job } from '@orloj/common/domain';
import { silentLogger } from '@orloj/common/logging';
import { ApiServer, openApiDocument } from '@orloj/api';
import { TestClient, type HttpResponse } from './support/client.js';
import { describeApi, key, testConfig, uniqueEmail, workflowBody } from './support/harness.js';
import { insertJob } from '@orloj/common/test-support';
import { containerWorkflow, insertLines, lines } from './support/logs.js';
import { seedNotifications, userIdOf } from './support/notifications.js';
import { endJob } from '@orloj/notifier/test-support';
import { Conformance, doc, fill, METHODS, newAjv, openApi31Validator, operations, pointer, schemaAt } from './support/conformance.js';

/**
 * The OpenAPI document stays true: it is a valid OpenAPI 3.1 document, every
 * route it lists is served, and every response a real server gives on those
 * routes (success and error paths) is one it documents, body and headers
 * included.
 */
const BIG = 4 * 1024 * 1024 + 1;
const JSON_TYPE = { 'content-type': 'application/json' };

type Json = Record<string, any>;

function walk(value: unknown, visit: (node: Json, path: string) => void, path = '#'): void {
  if (Array.isArray(value)) value.forEach((v, i) => walk(v, visit, `${path}/${i}`));
  else if (value && typeof value === 'object') {
    visit(value as Json, path);
    for (const [k, v] of Object.entries(value)) walk(v, visit, `${path}/${k.replace(/~/g, '~0').replace(/\//g, '~1')}`);
  }
}

function resolvePointer(ref: string): unknown {
  assert.ok(ref.startsWith('#/'), `only local $refs are expected: ${ref}`);
  let node: unknown = doc;
  for (const raw of ref.slice(2).split('/')) {
    const seg = decodeURIComponent(raw).replace(/~1/g, '/').replace(/~0/g, '~');
    node = node && typeof node === 'object' ? (node as Json)[seg] : undefined;
  }
  return node;
}

describe('openapi document (static)', () => {
  it('is a valid OpenAPI 3.1 document per the official schema', () => {
    const validate = openApi31Validator();
    assert.ok(validate(doc), JSON.stringify(validate.errors, null, 1));
    assert.equal(doc.openapi, '3.1.0');
  });

  it('the official schema does catch broken documents (sanity check of the check)', () => {
    const validate = openApi31Validator();
    const broken = JSON.parse(JSON.stringify(doc)) as Json;
    broken.paths['/users'].get.responses = { ok: { description: 'x' } };
    assert.equal(validate(broken), false);
  });

  it('every $ref resolves', () => {
    const refs: string[] = [];
    walk(doc, (node, path) => {
      if (typeof node.$ref === 'string') {
        refs.push(node.$ref);
        assert.ok(resolvePointer(node.$ref) !== undefined, `${path}: $ref ${node.$ref} does not resolve`);
      }
    });
    assert.ok(refs.length > 10);
  });

  it('every component schema, parameter schema and media-type schema compiles (JSON Schema 2020-12)', () => {
    for (const name of Object.keys(doc.components.schemas as Json)) schemaAt('components', 'schemas', name);
    // The body schemas also compile on their own (as published, with formats).
    for (const [name, schema] of Object.entries(doc.components.schemas as Json)) {
      if (!JSON.stringify(schema).includes('$ref')) newAjv().compile(schema as Json);
      else assert.ok(name);
    }
    let count = 0;
    walk(doc.paths, (node, path) => {
      if (node.schema && typeof node.schema === 'object' && (path.includes('/content/') || path.includes('/parameters/') || path.includes('/headers/'))) {
        const segments = path
          .slice(2)
          .split('/')
          .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
        schemaAt('paths', ...segments, 'schema');
        count++;
      }
    });
    assert.ok(count > 20, `only ${count} schemas found`);
    assert.ok(pointer('paths', '/workflows/{workflow_id}').includes('~1workflows~1%7Bworkflow_id%7D'));
  });

  it('every operation lists responses with a 2xx, declares its path parameters, and lists 401 when it needs a session', () => {
    for (const { template, method, op } of operations()) {
      const where = `${method.toUpperCase()} ${template}`;
      const statuses = Object.keys(op.responses as Json);
      assert.ok(statuses.length > 0, `${where}: no responses`);
      assert.ok(statuses.some((s) => /^2\d\d$/.test(s)), `${where}: no success response`);
      assert.ok(op.summary, `${where}: no summary`);
      const params = [...((doc.paths[template].parameters ?? []) as Json[]), ...((op.parameters ?? []) as Json[])];
      const inPath = [...template.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]);
      for (const name of inPath) {
        assert.ok(
          params.some((p) => p.in === 'path' && p.name === name && p.required === true),
          `${where}: path parameter ${name} is not declared`,
        );
      }
      for (const p of params.filter((q) => q.in === 'path')) assert.ok(inPath.includes(p.name), `${where}: ${p.name} is not in the path`);
      if (op.security?.length) {
        assert.ok(op.responses['401'], `${where}: needs a session but lists no 401`);
        assert.ok(op.responses['429'], `${where}: lists no 429`);
      }
      if (op.security?.some((s: Json) => 'csrf' in s)) assert.ok(op.responses['403'], `${where}: needs CSRF but lists no 403`);
      if (op.parameters?.some((p: Json) => p.name === 'Idempotency-Key')) {
        assert.ok(op.responses['400'] && op.responses['409'], `${where}: Idempotency-Key without 400 and 409`);
      }
      if (op.requestBody) assert.ok(op.responses['400'] && op.responses['413'], `${where}: a JSON body without 400 and 413`);
      for (const [status, r] of Object.entries(op.responses as Json)) {
        if (/^[45]/.test(status)) {
          assert.deepEqual(Object.keys(r.content ?? {}), ['application/problem+json'], `${where} ${status}: not problem details`);
        }
      }
    }
  });
});

describeApi('openapi document matches real responses', (h) => {
  const conf = new Conformance();
  const check = (method: string, template: string, res: HttpResponse) => conf.expectConforms(method, template, res);
  const other = async () => h().user();
  const withoutCsrf = (c: TestClient) => {
    const n = c.clone();
    n.cookies.delete('csrf');
    return n;
  };

  it('GET /openapi.json serves the document', async () => {
    for (const prefix of ['', '/api']) {
      const res = await h().client().get(`${prefix}/openapi.json`);
      check('get', '/openapi.json', res);
      assert.deepEqual(res.json, JSON.parse(JSON.stringify(openApiDocument)));
    }
  });

  it('serves every documented route (never route_not_found), at / and below /api', async () => {
    for (const prefix of ['', '/api']) {
      for (const { template, method } of operations()) {
        const res = await h().client().send(method.toUpperCase(), prefix + fill(template));
        assert.notEqual(res.json?.code, 'route_not_found', `${method} ${prefix}${template} is documented but not served`);
        assert.notEqual(res.status, 405, `${method} ${prefix}${template} is documented but answers 405`);
        check(method, template, res);
      }
    }
  });

  it('answers 405 with Allow naming exactly the documented methods on each documented path', async () => {
    const c = await h().user();
    for (const [template, item] of Object.entries(doc.paths as Json)) {
      const documented = METHODS.filter((m) => m in item).map((m) => m.toUpperCase());
      const missing = ['GET', 'PUT', 'POST', 'DELETE', 'PATCH'].filter((m) => !documented.includes(m));
      for (const m of missing) {
        const res = await c.send(m, fill(template), { headers: key() });
        assert.equal(res.status, 405, `${m} ${template}`);
        assert.equal(res.headers['content-type'], 'application/problem+json');
        assert.ok(schemaAt('components', 'schemas', 'Problem')(res.json), res.text);
        const allow = String(res.headers.allow ?? '')
          .split(',')
          .map((s) => s.trim())
          .filter((s) => s && s !== 'HEAD' && s !== 'OPTIONS')
          .sort();
        assert.deepEqual(allow, [...documented].sort(), `${template}: Allow lists undocumented methods (or misses documented ones)`);
      }
    }
  });

  it('answers OPTIONS on each documented path with Allow, and no problem Content-Type on the empty 2xx', async () => {
    for (const [template, item] of Object.entries(doc.paths as Json)) {
      const documented = METHODS.filter((m) => m in item).map((m) => m.toUpperCase());
      const res = await h().client().send('OPTIONS', fill(template));
      assert.ok(res.status === 200 || res.status === 204, `OPTIONS ${template} → ${res.status}`);
      const allow = String(res.headers.allow ?? '')
        .split(',')
        .map((s) => s.trim())
        .filter((s) => s && s !== 'HEAD' && s !== 'OPTIONS')
        .sort();
      assert.deepEqual(allow, [...documented].sort(), `OPTIONS ${template}: Allow`);
      assert.equal(res.text, '');
      assert.doesNotMatch(
        String(res.headers['content-type'] ?? ''),
        /problem\+json/,
        `OPTIONS ${template} → ${res.status} with an empty body labelled ${String(res.headers['content-type'])}`,
      );
    }
  });

  describe('auth', () => {
    it('POST /auth/register: 201, 400, 403, 409, 413', async () => {
      const c = h().client();
      const body = { email: uniqueEmail(), password: 'correct horse' };
      conf.expectRequestConforms('post', '/auth/register', body);
      const res = await c.post('/auth/register', body);
      assert.equal(res.status, 201);
      check('post', '/auth/register', res);
      assert.equal(res.setCookies.length, 2);
      check('post', '/auth/register', await c.post('/auth/register', { ...body, email: body.email.toUpperCase() }));
      assert.equal((await c.post('/auth/register', body)).status, 409);
      for (const bad of [{ email: 'not-an-email', password: 'correct horse' }, { email: uniqueEmail(), password: 'short' }, {}, [], 'x']) {
        const r = await c.post('/auth/register', bad);
        assert.equal(r.status, 400);
        check('post', '/auth/register', r);
      }
      check('post', '/auth/register', await c.post('/auth/register', undefined, { rawBody: '{"email":', headers: JSON_TYPE }));
      check('post', '/auth/register', await c.post('/auth/register', undefined, { rawBody: 'email=a', headers: { 'content-type': 'text/plain' } }));
      const big = await c.post('/auth/register', undefined, { rawBody: Buffer.alloc(BIG, 32), headers: JSON_TYPE });
      assert.equal(big.status, 413);
      check('post', '/auth/register', big);
      // A foreign origin here; registration closed and invitations: api/test/registration.test.ts.
      const foreign = await c.post('/auth/register', { email: uniqueEmail(), password: 'correct horse' }, { headers: { origin: 'http://evil.example' } });
      assert.equal(foreign.status, 403);
      check('post', '/auth/register', foreign);
    });

    it('POST /auth/login: 200, 400, 401 (unknown email and wrong password alike), 413', async () => {
      const u = await h().user();
      const c = h().client();
      const body = { email: u.email, password: 'correct horse' };
      conf.expectRequestConforms('post', '/auth/login', body);
      const ok = await c.post('/auth/login', body);
      assert.equal(ok.status, 200);
      check('post', '/auth/login', ok);
      const wrong = await c.post('/auth/login', { ...body, password: 'wrong horse' });
      const unknown = await c.post('/auth/login', { email: uniqueEmail(), password: 'correct horse' });
      assert.equal(wrong.status, 401);
      assert.equal(wrong.text, unknown.text);
      check('post', '/auth/login', wrong);
      check('post', '/auth/login', unknown);
      check('post', '/auth/login', await c.post('/auth/login', { email: u.email }));
      check('post', '/auth/login', await c.post('/auth/login', undefined, { rawBody: Buffer.alloc(BIG, 32), headers: JSON_TYPE }));
    });

    it('POST /auth/validate: 200, 401, 403', async () => {
      const u = await h().user();
      const ok = await u.post('/auth/validate');
      assert.equal(ok.status, 200);
      assert.equal(ok.json.email, u.email);
      check('post', '/auth/validate', ok);
      check('post', '/auth/validate', await h().client().post('/auth/validate'));
      const noCsrf = await withoutCsrf(u).post('/auth/validate');
      assert.equal(noCsrf.status, 403);
      check('post', '/auth/validate', noCsrf);
      const badHeader = await u.post('/auth/validate', undefined, { headers: { 'x-csrf-token': 'nope' } });
      assert.equal(badHeader.status, 403);
      check('post', '/auth/validate', badHeader);
      const crossSite = await u.post('/auth/validate', undefined, { headers: { origin: 'https://evil.example' } });
      assert.equal(crossSite.status, 403);
      check('post', '/auth/validate', crossSite);
      const stale = await h().client().post('/auth/validate', undefined, { headers: { cookie: 'session=garbage; csrf=1.x' } });
      assert.equal(stale.status, 401);
      check('post', '/auth/validate', stale);
    });

    it('POST /auth/logout: 204 (cookies expired), then 401; 403 without CSRF', async () => {
      const u = await h().user();
      check('post', '/auth/logout', await withoutCsrf(u).post('/auth/logout'));
      const res = await u.post('/auth/logout');
      assert.equal(res.status, 204);
      check('post', '/auth/logout', res);
      assert.ok(res.setCookies.every((c) => /max-age=0/i.test(c)));
      assert.equal(u.cookies.size, 0);
      const again = await h().client().post('/auth/logout');
      assert.equal(again.status, 401);
      check('post', '/auth/logout', again);
    });
  });

  describe('users', () => {
    it('GET /users: 200, 401', async () => {
      const u = await h().user();
      const res = await u.get('/users');
      assert.equal(res.status, 200);
      check('get', '/users', res);
      check('get', '/users', await u.get('/api/users'));
      check('get', '/users', await h().client().get('/users'));
    });

    it('PUT /users: 204, 400, 401, 403, 413', async () => {
      const u = await h().user();
      const body = { notification_preference: 'NONE' };
      conf.expectRequestConforms('put', '/users', body);
      const res = await u.put('/users', body);
      assert.equal(res.status, 204);
      check('put', '/users', res);
      assert.equal((await u.get('/users')).json.notification_preference, 'NONE');
      for (const bad of [{ notification_preference: 'SOME' }, {}, { notification_preference: 'ALL', x: 1 }]) {
        const r = await u.put('/users', bad);
        assert.equal(r.status, 400);
        check('put', '/users', r);
      }
      check('put', '/users', await u.put('/users', undefined));
      check('put', '/users', await h().client().put('/users', body));
      check('put', '/users', await withoutCsrf(u).put('/users', body));
      const big = await u.put('/users', undefined, { rawBody: Buffer.alloc(BIG, 32), headers: JSON_TYPE });
      assert.equal(big.status, 413);
      check('put', '/users', big);
    });
  });

  describe('workflows', () => {
    it('POST /workflows: 201 (and replay), 400, 401, 403, 409, 413', async () => {
      const u = await h().user();
      const heartbeat = workflowBody();
      const container = workflowBody({
        name: 'Nightly',
        kind: 'CONTAINER',
        payload: JSON.stringify({ image: 'alpine:3.20', cmd: ['echo', 'hi'], env: { A: 'b' }, timeout: '1m' }),
        log_retention: false,
      });
      for (const body of [heartbeat, container]) {
        conf.expectRequestConforms('post', '/workflows', body);
        const k = key();
        const res = await u.post('/workflows', body, { headers: k });
        assert.equal(res.status, 201);
        check('post', '/workflows', res);
        const replay = await u.post('/workflows', body, { headers: k });
        assert.equal(replay.status, 201);
        assert.equal(replay.headers['idempotent-replayed'], 'true');
        assert.equal(replay.text, res.text);
        check('post', '/workflows', replay);
        const reused = await u.post('/workflows', { ...body, name: 'Other' }, { headers: k });
        assert.equal(reused.status, 409);
        check('post', '/workflows', reused);
      }
      const bad: [unknown, Record<string, string>][] = [
        [heartbeat, {}],
        [heartbeat, { 'idempotency-key': '   ' }],
        [heartbeat, { 'idempotency-key': 'x'.repeat(256) }],
        [workflowBody({ interval: 0 }), key()],
        [workflowBody({ kind: 'CRON' }), key()],
        [workflowBody({ payload: '{}' }), key()],
        [workflowBody({ payload: 'not json' }), key()],
        [workflowBody({ payload: JSON.stringify({ endpoint: 'ftp://x' }) }), key()],
        [workflowBody({ log_retention: true }), key()],
        [workflowBody({ extra: 1 }), key()],
        [{ ...container, payload: JSON.stringify({ image: 'Not An Image!' }) }, key()],
      ];
      for (const [body, headers] of bad) {
        const r = await u.post('/workflows', body, { headers });
        assert.equal(r.status, 400, JSON.stringify(body));
        check('post', '/workflows', r);
      }
      check('post', '/workflows', await u.post('/workflows', undefined, { rawBody: '{', headers: { ...key(), ...JSON_TYPE } }));
      check('post', '/workflows', await h().client().post('/workflows', heartbeat, { headers: key() }));
      const noCsrf = await withoutCsrf(u).post('/workflows', heartbeat, { headers: key() });
      assert.equal(noCsrf.status, 403);
      check('post', '/workflows', noCsrf);
      const big = await u.post('/workflows', undefined, { rawBody: Buffer.alloc(BIG, 32), headers: { ...key(), ...JSON_TYPE } });
      assert.equal(big.status, 413);
      check('post', '/workflows', big);
    });

    it('GET /workflows: 200 with every filter and paging, 400, 401', async () => {
      const u = await h().user();
      const ids: string[] = [];
      for (let i = 0; i < 3; i++) {
        const r = await u.post('/workflows', workflowBody({ name: `Check ${i}`, interval: 10 + i }), { headers: key() });
        ids.push(r.json.id as string);
      }
      assert.equal((await u.patch(`/workflows/${ids[0]}`)).status, 204);
      const queries = [
        '',
        '?limit=1',
        '?terminated=true',
        '?terminated=false&kind=HEARTBEAT&build_status=QUEUED',
        '?query=check&interval_min=11&interval_max=12',
        '?interval_min=0&interval_max=0',
        '?kind=CONTAINER',
        '?cache_buster=1',
        '?sort=attention&attention=building&limit=1',
        '?sort=newest&include_terminated=true',
      ];
      for (const q of queries) {
        const res = await u.get(`/workflows${q}`);
        assert.equal(res.status, 200, q);
        check('get', '/workflows', res);
      }
      const first = await u.get('/workflows?limit=1');
      assert.ok(first.json.cursor);
      const second = await u.get(`/workflows?limit=1&cursor=${first.json.cursor}`);
      check('get', '/workflows', second);
      assert.equal(second.json.workflows.length, 1);
      const terminated = await u.get('/workflows?terminated=true');
      assert.ok(terminated.json.workflows[0].terminated_at);
      for (const q of ['?kind=cron', '?terminated=yes', '?interval_min=-1', '?interval_min=5&interval_max=4', '?cursor=%%%', '?limit=0', '?kind=HEARTBEAT&kind=CONTAINER', `?cursor=${Buffer.from('{"l":"jobs","k":1,"i":"x"}').toString('base64url')}`]) {
        const r = await u.get(`/workflows${q}`);
        assert.equal(r.status, 400, q);
        check('get', '/workflows', r);
      }
      check('get', '/workflows', await h().client().get('/workflows'));
      const byAttention = await u.get('/workflows?sort=attention&limit=1');
      check('get', '/workflows', await u.get(`/workflows?sort=attention&limit=1&cursor=${byAttention.json.cursor}`));
      for (const q of ['?sort=worst', '?attention=late', `?sort=attention&cursor=${first.json.cursor}`]) {
        const r = await u.get(`/workflows${q}`);
        assert.equal(r.status, 400, q);
        check('get', '/workflows', r);
      }
      // issue 26: the counts per attention state
      check('get', '/workflow-summary', await u.get('/workflow-summary'));
      check('get', '/workflow-summary', await h().client().get('/workflow-summary'));
    });

    it('GET /workflows/{workflow_id}: 200 (with generation), 400, 401, 404', async () => {
      const u = await h().user();
      const id = (await u.post('/workflows', workflowBody(), { headers: key() })).json.id as string;
      const res = await u.get(`/workflows/${id}`);
      assert.equal(res.status, 200);
      assert.equal(res.json.generation, 0);
      check('get', '/workflows/{workflow_id}', res);
      check('get', '/workflows/{workflow_id}', await u.get('/workflows/not-a-uuid'));
      check('get', '/workflows/{workflow_id}', await u.get(`/workflows/${id.toUpperCase()}`));
      check('get', '/workflows/{workflow_id}', await u.get(`/workflows/${crypto.randomUUID()}`));
      const stranger = await (await other()).get(`/workflows/${id}`);
      assert.equal(stranger.status, 404);
      check('get', '/workflows/{workflow_id}', stranger);
      check('get', '/workflows/{workflow_id}', await h().client().get(`/workflows/${id}`));
    });

    it('PUT /workflows/{workflow_id}: 204 (and replay), 400, 401, 403, 404, 409, 413', async () => {
      const u = await h().user();
      const id = (await u.post('/workflows', workflowBody(), { headers: key() })).json.id as string;
      const update = { name: 'Renamed', payload: JSON.stringify({ endpoint: 'https://example.com/up', timeout: '5s' }), interval: 60, max_consecutive_job_failures_allowed: 5 };
      conf.expectRequestConforms('put', '/workflows/{workflow_id}', update);
      const k = key();
      const res = await u.put(`/workflows/${id}`, update, { headers: k });
      assert.equal(res.status, 204);
      check('put', '/workflows/{workflow_id}', res);
      const replay = await u.put(`/workflows/${id}`, update, { headers: k });
      assert.equal(replay.headers['idempotent-replayed'], 'true');
      check('put', '/workflows/{workflow_id}', replay);
      const reused = await u.put(`/workflows/${id}`, { ...update, interval: 61 }, { headers: k });
      assert.equal(reused.status, 409);
      check('put', '/workflows/{workflow_id}', reused);
      const read = await u.get(`/workflows/${id}`);
      assert.equal(read.json.generation, 1);
      check('get', '/workflows/{workflow_id}', read);
      for (const [path, body, headers] of [
        [`/workflows/${id}`, { ...update, kind: 'HEARTBEAT' }, key()],
        [`/workflows/${id}`, { ...update, interval: 10081 }, key()],
        [`/workflows/${id}`, { ...update, payload: '{"image":"alpine"}' }, key()],
        [`/workflows/${id}`, update, {}],
        ['/workflows/123', update, key()],
      ] as [string, unknown, Record<string, string>][]) {
        const r = await u.put(path, body, { headers });
        assert.equal(r.status, 400, JSON.stringify(body));
        check('put', '/workflows/{workflow_id}', r);
      }
      const missing = await u.put(`/workflows/${crypto.randomUUID()}`, update, { headers: key() });
      assert.equal(missing.status, 404);
      check('put', '/workflows/{workflow_id}', missing);
      const stranger = await (await other()).put(`/workflows/${id}`, update, { headers: key() });
      assert.equal(stranger.status, 404);
      check('put', '/workflows/{workflow_id}', stranger);
      check('put', '/workflows/{workflow_id}', await h().client().put(`/workflows/${id}`, update, { headers: key() }));
      check('put', '/workflows/{workflow_id}', await withoutCsrf(u).put(`/workflows/${id}`, update, { headers: key() }));
      const big = await u.put(`/workflows/${id}`, undefined, { rawBody: Buffer.alloc(BIG, 32), headers: { ...key(), ...JSON_TYPE } });
      assert.equal(big.status, 413);
      check('put', '/workflows/{workflow_id}', big);
    });

    it('PATCH and DELETE /workflows/{workflow_id}: 204, 400, 401, 403, 404, 412', async () => {
      const u = await h().user();
      const id = (await u.post('/workflows', workflowBody(), { headers: key() })).json.id as string;
      const path = `/workflows/${id}`;
      const active = await u.delete(path);
      assert.equal(active.status, 412);
      assert.equal(active.json.code, 'workflow_active');
      check('delete', '/workflows/{workflow_id}', active);
      for (const m of ['patch', 'delete'] as const) {
        check(m, '/workflows/{workflow_id}', await h().client().send(m.toUpperCase(), path));
        check(m, '/workflows/{workflow_id}', await withoutCsrf(u).send(m.toUpperCase(), path));
        check(m, '/workflows/{workflow_id}', await u.send(m.toUpperCase(), '/workflows/nope'));
        check(m, '/workflows/{workflow_id}', await u.send(m.toUpperCase(), `/workflows/${crypto.randomUUID()}`));
        const stranger = await (await other()).send(m.toUpperCase(), path);
        assert.equal(stranger.status, 404);
        check(m, '/workflows/{workflow_id}', stranger);
      }
      const terminate = await u.patch(path);
      assert.equal(terminate.status, 204);
      check('patch', '/workflows/{workflow_id}', terminate);
      const read = await u.get(path);
      assert.equal(read.json.build_status, 'CANCELED');
      assert.ok(read.json.terminated_at);
      check('get', '/workflows/{workflow_id}', read);
      const again = await u.patch(path);
      assert.equal(again.status, 412);
      assert.equal(again.json.code, 'workflow_terminated');
      check('patch', '/workflows/{workflow_id}', again);
      const del = await u.delete(path);
      assert.equal(del.status, 204);
      check('delete', '/workflows/{workflow_id}', del);
      const gone = await u.delete(path);
      assert.equal(gone.status, 404);
      check('delete', '/workflows/{workflow_id}', gone);
    });
    it('POST /workflows/{workflow_id}/pause and /resume: 204 (and replay), 400, 401, 403, 404, 409, 412; a cron workflow reads back, and its slots', async () => {
      const u = await h().user();
      const cronBody = { ...workflowBody(), cron: '30 2 * * *', timezone: 'Asia/Kolkata', jitter_seconds: 60 };
      conf.expectRequestConforms('post', '/workflows', cronBody);
      const id = (await u.post('/workflows', cronBody, { headers: key() })).json.id as string;
      const read = await u.get(`/workflows/${id}`);
      assert.equal(read.json.cron, '30 2 * * *');
      assert.equal(read.json.interval, 1440);
      check('get', '/workflows/{workflow_id}', read);
      for (const command of ['pause', 'resume'] as const) {
        const template = `/workflows/{workflow_id}/${command}`;
        const path = `/workflows/${id}/${command}`;
        const k = key();
        const done = await u.post(path, undefined, { headers: k });
        assert.equal(done.status, 204);
        check('post', template, done);
        const replay = await u.post(path, undefined, { headers: k });
        assert.equal(replay.headers['idempotent-replayed'], 'true');
        check('post', template, replay);
        const reused = await u.post(`/workflows/${crypto.randomUUID()}/${command}`, undefined, { headers: k });
        assert.equal(reused.status, 409);
        check('post', template, reused);
        const plain = await u.post(path);
        assert.equal(plain.status, 204, 'without a key, and repeated');
        check('post', template, plain);
        check('post', template, await u.post(path, undefined, { headers: { 'idempotency-key': ' ' } }));
        check('post', template, await u.post(`/workflows/nope/${command}`));
        check('post', template, await h().client().post(path));
        check('post', template, await withoutCsrf(u).post(path));
        const stranger = await (await other()).post(path);
        assert.equal(stranger.status, 404);
        check('post', template, stranger);
      }
      const SLOTS = '/workflows/{workflow_id}/slots';
      await h().db.handle.db.updateTable('workflows').set({ build_status: 'COMPLETED', build_completed_at: Date.now() - 3 * 86_400_000 }).where('id', '=', id).execute();
      const slots = await u.get(`/workflows/${id}/slots?from=${new Date(Date.now() - 2 * 86_400_000).toISOString()}`);
      assert.equal(slots.status, 200);
      assert.ok((slots.json.slots as unknown[]).length >= 2);
      check('get', SLOTS, slots);
      check('get', SLOTS, await u.get(`/workflows/${id}/slots?to=soon`));
      check('get', SLOTS, await u.get('/workflows/nope/slots'));
      check('get', SLOTS, await h().client().get(`/workflows/${id}/slots`));
      check('get', SLOTS, await (await other()).get(`/workflows/${id}/slots`));
      assert.equal((await u.patch(`/workflows/${id}`)).status, 204);
      for (const command of ['pause', 'resume'] as const) {
        const terminated = await u.post(`/workflows/${id}/${command}`);
        assert.equal(terminated.status, 412);
        assert.equal(terminated.json.code, 'workflow_terminated');
        check('post', `/workflows/{workflow_id}/${command}`, terminated);
      }
    });
  });

  describe('jobs', () => {
    const SCHEDULE = '/workflows/{workflow_id}/jobs/schedule';
    const LIST = '/workflows/{workflow_id}/jobs';
    const ONE = '/workflows/{workflow_id}/jobs/{job_id}';

    it('POST /workflows/{workflow_id}/jobs/schedule: 201 (and replay), 400, 401, 403, 404, 409, 412, 413', async () => {
      const u = await h().user();
      const id = (await u.post('/workflows', workflowBody(), { headers: key() })).json.id as string;
      const path = `/workflows/${id}/jobs/schedule`;
      conf.expectRequestConforms('post', SCHEDULE, {});
      const k = key();
      const res = await u.post(path, undefined, { headers: k });
      assert.equal(res.status, 201);
      check('post', SCHEDULE, res);
      const replay = await u.post(path, {}, { headers: k });
      assert.equal(replay.headers['idempotent-replayed'], 'true');
      check('post', SCHEDULE, replay);
      const otherId = (await u.post('/workflows', workflowBody(), { headers: key() })).json.id as string;
      const reused = await u.post(`/workflows/${otherId}/jobs/schedule`, undefined, { headers: k });
      assert.equal(reused.status, 409);
      check('post', SCHEDULE, reused);
      for (const [p, body, headers] of [
        [path, undefined, {}],
        [path, undefined, { 'idempotency-key': ' ' }],
        [path, { x: 1 }, key()],
        [path, [], key()],
        ['/workflows/nope/jobs/schedule', undefined, key()],
      ] as [string, unknown, Record<string, string>][]) {
        const r = await u.post(p, body, { headers });
        assert.equal(r.status, 400, `${p} ${JSON.stringify(body)}`);
        check('post', SCHEDULE, r);
      }
      check('post', SCHEDULE, await u.post(path, undefined, { rawBody: '{', headers: { ...key(), ...JSON_TYPE } }));
      check('post', SCHEDULE, await h().client().post(path, undefined, { headers: key() }));
      const noCsrf = await withoutCsrf(u).post(path, undefined, { headers: key() });
      assert.equal(noCsrf.status, 403);
      check('post', SCHEDULE, noCsrf);
      for (const p of [`/workflows/${crypto.randomUUID()}/jobs/schedule`]) {
        const r = await u.post(p, undefined, { headers: key() });
        assert.equal(r.status, 404);
        check('post', SCHEDULE, r);
      }
      const stranger = await (await other()).post(path, undefined, { headers: key() });
      assert.equal(stranger.status, 404);
      check('post', SCHEDULE, stranger);
      const big = await u.post(path, undefined, { rawBody: Buffer.alloc(BIG, 32), headers: { ...key(), ...JSON_TYPE } });
      assert.equal(big.status, 413);
      check('post', SCHEDULE, big);
      await h().db.handle.db.updateTable('workflows').set({ build_status: 'FAILED' }).where('id', '=', otherId).execute();
      const buildFailed = await u.post(`/workflows/${otherId}/jobs/schedule`, undefined, { headers: key() });
      assert.equal(buildFailed.status, 412);
      assert.equal(buildFailed.json.code, 'workflow_build_failed');
      check('post', SCHEDULE, buildFailed);
      assert.equal((await u.patch(`/workflows/${id}`)).status, 204);
      const terminated = await u.post(path, undefined, { headers: key() });
      assert.equal(terminated.status, 412);
      assert.equal(terminated.json.code, 'workflow_terminated');
      check('post', SCHEDULE, terminated);
    });

    it('GET /workflows/{workflow_id}/jobs and /jobs/{job_id}: 200 in every state, 400, 401, 404', async () => {
      const u = await h().user();
      const id = (await u.post('/workflows', workflowBody(), { headers: key() })).json.id as string;
      const t = Date.now() - 60_000;
      const jobs: Job[] = [];
      for (const [i, status] of (['PENDING', 'RUNNING', 'COMPLETED', 'FAILED', 'CANCELED'] as const).entries()) {
        jobs.push(await insertJob(h().db.store, id, status, { at: t + i * 1000, trigger: 'AUTOMATIC' }));
      }
      const scheduled = (await u.post(`/workflows/${id}/jobs/schedule`, undefined, { headers: key() })).json.id as string;
      for (const q of ['', '?limit=2', '?status=FAILED', '?status=CANCELED&trigger=AUTOMATIC', '?trigger=MANUAL', '?status=QUEUED', '?cache_buster=1']) {
        const res = await u.get(`/workflows/${id}/jobs${q}`);
        assert.equal(res.status, 200, q);
        check('get', LIST, res);
      }
      const first = await u.get(`/workflows/${id}/jobs?limit=2`);
      assert.ok(first.json.cursor);
      check('get', LIST, await u.get(`/api/workflows/${id}/jobs?limit=2&cursor=${first.json.cursor}`));
      for (const q of ['?status=DONE', '?trigger=CRON', '?limit=0', '?limit=101', '?cursor=%%%', '?status=FAILED&status=CANCELED']) {
        const r = await u.get(`/workflows/${id}/jobs${q}`);
        assert.equal(r.status, 400, q);
        check('get', LIST, r);
      }
      check('get', LIST, await u.get('/workflows/nope/jobs'));
      check('get', LIST, await u.get(`/workflows/${crypto.randomUUID()}/jobs`));
      const strangerList = await (await other()).get(`/workflows/${id}/jobs`);
      assert.equal(strangerList.status, 404);
      check('get', LIST, strangerList);
      check('get', LIST, await h().client().get(`/workflows/${id}/jobs`));

      for (const jobId of [...jobs.map((j) => j.id), scheduled]) {
        const res = await u.get(`/workflows/${id}/jobs/${jobId}`);
        assert.equal(res.status, 200);
        check('get', ONE, res);
      }
      const jobId = jobs[0]!.id;
      for (const p of [`/workflows/nope/jobs/${jobId}`, `/workflows/${id}/jobs/nope`, '/workflows/nope/jobs/nope']) {
        const r = await u.get(p);
        assert.equal(r.status, 400, p);
        check('get', ONE, r);
      }
      check('get', ONE, await u.get(`/workflows/${id}/jobs/${crypto.randomUUID()}`));
      check('get', ONE, await u.get(`/workflows/${crypto.randomUUID()}/jobs/${jobId}`));
      const strangerOne = await (await other()).get(`/workflows/${id}/jobs/${jobId}`);
      assert.equal(strangerOne.status, 404);
      check('get', ONE, strangerOne);
      check('get', ONE, await h().client().get(`/workflows/${id}/jobs/${jobId}`));
    });

    it('the Job schemas tell the list shape from the single read, and reasons from their absence', () => {
      const listItem = (j: Record<string, unknown>) => schemaAt('components', 'schemas', 'JobPage')({ jobs: [j], cursor: '' });
      const one = schemaAt('paths', ONE, 'get', 'responses', '200', 'content', 'application/json', 'schema');
      const base = { id: crypto.randomUUID(), workflow_id: crypto.randomUUID(), status: 'PENDING', trigger: 'MANUAL', scheduled_at: '2030-01-01T00:00:00.000Z', created_at: '2030-01-01T00:00:00.000Z', updated_at: '2030-01-01T00:00:00.000Z' };
      const failed = { ...base, status: 'FAILED', status_reason_code: 'NON_ZERO_EXIT', status_reason_message: 'The container exited with code 2.' };
      assert.ok(one(base) && one(failed));
      assert.ok(!one({ ...base, attempts: 0 }) && !one({ ...base, container_id: 'x' }));
      assert.ok(listItem({ ...base, attempts: 0 }) && listItem({ ...failed, attempts: 1, container_id: 'x' }));
      assert.ok(!listItem(base), 'attempts is required in lists');
      assert.ok(!one({ ...base, status_reason_code: 'NON_ZERO_EXIT', status_reason_message: 'x' }), 'a reason on a PENDING job');
      assert.ok(!one({ ...failed, status_reason_message: undefined }), 'a FAILED job without its message');
    });
  });

  describe('logs', () => {
    const LOGS = '/workflows/{workflow_id}/jobs/{job_id}/logs';
    const SEARCH = '/workflows/{workflow_id}/jobs/{job_id}/logs/search';
    const RAW = '/workflows/{workflow_id}/jobs/{job_id}/logs/raw';
    const EVENTS = '/workflows/{workflow_id}/jobs/{job_id}/events';

    /** A signed-in user with a retaining workflow, a finished job with lines, a running job and a workflow without retention. */
    async function world() {
      const u = await h().user();
      const wid = await containerWorkflow(u);
      const done = await insertJob(h().db.store, wid, 'COMPLETED');
      await insertLines(h(), done.id, done.attempts, lines(['{"level":"info"}', 'Hello ÜNÏCÖDÉ', '', 'hello again', '42']));
      const running = await insertJob(h().db.store, wid, 'RUNNING');
      const off = await containerWorkflow(u, { logRetention: false });
      const offJob = await insertJob(h().db.store, off, 'COMPLETED');
      return { u, wid, done, running, off, offJob };
    }

    it('GET …/logs and …/logs/search: 200, 400, 401, 404, 412', async () => {
      const { u, wid, done, off, offJob } = await world();
      for (const [template, suffix, queries] of [
        [LOGS, '', ['', '?limit=2', '?limit=1000']],
        [SEARCH, '/search', ['?q=hello', '?q=%25&stream=stderr', '?stream=stdout', '', '?q=nothing&limit=1']],
      ] as const) {
        const path = `/workflows/${wid}/jobs/${done.id}/logs${suffix}`;
        for (const q of queries) {
          const res = await u.get(path + q);
          assert.equal(res.status, 200, q);
          check('get', template, res);
        }
        const first = await u.get(`${path}${suffix ? '?q=l&' : '?'}limit=1`);
        assert.ok(first.json.cursor);
        check('get', template, await u.get(`${path}${suffix ? '?q=l&' : '?'}limit=1&cursor=${first.json.cursor}`));
        for (const q of ['?limit=0', '?cursor=%%%', ...(suffix ? ['?q=', '?stream=both'] : [])]) {
          const r = await u.get(path + q);
          assert.equal(r.status, 400, q);
          check('get', template, r);
        }
        check('get', template, await u.get(`/workflows/nope/jobs/${done.id}/logs${suffix}`));
        check('get', template, await h().client().get(path));
        const missing = await u.get(`/workflows/${wid}/jobs/${crypto.randomUUID()}/logs${suffix}`);
        assert.equal(missing.status, 404);
        check('get', template, missing);
        const stranger = await (await other()).get(path);
        assert.equal(stranger.status, 404);
        check('get', template, stranger);
        const retention = await u.get(`/workflows/${off}/jobs/${offJob.id}/logs${suffix}`);
        assert.equal(retention.status, 412);
        check('get', template, retention);
      }
    });

    it('GET …/logs/lines: 200, 400, 404, 412', async () => {
      const { u, wid, done, running, off, offJob } = await world();
      const LINES = '/workflows/{workflow_id}/jobs/{job_id}/logs/lines';
      const path = `/workflows/${wid}/jobs/${done.id}/logs/lines`;
      for (const q of ['', '?from=2&limit=2', '?from=99']) {
        const res = await u.get(path + q);
        assert.equal(res.status, 200, q);
        check('get', LINES, res);
      }
      check('get', LINES, await u.get(`/workflows/${wid}/jobs/${running.id}/logs/lines`));
      for (const q of ['?from=-1', '?limit=0']) {
        const r = await u.get(path + q);
        assert.equal(r.status, 400, q);
        check('get', LINES, r);
      }
      const missing = await u.get(`/workflows/${wid}/jobs/${crypto.randomUUID()}/logs/lines`);
      assert.equal(missing.status, 404);
      check('get', LINES, missing);
      const retention = await u.get(`/workflows/${off}/jobs/${offJob.id}/logs/lines`);
      assert.equal(retention.status, 412);
      check('get', LINES, retention);
    });

    it('GET …/attempts (issue 26): 200, 400, 404', async () => {
      const { u, wid, done, running, off, offJob } = await world();
      const ATTEMPTS = '/workflows/{workflow_id}/jobs/{job_id}/attempts';
      for (const [w, job] of [[wid, done], [wid, running], [off, offJob]] as const) {
        const res = await u.get(`/workflows/${w}/jobs/${job.id}/attempts`);
        assert.equal(res.status, 200, res.text);
        check('get', ATTEMPTS, res);
      }
      const bad = await u.get(`/workflows/${wid}/jobs/nope/attempts`);
      assert.equal(bad.status, 400);
      check('get', ATTEMPTS, bad);
      const missing = await u.get(`/workflows/${wid}/jobs/${crypto.randomUUID()}/attempts`);
      assert.equal(missing.status, 404);
      check('get', ATTEMPTS, missing);
    });

    it('GET …/logs/raw: 200 in every format, 400, 401, 404, 412', async () => {
      const { u, wid, done, running, off, offJob } = await world();
      const path = `/workflows/${wid}/jobs/${done.id}/logs/raw`;
      for (const q of ['', '?format=txt', '?format=json', '?format=jsonl', '?format=json&q=hello&stream=stdout', '?format=jsonl&stream=stderr']) {
        const res = await u.get(path + q);
        assert.equal(res.status, 200, q);
        check('get', RAW, res);
      }
      for (const p of [`${path}?format=xml`, `${path}?stream=all`, `${path}?q=`, `/workflows/${wid}/jobs/${running.id}/logs/raw`, '/workflows/nope/jobs/nope/logs/raw']) {
        const r = await u.get(p);
        assert.equal(r.status, 400, p);
        check('get', RAW, r);
      }
      check('get', RAW, await h().client().get(path));
      check('get', RAW, await u.get(`/workflows/${wid}/jobs/${crypto.randomUUID()}/logs/raw`));
      check('get', RAW, await (await other()).get(path));
      const retention = await u.get(`/workflows/${off}/jobs/${offJob.id}/logs/raw`);
      assert.equal(retention.status, 412);
      check('get', RAW, retention);
    });

    it('GET …/events: 200 (a whole stream, a refused open), 204 (a reconnect after end), 400, 401', async () => {
      const { u, wid, done, off, offJob } = await world();
      const whole = await u.get(`/workflows/${wid}/jobs/${done.id}/events`);
      assert.equal(whole.status, 200);
      assert.match(whole.text, /^event: connected\n/);
      assert.match(whole.text, /event: end\n/);
      check('get', EVENTS, whole);
      // EventSource reconnecting after end, with the end's id: told to stop
      const endId = /event: end\nid: (\d+)\n/.exec(whole.text)?.[1];
      assert.ok(endId, whole.text);
      const reconnect = await u.get(`/workflows/${wid}/jobs/${done.id}/events?lastEventId=${endId}`);
      assert.equal(reconnect.status, 204);
      check('get', EVENTS, reconnect);
      const refused = await u.get(`/workflows/${off}/jobs/${offJob.id}/events`);
      assert.equal(refused.status, 200);
      assert.match(refused.text, /^event: error\ndata: \{.*"code":"log_retention_disabled"/);
      check('get', EVENTS, refused);
      for (const [p, headers] of [
        [`/workflows/${wid}/jobs/${done.id}/events?since=x`, {}],
        [`/workflows/${wid}/jobs/${done.id}/events`, { 'last-event-id': 'x' }],
        [`/workflows/${wid}/jobs/nope/events`, {}],
      ] as [string, Record<string, string>][]) {
        const r = await u.get(p, { headers });
        assert.equal(r.status, 400, p);
        check('get', EVENTS, r);
      }
      check('get', EVENTS, await h().client().get(`/workflows/${wid}/jobs/${done.id}/events`));
    });

    it('the log schemas describe what the routes send', () => {
      const page = schemaAt('components', 'schemas', 'LogPage');
      const entry = { timestamp: '2030-01-01T00:00:00.000Z', message: 'm', sequence_num: 0, stream: 'stdout', event_id: 'x:1:0' };
      const base = { id: crypto.randomUUID(), workflow_id: crypto.randomUUID(), logs: [entry], cursor: '', highlight_token: 'a'.repeat(32) };
      assert.ok(page(base));
      assert.ok(!page({ ...base, highlight_token: 'A'.repeat(32) }), 'lowercase hex only');
      assert.ok(!page({ ...base, logs: [{ ...entry, stream: 'stdin' }] }));
      const download = schemaAt('components', 'schemas', 'LogDownload');
      const d = { id: base.id, workflow_id: base.workflow_id, filters: { q: '', stream: 'all' }, logs: [{ timestamp: entry.timestamp, sequence_num: 0, stream: 'stderr', event_id: 'x', message_raw: 'null', message_json: null }] };
      assert.ok(download(d));
      assert.ok(!download({ ...d, filters: { q: '' } }));
    });
  });

  describe('notifications and analytics', () => {
    it('GET /notifications: 200 (unread, read ones too, paged), 400, 401', async () => {
      const u = await h().user();
      const ids = await seedNotifications(h().db.store, u, 3);
      assert.equal((await u.put('/notifications', { ids: [ids[0]] })).status, 204);
      for (const q of ['', '?unread=true', '?include_read=true', '?limit=1', '?unread=false&cache_buster=1']) {
        const res = await u.get(`/notifications${q}`);
        assert.equal(res.status, 200, q);
        check('get', '/notifications', res);
      }
      const first = await u.get('/notifications?limit=1');
      check('get', '/notifications', await u.get(`/api/notifications?limit=1&cursor=${first.json.cursor}`));
      for (const q of ['?unread=1', '?include_read=1', '?unread=true&include_read=true', '?limit=0', '?cursor=%%%']) {
        const r = await u.get(`/notifications${q}`);
        assert.equal(r.status, 400, q);
        check('get', '/notifications', r);
      }
      check('get', '/notifications', await h().client().get('/notifications'));
    });

    it('PUT /notifications: 204, 400, 401, 403, 404, 413', async () => {
      const u = await h().user();
      const ids = await seedNotifications(h().db.store, u, 2);
      const body = { ids };
      conf.expectRequestConforms('put', '/notifications', body);
      const res = await u.put('/notifications', body);
      assert.equal(res.status, 204);
      check('put', '/notifications', res);
      for (const bad of [{ ids: [] }, { ids: ['x'] }, {}, { ids: ids[0] }]) {
        const r = await u.put('/notifications', bad);
        assert.equal(r.status, 400);
        check('put', '/notifications', r);
      }
      const missing = await u.put('/notifications', { ids: [crypto.randomUUID()] });
      assert.equal(missing.status, 404);
      check('put', '/notifications', missing);
      const stranger = await (await other()).put('/notifications', body);
      assert.equal(stranger.status, 404);
      check('put', '/notifications', stranger);
      check('put', '/notifications', await h().client().put('/notifications', body));
      const noCsrf = await withoutCsrf(u).put('/notifications', body);
      assert.equal(noCsrf.status, 403);
      check('put', '/notifications', noCsrf);
      const big = await u.put('/notifications', undefined, { rawBody: Buffer.alloc(BIG, 32), headers: JSON_TYPE });
      assert.equal(big.status, 413);
      check('put', '/notifications', big);
    });

    it('GET /analytics and /analytics/{workflow_id}: 200, 400, 401, 404', async () => {
      const u = await h().user();
      const userId = await userIdOf(h().db.store, u);
      const id = (await u.post('/workflows', workflowBody(), { headers: key() })).json.id as string;
      check('get', '/analytics/{workflow_id}', await u.get(`/analytics/${id}`));
      await h().db.store.analytics.addToWorkflow({ workflowId: id, userId, kind: 'HEARTBEAT' }, 3, 42);
      const deleted = crypto.randomUUID();
      await h().db.store.analytics.addToWorkflow({ workflowId: deleted, userId, kind: 'CONTAINER' }, 1, 1);
      const all = await u.get('/analytics');
      assert.equal(all.status, 200);
      assert.equal(all.json.total_jobs, 4);
      assert.equal(all.json.top_workflows[1].workflow_name, 'Deleted workflow');
      check('get', '/analytics', all);
      check('get', '/analytics', await h().client().get('/analytics'));
      for (const wid of [id, deleted]) {
        const one = await u.get(`/analytics/${wid}`);
        assert.equal(one.status, 200);
        check('get', '/analytics/{workflow_id}', one);
      }
      check('get', '/analytics/{workflow_id}', await u.get('/analytics/nope'));
      check('get', '/analytics/{workflow_id}', await h().client().get(`/analytics/${id}`));
      const stranger = await (await other()).get(`/analytics/${id}`);
      assert.equal(stranger.status, 404);
      check('get', '/analytics/{workflow_id}', stranger);
    });

    it('incidents (issue 26): GET /incidents, GET /workflows/{workflow_id}/incidents, POST acknowledge and snooze: 200, 400, 401, 403, 404, 413', async () => {
      const u = await h().user();
      const id = (await u.post('/workflows', workflowBody(), { headers: key() })).json.id as string;
      const w = (await h().db.store.workflows.findById(id))!;
      await endJob(h().db.store, w, { status: 'FAILED', ranMs: 5, reason: reasons.connectionRefused() });
      const list = await u.get('/incidents');
      assert.equal(list.status, 200, list.text);
      check('get', '/incidents', list);
      check('get', '/incidents', await u.get('/incidents?status=bogus'));
      check('get', '/incidents', await h().client().get('/incidents'));
      const incident = list.json.incidents[0].id as string;
      const forWorkflow = `/workflows/${id}/incidents`;
      check('get', '/workflows/{workflow_id}/incidents', await u.get(forWorkflow));
      check('get', '/workflows/{workflow_id}/incidents', await u.get('/workflows/nope/incidents'));
      check('get', '/workflows/{workflow_id}/incidents', await (await other()).get(forWorkflow));
      check('get', '/workflows/{workflow_id}/incidents', await h().client().get(forWorkflow));
      const until = { until: new Date(Date.now() + 3_600_000).toISOString() };
      for (const [path, body] of [
        [`/incidents/${incident}/acknowledge`, undefined],
        [`/incidents/${incident}/snooze`, until],
      ] as const) {
        const template = path.replace(incident, '{incident_id}');
        const ok = await u.post(path, body);
        assert.equal(ok.status, 200, ok.text);
        check('post', template, ok);
        check('post', template, await u.post(path.replace(incident, 'nope'), body));
        check('post', template, await (await other()).post(path, body));
        check('post', template, await withoutCsrf(u).post(path, body));
        check('post', template, await h().client().post(path, body));
        check('post', template, await u.post(path, undefined, { rawBody: Buffer.alloc(BIG, 32), headers: JSON_TYPE }));
      }
      check('post', '/incidents/{incident_id}/snooze', await u.post(`/incidents/${incident}/snooze`, { until: 'soon' }));
    });

    it('maintenance windows and snooze (issue 25): list, create, show, change, delete; a workflow\'s snooze: 200, 201, 204, 400, 403, 404, 409, 413', async () => {
      const u = await h().user();
      const id = (await u.post('/workflows', workflowBody(), { headers: key() })).json.id as string;
      const stranger = await other();
      const hour = (n: number) => new Date(Date.now() + n * 3_600_000).toISOString();
      const body = { name: 'Upgrade', mode: 'skip', workflow_id: id, starts_at: hour(1), ends_at: hour(2) };
      const big = { rawBody: Buffer.alloc(BIG, 32), headers: JSON_TYPE };
      const created = await u.post('/maintenance-windows', body);
      assert.equal(created.status, 201, created.text);
      for (const res of [created, await u.post('/maintenance-windows', { ...body, ends_at: hour(0) }), await withoutCsrf(u).post('/maintenance-windows', body), await u.post('/maintenance-windows', undefined, big)]) {
        check('post', '/maintenance-windows', res);
      }
      check('get', '/maintenance-windows', await u.get('/maintenance-windows'));
      check('get', '/maintenance-windows', await u.get('/maintenance-windows?limit=0'));
      const one = `/maintenance-windows/${created.json.id}`;
      const template = '/maintenance-windows/{window_id}';
      for (const res of [await u.get(one), await u.get('/maintenance-windows/nope'), await stranger.get(one)]) check('get', template, res);
      for (const res of [
        await u.patch(one, { body: { name: 'Renamed' } }),
        await u.patch(one, { body: { duration_minutes: 5 } }),
        await u.patch('/maintenance-windows/nope', { body: {} }),
        await stranger.patch(one, { body: {} }),
        await withoutCsrf(u).patch(one, { body: {} }),
        await u.patch(one, big),
      ]) {
        check('patch', template, res);
      }
      for (const res of [await u.delete('/maintenance-windows/nope'), await stranger.delete(one), await withoutCsrf(u).delete(one), await u.delete(one)]) check('delete', template, res);

      const snooze = `/workflows/${id}/snooze`;
      const snoozeTemplate = '/workflows/{workflow_id}/snooze';
      const until = { until: hour(1) };
      for (const res of [
        await u.post(snooze, until),
        await u.post(snooze, { until: hour(-1) }),
        await u.post('/workflows/nope/snooze', until),
        await stranger.post(snooze, until),
        await withoutCsrf(u).post(snooze, until),
        await u.post(snooze, undefined, big),
      ]) {
        check('post', snoozeTemplate, res);
      }
      for (const res of [await u.get(snooze), await u.get('/workflows/nope/snooze'), await stranger.get(snooze)]) check('get', snoozeTemplate, res);
      for (const res of [await u.delete('/workflows/nope/snooze'), await stranger.delete(snooze), await withoutCsrf(u).delete(snooze), await u.delete(snooze)]) check('delete', snoozeTemplate, res);

      // At the bound (written directly: a hundred requests add nothing here)
      const userId = await userIdOf(h().db.store, u);
      for (let i = 0; i < WINDOWS_PER_USER_MAX; i++) await h().db.store.maintenanceWindows.insert(crypto.randomUUID(), userId, { name: 'W', mode: 'mute', workflowQuery: 'x', cron: '@daily', timeZone: 'UTC', durationMinutes: 5 }, Date.now());
      const refused = await u.post('/maintenance-windows', body);
      assert.equal(refused.status, 409, refused.text);
      check('post', '/maintenance-windows', refused);
    });

    it('GET /reports/reliability (issue 26): 200, 400, 401, 404', async () => {
      const u = await h().user();
      const id = (await u.post('/workflows', workflowBody(), { headers: key() })).json.id as string;
      await endJob(h().db.store, (await h().db.store.workflows.findById(id))!, { status: 'COMPLETED', ranMs: 5 });
      const ok = await u.get('/reports/reliability?period=30d');
      assert.equal(ok.status, 200, ok.text);
      check('get', '/reports/reliability', ok);
      check('get', '/reports/reliability', await u.get(`/reports/reliability?workflow_id=${id}`));
      check('get', '/reports/reliability', await u.get('/reports/reliability?period=2d'));
      check('get', '/reports/reliability', await (await other()).get(`/reports/reliability?workflow_id=${id}`));
      check('get', '/reports/reliability', await h().client().get('/reports/reliability'));
    });
  });

  it('answers 429 (with Retry-After) on every documented operation once the limit is reached', async () => {
    const config = testConfig({
      RATE_LIMIT_ENABLED: 'true',
      RATE_LIMIT_API_PER_SECOND: '1',
      RATE_LIMIT_API_BURST: '0',
      RATE_LIMIT_AUTH_PER_MINUTE: '1',
      RATE_LIMIT_AUTH_BURST: '0',
      TRUSTED_PROXIES: '127.0.0.1',
    });
    const server = new ApiServer({ store: h().db.store, config, clock: systemClock, logger: silentLogger });
    const address = await server.start();
    try {
      const c = new TestClient(`http://127.0.0.1:${address.port}`);
      let n = 0;
      for (const { template, method } of operations()) {
        const headers = { 'x-forwarded-for': `198.51.100.${++n}` };
        await c.send(method.toUpperCase(), fill(template), { headers, noCookies: true });
        const res = await c.send(method.toUpperCase(), fill(template), { headers, noCookies: true });
        assert.equal(res.status, 429, `${method} ${template}`);
        assert.equal(res.json.code, 'rate_limited');
        check(method, template, res);
      }
    } finally {
      await server.stop();
    }
  });

  // Mocha runs a suite's own tests before its nested suites: this one goes last.
  describe('coverage', () => {
    it('every documented operation and status was checked against a real response', () => {
      const missing = conf.unexercised();
      assert.ok(missing.length === 0, `documented but never observed (add a scenario, or drop the status from openapi.ts):\n${missing.join('\n')}`);
    });
  });
},
// A whole event stream is read here: the hold after `end` (api/test/events.test.ts) kept short.
{ env: { LIVE_TAIL_HOLD_AFTER_END: '50ms' } });
