import assert from 'node:assert/strict';
import { request } from 'undici';
import { ManualClock } from '@orloj/common/core';
import { describeApi, key, uniqueEmail, workflowBody, type ApiHarness } from './support/harness.js';
import { rawRequest, type HttpResponse } from './support/client.js';

/**
 * The HTTP surface against a hostile page or user (docs/security.md): Host
 * names (DNS rebinding), Origin on register and login, security headers,
 * rate limits however a path is spelled, ill-formed strings.
 */

/** A request with a Host header of our choosing (a rebinding page's requests carry its own name). */
async function withHost(h: ApiHarness, host: string, path: string, init: { method?: string; headers?: Record<string, string>; body?: string } = {}) {
  const res = await request(`${h.baseUrl}${path}`, {
    method: (init.method ?? 'GET') as 'GET',
    headers: { host, ...(init.body === undefined ? {} : { 'content-type': 'application/json' }), ...init.headers },
    body: init.body,
  });
  const text = await res.body.text();
  return { status: res.statusCode, headers: res.headers, json: text ? (JSON.parse(text) as Record<string, unknown>) : undefined };
}

function assertSecurityHeaders(res: { headers: Record<string, unknown> }, where: string) {
  assert.match(String(res.headers['content-security-policy']), /default-src 'none'.*frame-ancestors 'none'/, where);
  assert.equal(res.headers['x-frame-options'], 'DENY', where);
  assert.equal(res.headers['referrer-policy'], 'same-origin', where);
  assert.equal(res.headers['x-content-type-options'], 'nosniff', where);
}

describeApi(
  'host names (DNS rebinding)',
  (h) => {
    const port = () => new URL(h().baseUrl).port;

    it('refuses a Host that is not served with 400 host_not_allowed, before any route runs', async () => {
      // The rebinding page: evil.example now resolves to this machine; it registers and would act as the user.
      const email = uniqueEmail();
      const res = await withHost(h(), `evil.example:${port()}`, '/auth/register', {
        method: 'POST',
        headers: { origin: `http://evil.example:${port()}` },
        body: JSON.stringify({ email, password: 'correct horse' }),
      });
      assert.equal(res.status, 400);
      assert.equal(res.json?.code, 'host_not_allowed');
      assert.deepEqual(res.json?.errors, [{ field: 'Host', message: "is not SERVER_HOST_URL's host, localhost, an IP address or in SERVER_ALLOWED_HOSTS" }]);
      assertSecurityHeaders(res, 'refusal');
      // Nothing was written: the email is still free.
      assert.equal((await h().client().post('/auth/register', { email, password: 'correct horse' })).status, 201);
      for (const path of ['/users', '/api/users', '/openapi.json', '/nope']) {
        assert.equal((await withHost(h(), 'evil.example', path)).json?.code, 'host_not_allowed', path);
      }
    });

    it("serves SERVER_HOST_URL's host, SERVER_ALLOWED_HOSTS, localhost and IP literals, any case and port", async () => {
      for (const host of [
        'orloj.example.com',
        'ORLOJ.example.com:443',
        'orloj.example.com.',
        'status.example.net',
        'corp.example',
        'a.b.corp.example:8080',
        'localhost',
        `localhost:${port()}`,
        `127.0.0.1:${port()}`,
        '10.1.2.3:9000',
        `[::1]:${port()}`,
        '[::ffff:127.0.0.1]',
      ]) {
        const res = await withHost(h(), host, '/users');
        assert.equal(res.json?.code, 'unauthenticated', host);
      }
      for (const host of ['evil.example', 'orloj.example.com.evil.example', 'evilcorp.example', 'corp.example.evil', 'localhost.evil.example', 'x']) {
        assert.equal((await withHost(h(), host, '/users')).json?.code, 'host_not_allowed', host);
      }
    });

    it('lets probes through whatever the Host (/livez, /readyz, also below /api)', async () => {
      for (const path of ['/livez', '/readyz', '/api/livez', '/readyz/']) {
        const res = await withHost(h(), '10-0-0-7.pod.cluster.internal', path);
        assert.notEqual(res.json?.code, 'host_not_allowed', path);
      }
    });
  },
  { env: { SERVER_HOST_URL: 'https://orloj.example.com', SERVER_ALLOWED_HOSTS: 'status.example.net, .corp.example' } },
);

