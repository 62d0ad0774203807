import assert from 'node:assert/strict';
import net from 'node:net';
import { ManualClock } from '@orloj/common/core';
import { describeApi, key, uniqueEmail, workflowBody } from './support/harness.js';
import { rawRequest } from './support/client.js';

describeApi('http conventions', (h) => {
  it('answers 404 route_not_found as problem details for an unknown route', async () => {
    const res = await h().client().get('/nope');
    assert.equal(res.status, 404);
    assert.equal(res.headers['content-type'], 'application/problem+json');
    assert.deepEqual(Object.keys(res.json).sort(), ['code', 'detail', 'status', 'title', 'type']);
    assert.equal(res.json.code, 'route_not_found');
  });

  it('gives every response its own X-Request-Id, ignoring one sent by a client that is not a trusted proxy', async () => {
    const c = h().client();
    const answers = [await c.get('/nope'), await c.send('DELETE', '/users'), await c.send('GET', '/users', { headers: { 'x-request-id': 'forged-1' } })];
    const ids = answers.map((r) => String(r.headers['x-request-id']));
    for (const id of ids) assert.match(id, /^[0-9a-f-]{36}$/);
    assert.equal(new Set(ids).size, ids.length);
  });

  it('answers 405 with Allow for a wrong method', async () => {
    const c = await h().user();
    const res = await c.send('DELETE', '/users');
    assert.equal(res.status, 405);
    assert.equal(res.json.code, 'method_not_allowed');
    assert.match(String(res.headers.allow), /GET/);
    assert.match(String(res.headers.allow), /PUT/);
    const patch = await c.send('PATCH', '/workflows');
    assert.equal(patch.status, 405);
  });

  it('serves every route under /api too', async () => {
    const c = h().client();
    const res = await c.post('/api/auth/register', { email: uniqueEmail(), password: 'password123' });
    assert.equal(res.status, 201);
    assert.equal((await c.get('/api/users')).status, 200);
    assert.equal((await c.post('/api/workflows', workflowBody(), { headers: key() })).status, 201);
    assert.equal((await c.get('/api/nope')).json.code, 'route_not_found');
  });

  it('answers 413 for a body over 4 MiB declared by Content-Length, before reading it', async () => {
    const c = await h().user();
    const big = JSON.stringify(workflowBody({ name: 'x'.repeat(4 * 1024 * 1024) }));
    const res = await c.send('POST', '/workflows', { rawBody: big, headers: { ...key(), 'content-type': 'application/json' } });
    assert.equal(res.status, 413);
    assert.equal(res.json.code, 'body_too_large');
  });

  it('answers 413 for a chunked body that grows past 4 MiB', async () => {
    const c = await h().user();
    const { port, hostname } = new URL(h().baseUrl);
    const head = [
      'POST /workflows HTTP/1.1',
      `host: ${hostname}:${port}`,
      'content-type: application/json',
      'transfer-encoding: chunked',
      `cookie: ${c.cookieHeader()}`,
      ...Object.entries(key()).map(([k, v]) => `${k}: ${v}`),
      '',
      '',
    ].join('\r\n');
    const chunk = Buffer.alloc(64 * 1024, 'a');
    // Sends chunk after chunk, each once the last is written, and stops at the first byte of
    // an answer: the server may answer and close before the body ends, and a client still
    // sending then would see a reset that can discard the answer.
    const answer = await new Promise<string>((resolve, reject) => {
      const received: Buffer[] = [];
      let answered = false;
      const socket = net.connect(Number(port), hostname, async () => {
        socket.write(head);
        for (let sent = 0; !answered && sent <= 6 * 1024 * 1024; sent += chunk.length) {
          await new Promise<unknown>((done) => socket.write(Buffer.concat([Buffer.from(`${chunk.length.toString(16)}\r\n`), chunk, Buffer.from('\r\n')]), done));
        }
        if (!answered) socket.write('0\r\n\r\n');
      });
      socket.on('data', (b) => {
        answered = true;
        received.push(b);
        const text = Buffer.concat(received).toString('utf8');
        const end = text.indexOf('\r\n\r\n');
        const length = Number(/\r\ncontent-length: (\d+)/i.exec(text)?.[1] ?? NaN);
        if (end >= 0 && Buffer.byteLength(text) - end - 4 >= length) {
          socket.destroy();
          resolve(text);
        }
      });
      socket.on('error', (err) => (answered ? undefined : reject(err)));
      socket.on('close', () => reject(new Error(`the connection closed before a whole answer: ${Buffer.concat(received).toString('utf8')}`)));
    });
    assert.match(answer, /^HTTP\/1\.1 413 /);
    assert.equal(JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4)).code, 'body_too_large');
    assert.equal((await c.get('/workflows')).json.workflows.length, 0, 'nothing was created');
  });

  it('accepts a body of exactly 4 MiB (then validates it)', async () => {
    const c = await h().user();
    const base = JSON.stringify(workflowBody({ name: '' }));
    const padded = base.replace('"name":""', `"name":"${'x'.repeat(4 * 1024 * 1024 - base.length)}"`);
    assert.equal(Buffer.byteLength(padded), 4 * 1024 * 1024);
    const res = await c.send('POST', '/workflows', { rawBody: padded, headers: { ...key(), 'content-type': 'application/json' } });
    assert.equal(res.status, 400);
    assert.deepEqual(res.json.errors.map((e: { field: string }) => e.field), ['name']);
  });

  it('answers 400 for malformed JSON and for a non-JSON body', async () => {
    const c = await h().user();
    const bad = await c.send('POST', '/workflows', { rawBody: '{"name":', headers: { ...key(), 'content-type': 'application/json' } });
    assert.equal(bad.status, 400);
    assert.equal(bad.json.code, 'malformed_json');
    const form = await c.send('POST', '/workflows', { rawBody: 'name=x', headers: { ...key(), 'content-type': 'application/x-www-form-urlencoded' } });
    assert.equal(form.status, 400);
    assert.equal(form.json.code, 'unsupported_media_type');
    const array = await c.send('POST', '/workflows', { rawBody: '[1]', headers: { ...key(), 'content-type': 'application/json' } });
    assert.deepEqual(array.json.errors, [{ field: 'body', message: 'must be a JSON object' }]);
  });

  it('answers a problem document even when Node refuses the request line or headers', async () => {
    const res = await rawRequest(h().baseUrl, Buffer.from('GET /users HTTP/1.1\r\nHost: x\r\nX-Bad: a\x7fb\r\n\r\n', 'latin1'));
    assert.equal(res.status, 400);
    assert.equal(JSON.parse(res.body).code, 'malformed_request');
    assert.match(res.head, /^X-Request-Id: [0-9a-f-]{36}$/m, 'every response carries a request id');
  });

  it('never answers a stack trace or internals', async () => {
    const c = await h().user();
    const res = await c.send('POST', '/workflows', { rawBody: '{"a":\u0000}', headers: { ...key(), 'content-type': 'application/json' } });
    assert.equal(res.status, 400);
    assert.doesNotMatch(res.text, /at .*\.(ts|js):\d+|node_modules|SELECT|INSERT/);
  });
});