describeApi('host names with the embedded default (SERVER_HOST_URL unset)', (h) => {
  it('serves http://localhost:<port> and http://127.0.0.1:<port> and refuses other names', async () => {
    const port = new URL(h().baseUrl).port;
    for (const host of [`localhost:${port}`, `127.0.0.1:${port}`, `[::1]:${port}`]) {
      const c = h().client();
      const origin = `http://${host}`;
      const res = await withHost(h(), host, '/auth/register', {
        method: 'POST',
        headers: { origin },
        body: JSON.stringify({ email: uniqueEmail(), password: 'correct horse' }),
      });
      assert.equal(res.status, 201, host);
      assert.equal((await c.get('/users')).status, 401);
    }
    assert.equal((await withHost(h(), `rebind.attacker.example:${port}`, '/users')).json?.code, 'host_not_allowed');
  });
});

describeApi(
  'host names with SERVER_ALLOWED_HOSTS=*',
  (h) => {
    it('serves any Host (the old openness, chosen explicitly)', async () => {
      assert.equal((await withHost(h(), 'anything.example', '/users')).json?.code, 'unauthenticated');
    });
  },
  { env: { SERVER_ALLOWED_HOSTS: '*' } },
);

describeApi(
  'Origin on register and login',
  (h) => {
    const credentials = () => ({ email: uniqueEmail(), password: 'correct horse' });

    it('refuses register and login from another origin with 403 forbidden_origin, writing nothing', async () => {
      const c = h().client();
      const body = credentials();
      const reg = await c.post('/auth/register', body, { headers: { origin: 'https://evil.example' } });
      assert.equal(reg.status, 403);
      assert.equal(reg.json.code, 'forbidden_origin');
      assert.deepEqual(reg.setCookies, []);
      // The account was not created.
      assert.equal((await c.post('/auth/login', body)).status, 401);
      assert.equal((await c.post('/auth/register', body)).status, 201);
      const login = await h().client().post('/auth/login', body, { headers: { origin: 'https://evil.example' } });
      assert.equal(login.status, 403);
      assert.equal(login.json.code, 'forbidden_origin');
      assert.deepEqual(login.setCookies, []);
    });

    it('refuses a cross-site form without an acceptable Origin (Origin: null, Sec-Fetch-Site: cross-site)', async () => {
      const forms: Record<string, string>[] = [{ origin: 'null', 'sec-fetch-site': 'cross-site' }, { 'sec-fetch-site': 'cross-site' }];
      for (const headers of forms) {
        const res = await h().client().post('/auth/login', credentials(), { headers });
        assert.equal(res.status, 403, JSON.stringify(headers));
        assert.equal(res.json.code, 'forbidden_origin');
      }
    });

    it('refuses Origin: null (an opaque origin) on every mutating route unless Sec-Fetch-Site says same-origin', async () => {
      const c = await h().user();
      const opaque: Record<string, string>[] = [{ origin: 'null' }, { origin: 'null', 'sec-fetch-site': 'same-site' }, { origin: 'null', 'sec-fetch-site': 'none' }];
      for (const headers of opaque) {
        const body = credentials();
        for (const [what, res] of [
          ['register', await h().client().post('/auth/register', body, { headers })],
          ['login', await h().client().post('/auth/login', body, { headers })],
          ['POST /workflows', await c.post('/workflows', workflowBody(), { headers: { ...headers, ...key() } })],
          ['POST /auth/logout', await c.post('/auth/logout', undefined, { headers })],
        ] as const) {
          assert.equal(res.status, 403, `${what} ${JSON.stringify(headers)}: ${res.status} ${res.text}`);
          assert.equal(res.json.code, 'forbidden_origin', what);
          assert.deepEqual(res.setCookies, [], what);
        }
        // Nothing was written: the account does not exist, the workflow list is empty.
        assert.equal((await h().client().post('/auth/login', body)).status, 401);
      }
      assert.equal((await c.get('/workflows')).json.workflows.length, 0);
      // A browser vouching for its own origin is believed.
      const same = { origin: 'null', 'sec-fetch-site': 'same-origin' };
      assert.equal((await c.post('/workflows', workflowBody(), { headers: { ...same, ...key() } })).status, 201);
    });

    it('accepts its own origin, the request host, an allowed origin, and no Origin at all (curl)', async () => {
      const own = new URL(h().baseUrl).origin;
      const forms: Record<string, string>[] = [
        { origin: own },
        { origin: 'https://app.example.com' },
        { origin: h().config.serverHostUrl },
        {},
        { 'sec-fetch-site': 'same-origin' },
      ];
      for (const headers of forms) {
        const body = credentials();
        assert.equal((await h().client().post('/auth/register', body, { headers })).status, 201, JSON.stringify(headers));
        assert.equal((await h().client().post('/auth/login', body, { headers })).status, 200, JSON.stringify(headers));
      }
    });
  },
  { env: { SERVER_ALLOWED_ORIGINS: 'https://app.example.com' } },
);

describeApi('security headers on API responses', (h) => {
  it('sends CSP, frame-ancestors, X-Frame-Options, Referrer-Policy and nosniff on every answer', async () => {
    const c = await h().user();
    const answers: [string, HttpResponse][] = [
      ['GET /users', await c.get('/users')],
      ['GET /openapi.json', await c.get('/openapi.json')],
      ['404', await c.get('/nope')],
      ['405', await c.send('DELETE', '/users')],
      ['401', await h().client().get('/workflows')],
      ['400', await c.post('/workflows', { name: 1 }, { headers: key() })],
      ['OPTIONS', await c.send('OPTIONS', '/workflows')],
    ];
    for (const [where, res] of answers) assertSecurityHeaders(res, where);
  });
});

describeApi(
  'rate limits follow the route that answers, however the path is spelled',
  (h) => {
    let n = 0;
    const from = () => ({ 'x-forwarded-for': `203.0.113.${++n}` });

    for (const route of ['/auth/login', '/auth/register']) {
      it(`counts every spelling of ${route} in its 10/min bucket (1 + burst 5, then 429)`, async () => {
        const address = from();
        const spellings = [route, `${route}/`, route.toUpperCase(), `/api${route}/`, `/api${route.toUpperCase()}`, route.replace('auth', 'Auth'), `${route.toUpperCase()}/`];
        const statuses: number[] = [];
        for (const spelling of spellings) {
          const res = await h().client().post(spelling, { email: 'nobody@example.com', password: 'short' }, { headers: address });
          statuses.push(res.status);
          if (res.status !== 429) assert.notEqual(res.json.code, 'route_not_found', spelling);
        }
        assert.deepEqual(statuses.slice(6), [429], `${spellings.join(' ')} → ${statuses.join(' ')}`);
        assert.ok(statuses.slice(0, 6).every((s) => s !== 429));
      });
    }

    it('gives a wrong method on an auth route (405) the auth bucket too, and other routes the API bucket', async () => {
      const address = from();
      for (let i = 0; i < 6; i++) assert.equal((await h().client().get('/AUTH/LOGIN/', { headers: address })).status, 405);
      assert.equal((await h().client().get('/auth/login', { headers: address })).status, 429);
      // The API bucket of that address is untouched.
      assert.equal((await h().client().get('/users', { headers: address })).status, 401);
    });
  },
  { env: { RATE_LIMIT_ENABLED: 'true', TRUSTED_PROXIES: '127.0.0.1/32,::1' }, clock: new ManualClock(Date.now()) },
);