describeApi(
  'CORS',
  (h) => {
    it('answers a preflight from an allowed origin with credentials and the allowed headers', async () => {
      const res = await h().client().send('OPTIONS', '/workflows', {
        headers: { origin: 'https://app.example.com', 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type,idempotency-key' },
      });
      assert.equal(res.status, 204);
      assert.equal(res.headers['access-control-allow-origin'], 'https://app.example.com');
      assert.equal(res.headers['access-control-allow-credentials'], 'true');
      assert.match(String(res.headers['access-control-allow-headers']), /Idempotency-Key/);
      assert.match(String(res.headers['access-control-allow-headers']), /X-CSRF-Token/);
      assert.match(String(res.headers['access-control-allow-methods']), /PATCH/);
      assert.match(String(res.headers.vary), /Origin/);
    });

    it('gives no CORS headers to another origin', async () => {
      const res = await h().client().send('OPTIONS', '/workflows', {
        headers: { origin: 'https://evil.example', 'access-control-request-method': 'POST' },
      });
      assert.equal(res.headers['access-control-allow-origin'], undefined);
    });

    it('accepts a mutating request from an allowed origin', async () => {
      const c = await h().user();
      const res = await c.post('/auth/validate', undefined, { headers: { origin: 'https://app.example.com' } });
      assert.equal(res.status, 200);
      assert.equal(res.headers['access-control-allow-origin'], 'https://app.example.com');
    });
  },
  { env: { SERVER_ALLOWED_ORIGINS: 'https://app.example.com' } },
);

describeApi(
  'rate limits',
  (h) => {
    const from = (address: string) => ({ 'x-forwarded-for': address });

    it('allows 1 + burst (5) logins at once per address, then 429 with Retry-After', async () => {
      const c = h().client();
      const statuses: number[] = [];
      let last;
      for (let i = 0; i < 7; i++) {
        last = await c.post('/auth/login', { email: 'nobody@example.com', password: 'whatever1' }, { headers: from('203.0.113.7') });
        statuses.push(last.status);
      }
      assert.deepEqual(statuses, [401, 401, 401, 401, 401, 401, 429]);
      assert.equal(last!.json.code, 'rate_limited');
      // 10 per minute drains one request every 6 seconds.
      assert.ok(Number(last!.headers['retry-after']) >= 1 && Number(last!.headers['retry-after']) <= 6);
      // another address has its own bucket
      const other = await c.post('/auth/login', { email: 'nobody@example.com', password: 'whatever1' }, { headers: from('203.0.113.8') });
      assert.equal(other.status, 401);
    });

    it('allows 1 + burst (40) other requests at once per address, then 429', async () => {
      const c = h().client();
      const statuses: number[] = [];
      for (let i = 0; i < 42; i++) statuses.push((await c.get('/users', { headers: from('198.51.100.9') })).status);
      assert.deepEqual(statuses.slice(0, 41), Array(41).fill(401));
      assert.equal(statuses[41], 429);
    });

    it('ignores X-Forwarded-For from a peer that is not a trusted proxy', async () => {
      // the test server trusts 127.0.0.1 only as configured below; a spoofed hop list from it is used,
      // but the right-most untrusted hop wins over a forged left-most one
      const c = h().client();
      for (let i = 0; i < 6; i++) {
        await c.post('/auth/login', { email: 'x@example.com', password: 'whatever1' }, { headers: from(`10.9.9.${i}, 192.0.2.50`) });
      }
      const res = await c.post('/auth/login', { email: 'x@example.com', password: 'whatever1' }, { headers: from('10.0.0.1, 192.0.2.50') });
      assert.equal(res.status, 429);
    });
  },
  // A clock that stands still: buckets never drain during the test, so counts are exact.
  { env: { RATE_LIMIT_ENABLED: 'true', TRUSTED_PROXIES: '127.0.0.1/32,::1' }, clock: new ManualClock(Date.now()) },
);

describeApi(
  'rate limits without a trusted proxy',
  (h) => {
    it('keys on the socket address and ignores X-Forwarded-For', async () => {
      const c = h().client();
      const statuses: number[] = [];
      for (let i = 0; i < 7; i++) {
        const res = await c.post('/auth/login', { email: 'x@example.com', password: 'whatever1' }, { headers: { 'x-forwarded-for': `192.0.2.${i}` } });
        statuses.push(res.status);
      }
      assert.equal(statuses[6], 429);
    });
  },
  { env: { RATE_LIMIT_ENABLED: 'true' }, clock: new ManualClock(Date.now()) },
);