describeApi('ill-formed strings', (h) => {
  const json = (text: string) => ({ rawBody: text, headers: { ...key(), 'content-type': 'application/json' } });

  it('refuses a lone surrogate in a body field with 400 naming the field, storing nothing', async () => {
    const c = await h().user();
    const body = JSON.stringify(workflowBody({ name: 'n@@' })).replace('@@', '\\udfff');
    const res = await c.send('POST', '/workflows', json(body));
    assert.equal(res.status, 400);
    assert.equal(res.json.code, 'validation_failed');
    assert.deepEqual(res.json.errors.map((e: { field: string }) => e.field), ['name']);
    assert.equal((await c.get('/workflows')).json.workflows.length, 0);
    for (const [name, text] of [
      ['high surrogate alone', '"\\ud800"'],
      ['reversed pair', '"\\udc00\\ud800"'],
      ['high at the end', '"ok\\ud83d"'],
    ]) {
      const r = await c.send('POST', '/workflows', json(JSON.stringify(workflowBody()).replace('"Homepage check"', text!)));
      assert.equal(r.status, 400, name);
      assert.equal(r.json.errors[0].field, 'name', name);
    }
  });

  it('refuses one in the payload\'s own JSON, naming payload.<field>', async () => {
    const c = await h().user();
    const payload = JSON.stringify({ endpoint: 'https://example.com/', headers: { 'X-A': '@@' } }).replace('@@', '\\udfff');
    const res = await c.post('/workflows', workflowBody({ payload }), { headers: key() });
    assert.equal(res.status, 400);
    assert.deepEqual(res.json.errors.map((e: { field: string }) => e.field), ['payload.headers.X-A']);
  });

  it('refuses NUL (U+0000) inside the payload\'s own JSON strings and names, naming payload.<field>, storing nothing', async () => {
    const c = await h().user();
    const cases: [string, Record<string, unknown>, string][] = [
      ['CONTAINER', { image: 'alpine:3.20', env: { A: 'a@@b' } }, 'payload.env.A'],
      ['CONTAINER', { image: 'alpine:3.20', env: { 'B@@': 'b' } }, 'payload.env.B\u0000'],
      ['CONTAINER', { image: 'alpine:3.20', cmd: ['sh', '-c', 'echo @@'] }, 'payload.cmd[2]'],
      ['CONTAINER', { image: 'alpine@@:3.20' }, 'payload.image'],
      ['HEARTBEAT', { endpoint: 'https://example.com/', headers: { 'X-A': 'v@@' } }, 'payload.headers.X-A'],
      ['HEARTBEAT', { endpoint: 'https://example.com/', method: 'POST', body: '@@' }, 'payload.body'],
    ];
    for (const [kind, payload, field] of cases) {
      // `\u0000` in the payload's JSON text: the payload string itself holds no NUL, its value does.
      const text = JSON.stringify(payload).replace('@@', '\\u0000');
      const res = await c.post('/workflows', workflowBody({ kind, payload: text }), { headers: key() });
      assert.equal(res.status, 400, `${text} → ${res.status} ${res.text}`);
      assert.deepEqual(res.json.errors, [{ field, message: 'must not contain NUL (U+0000) characters' }], text);
    }
    const id = (await c.post('/workflows', workflowBody(), { headers: key() })).json.id as string;
    const update = await c.put(`/workflows/${id}`, { name: 'x', payload: '{"endpoint":"https://example.com/\\u0000"}', interval: 5, max_consecutive_job_failures_allowed: 3 }, { headers: key() });
    assert.equal(update.status, 400);
    assert.deepEqual(update.json.errors.map((e: { field: string }) => e.field), ['payload.endpoint']);
    assert.equal((await c.get('/workflows')).json.workflows.length, 1, 'only the valid workflow was stored');
  });

  it('refuses one in register, login, PUT /workflows, PUT /users and PUT /notifications', async () => {
    const c = await h().user();
    const id = (await c.post('/workflows', workflowBody(), { headers: key() })).json.id as string;
    const cases: [string, string, string, string][] = [
      ['POST', '/auth/register', `{"email":"${uniqueEmail()}","password":"correct\\udfffhorse"}`, 'password'],
      ['POST', '/auth/login', `{"email":"a\\ud800@example.com","password":"correct horse"}`, 'email'],
      ['PUT', `/workflows/${id}`, `{"name":"x\\ud800","payload":"{}","interval":5,"max_consecutive_job_failures_allowed":3}`, 'name'],
      ['PUT', '/users', `{"notification_preference":"\\udfffALL"}`, 'notification_preference'],
      ['PUT', '/notifications', `{"ids":["\\udfff"]}`, 'ids[0]'],
    ];
    for (const [method, path, body, field] of cases) {
      const res = await c.send(method, path, json(body));
      assert.equal(res.status, 400, `${method} ${path} → ${res.status} ${res.text}`);
      assert.ok(
        res.json.errors?.some((e: { field: string }) => e.field === field),
        `${method} ${path}: ${JSON.stringify(res.json.errors)}`,
      );
    }
  });

  it('refuses a body that is not valid UTF-8 (instead of storing U+FFFD)', async () => {
    const c = await h().user();
    // ED A0 80 is U+D800 encoded as if it were a character: not UTF-8.
    const [head, tail] = JSON.stringify(workflowBody({ name: 'a@@' })).split('@@');
    const bytes = Buffer.concat([Buffer.from(head!), Buffer.from([0xed, 0xa0, 0x80]), Buffer.from(tail!)]);
    const res = await c.send('POST', '/workflows', { rawBody: bytes, headers: { ...key(), 'content-type': 'application/json' } });
    assert.equal(res.status, 400);
    assert.equal(res.json.code, 'malformed_json');
    assert.match(res.json.detail, /UTF-8/);
  });

  it('answers 400 (never 500) for a body nested deeper than the call stack, and reports at most 20 fields', async () => {
    const c = await h().user();
    const deep = `{"name":${'['.repeat(200_000)}${']'.repeat(200_000)}}`;
    for (const path of ['/workflows', '/auth/register']) {
      const res = await c.send('POST', path, json(deep));
      assert.equal(res.status, 400, `${path} → ${res.status} ${res.text.slice(0, 200)}`);
    }
    // Within the values a body may hold (MAX_JSON_VALUES, 10,000): beyond it, api/test/http.test.ts.
    const many = await c.send('PUT', '/notifications', json(`{"ids":[${Array(5_000).fill('"\\udfff"').join(',')}]}`));
    assert.equal(many.status, 400);
    assert.equal(many.json.errors.length, 20);
    assert.deepEqual(many.json.errors.slice(0, 2).map((e: { field: string }) => e.field), ['ids[0]', 'ids[1]']);
  });

  it('refuses a surrogate in the one stored header, Idempotency-Key, naming it', async () => {
    const c = await h().user();
    const body = Buffer.from(JSON.stringify(workflowBody()));
    const head = Buffer.concat([
      Buffer.from(`POST /workflows HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: ${c.cookieHeader()}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\nIdempotency-Key: k`),
      Buffer.from([0xed, 0xbf, 0xbf]), // U+DFFF as if it were a character
      Buffer.from('\r\n\r\n'),
    ]);
    const res = await rawRequest(h().baseUrl, head, body);
    assert.equal(res.status, 400);
    const problem = JSON.parse(res.body) as { code: string; errors: { field: string }[] };
    assert.equal(problem.code, 'idempotency_key_invalid');
    assert.deepEqual(problem.errors.map((e) => e.field), ['Idempotency-Key']);
  });

  it('keeps well-formed astral characters (a surrogate pair) intact', async () => {
    const c = await h().user();
    const res = await c.send('POST', '/workflows', json(JSON.stringify(workflowBody({ name: 'ok' })).replace('"ok"', '"ok \\ud83d\\ude00"')));
    assert.equal(res.status, 201, res.text);
    assert.equal((await c.get(`/workflows/${res.json.id}`)).json.name, 'ok \u{1f600}');
  });
});
