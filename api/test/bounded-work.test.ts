import assert from 'node:assert/strict';
import net from 'node:net';
import { once } from 'node:events';
import { systemClock } from '@orloj/common/core';
import { silentLogger } from '@orloj/common/logging';
import { insertJob, waitFor } from '@orloj/common/test-support';
import { ApiServer } from '@orloj/api';
import { HeavyRequests } from '../src/http/heavy-requests.js';
import { LOG_PAGE_MAX_TEXT } from '../src/routes/logs.routes.js';
import { WORKFLOW_PAGE_MAX_PAYLOAD_BYTES } from '../src/routes/workflows.routes.js';
import { describeApi, key, testConfig, uniqueEmail, workflowBody } from './support/harness.js';
import { TestClient } from './support/client.js';
import { containerWorkflow, insertLines, lines, logsPath } from './support/logs.js';

/**
 * Issue 29: the work one request can cause, and the answer it gets, are
 * bounded whatever it holds; pages are bounded in bytes as well as rows; the
 * process holds a budget of heavy requests; connections are limited per
 * client address and in time. (The whole server under such requests, with
 * /livez measured meanwhile: server/test/availability.test.ts.)
 */
const json = (text: string) => ({ rawBody: text, headers: { ...key(), 'content-type': 'application/json' } });
const fields = (res: { json: { errors?: { field: string }[] } }) => res.json.errors?.map((e) => e.field);

describeApi('bounded validation', (h) => {
  it('refuses a body of more than 10,000 JSON values before parsing it, naming `body`', async () => {
    const unknown = Array.from({ length: 10_001 }, (_, i) => `"k${i}":1`).join(',');
    for (const path of ['/auth/login', '/auth/register']) {
      const res = await h().client().send('POST', path, json(`{"email":"a@example.com","password":"correct horse",${unknown}}`));
      assert.equal(res.status, 400, res.text.slice(0, 200));
      assert.deepEqual(res.json.errors, [{ field: 'body', message: 'must hold at most 10000 JSON values' }]);
    }
    // Commas and brackets inside strings are text, not values.
    const c = await h().user();
    const name = '[,{'.repeat(60);
    assert.equal((await c.post('/workflows', workflowBody({ name }), { headers: key() })).status, 201);
  });

  it('reports every bad field of a body small enough to be valid, and only the first beyond (a body no schema admits)', async () => {
    const some = Object.fromEntries(Array.from({ length: 30 }, (_, i) => [`extra${i}`, 1]));
    const small = await h().client().post('/auth/login', { email: 'a@example.com', password: 'correct horse', ...some });
    assert.equal(small.status, 400);
    // Every field found, at most 20 of them answered.
    assert.deepEqual(fields(small), Array.from({ length: 20 }, (_, i) => `extra${i}`));
    const many = Object.fromEntries(Array.from({ length: 5_000 }, (_, i) => [`extra${i}`, 1]));
    const large = await h().client().post('/auth/login', { email: 'a@example.com', password: 'correct horse', ...many });
    assert.equal(large.status, 400);
    assert.deepEqual(fields(large), ['extra0']);
  });

  it('keeps a problem document small however long the names in the request', async () => {
    const long = 'k'.repeat(1_000_000);
    const res = await h().client().send('POST', '/auth/login', json(`{"email":"a@example.com","password":"correct horse","${long}":1}`));
    assert.equal(res.status, 400);
    assert.ok(res.text.length < 1_000, `${res.text.length} bytes`);
    assert.match(res.json.errors[0].field as string, /^k{199}…$/);
  });

  it("bounds a payload's own JSON the same way, naming `payload`", async () => {
    const c = await h().user();
    const env = Object.fromEntries(Array.from({ length: 10_001 }, (_, i) => [`V${i}`, 'x']));
    const tooMany = await c.post('/workflows', workflowBody({ kind: 'CONTAINER', payload: JSON.stringify({ image: 'alpine:3.20', env }) }), { headers: key() });
    assert.equal(tooMany.status, 400);
    assert.deepEqual(tooMany.json.errors, [{ field: 'payload', message: 'must hold at most 10000 JSON values' }]);
    // Past every valid payload's size, only the first mistake is looked for.
    const bigEnv = Object.fromEntries(Array.from({ length: 3_000 }, (_, i) => [`V${i}`, 'x']));
    const large = await c.post('/workflows', workflowBody({ kind: 'CONTAINER', payload: JSON.stringify({ image: 'alpine:3.20', env: bigEnv }) }), { headers: key() });
    assert.equal(large.status, 400);
    assert.deepEqual(fields(large), ['payload.env']);
    assert.equal((await c.get('/workflows')).json.workflows.length, 0, 'nothing was stored');
  });
});

describeApi('pages bounded in bytes', (h) => {
  it('ends a workflow page at 4 MiB of payload, with a cursor that lists the rest, each workflow once', async () => {
    const c = await h().user();
    const head = '{"endpoint":"https://example.com/"';
    const wide = `${head}${' '.repeat(1_048_576 - head.length - 1)}}`;
    const ids: string[] = [];
    // Small, wide, small…: inline payloads and ones read alone share a page.
    for (let i = 0; i < 7; i++) {
      const res = await c.post('/workflows', workflowBody({ name: `w${i}`, payload: i % 2 ? workflowBody().payload : wide }), { headers: key() });
      assert.equal(res.status, 201, res.text.slice(0, 200));
      ids.unshift(res.json.id as string);
    }
    const pages: { workflows: { id: string; payload: string }[]; cursor: string }[] = [];
    for (let cursor = ''; ; ) {
      const res = await c.get(`/workflows?limit=100${cursor ? `&cursor=${cursor}` : ''}`);
      assert.equal(res.status, 200);
      pages.push(res.json);
      cursor = res.json.cursor as string;
      if (!cursor) break;
    }
    // Four wide payloads are 4 MiB exactly: with the small ones between them the fourth no longer fits.
    assert.deepEqual(
      pages.map((p) => p.workflows.length),
      [6, 1],
    );
    for (const page of pages) {
      const bytes = page.workflows.reduce((n, w) => n + Buffer.byteLength(w.payload), 0);
      assert.ok(page.workflows.length === 1 || bytes <= WORKFLOW_PAGE_MAX_PAYLOAD_BYTES, `${bytes} bytes of payload in a page`);
    }
    assert.deepEqual(
      pages.flatMap((p) => p.workflows.map((w) => w.id)),
      ids,
    );
    assert.equal(pages.flatMap((p) => p.workflows).filter((w) => w.payload === wide).length, 4, 'every wide payload sent whole');
  });

  it('ends a search page at 4 Mi characters of highlighted text, with a cursor that reaches every line', async () => {
    const c = await h().user();
    const wid = await containerWorkflow(c);
    const job = await insertJob(h().db.store, wid, 'COMPLETED');
    // 16 KiB of `a` (the longest line): `q=a` marks every character, 65 times the line.
    await insertLines(h(), job.id, job.attempts, lines(Array.from({ length: 12 }, () => 'a'.repeat(16_384))));
    const seen: number[] = [];
    let pages = 0;
    for (let cursor = ''; ; pages++) {
      const res = await c.get(`${logsPath(wid, job.id, '/search')}?q=a&limit=1000${cursor ? `&cursor=${cursor}` : ''}`);
      assert.equal(res.status, 200);
      const text = (res.json.logs as { message: string }[]).reduce((n, l) => n + l.message.length, 0);
      assert.ok(text <= LOG_PAGE_MAX_TEXT, `${text} characters in a page`);
      seen.push(...res.json.logs.map((l: { sequence_num: number }) => l.sequence_num));
      cursor = res.json.cursor as string;
      if (!cursor) break;
    }
    assert.ok(pages >= 3, `${pages + 1} pages`);
    assert.deepEqual(seen, Array.from({ length: 12 }, (_, i) => 11 - i));
  });
});

describeApi(
  'connection limits',
  (h) => {
    /** A connection that sends nothing (or `bytes`), resolved when the server closes it. */
    async function idle(bytes?: string, localAddress = '127.0.0.1'): Promise<{ socket: net.Socket; closed: Promise<string> }> {
      const port = Number(new URL(h().baseUrl).port);
      const socket = net.connect({ port, host: '127.0.0.1', localAddress });
      let received = '';
      socket.on('data', (d: Buffer) => (received += d.toString()));
      socket.on('error', () => {});
      const closed = once(socket, 'close').then(() => received);
      await once(socket, 'connect');
      if (bytes) socket.write(bytes);
      return { socket, closed };
    }

    const REQUEST = 'GET /openapi.json HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n';

    it('closes a connection that sends nothing, and answers 408 to headers that never end, at HTTP_HEADERS_TIMEOUT', async () => {
      const silent = await idle();
      const partial = await idle('GET /users HTTP/1.1\r\nHost: 127.0.0.1\r\n');
      // Closed by the server (1 s here), long before the test's own timeout: at once, or after a 408.
      assert.match(await silent.closed, /^$|^HTTP\/1\.1 408 Request Timeout/);
      assert.match(await partial.closed, /^$|^HTTP\/1\.1 408 Request Timeout/);
    });

    it('closes connections past HTTP_MAX_CONNECTIONS_PER_CLIENT from one address at once, not those of another', async () => {
      const held = [await idle(), await idle(), await idle()];
      const fourth = await idle();
      assert.equal(await fourth.closed, '', 'the fourth is closed');
      // Another address is still served, and so is the first once one of its connections goes.
      const fromElsewhere = await idle(REQUEST, '127.0.0.2');
      assert.match(await fromElsewhere.closed, /^HTTP\/1\.1 200/);
      for (const c of held) c.socket.destroy();
      await Promise.all(held.map((c) => c.closed));
      const again = await idle(REQUEST);
      assert.match(await again.closed, /^HTTP\/1\.1 200/);
    });
  },
  { env: { HTTP_HEADERS_TIMEOUT: '1s', HTTP_MAX_CONNECTIONS_PER_CLIENT: '3' } },
);

describe('heavy requests: the process budget', () => {
  const userA = 'a';
  const userB = 'b';

  it('admits up to the budget and the per-user share, the rest in arrival order as places free', async () => {
    const heavy = new HeavyRequests({ max: 2, perUser: 1, waitMs: 60_000 });
    const a1 = await heavy.acquire(userA);
    const order: string[] = [];
    const a2 = heavy.acquire(userA).then((r) => (order.push('a2'), r));
    const b1 = await heavy.acquire(userB);
    const b2 = heavy.acquire(userB).then((r) => (order.push('b2'), r));
    assert.deepEqual(heavy.metrics(), { running: 2, waiting: 2, refused: 0 });
    b1();
    // b2 is behind a2, but a2's user is at its share: b2 passes it.
    (await b2)();
    a1();
    (await a2)();
    assert.deepEqual(order, ['b2', 'a2']);
    assert.deepEqual(heavy.metrics(), { running: 0, waiting: 0, refused: 0 });
  });

  it('answers 503 with Retry-After to a request that waited too long, and forgets one whose client left', async () => {
    const heavy = new HeavyRequests({ max: 1, perUser: 1, waitMs: 50 });
    const release = await heavy.acquire(userA);
    await assert.rejects(heavy.acquire(userB), (err: { code?: string }) => err.code === 'service_unavailable');
    const gone = new AbortController();
    const waiting = heavy.acquire(userB, gone.signal);
    gone.abort();
    await assert.rejects(waiting);
    assert.deepEqual(heavy.metrics(), { running: 1, waiting: 0, refused: 1 });
    release();
    assert.deepEqual(heavy.metrics(), { running: 0, waiting: 0, refused: 1 });
  });
});

describeApi('heavy requests: held until the answer is sent', (h) => {
  it('keeps a place while a download is unread, and gives it to the next request once the client goes', async () => {
    const server = new ApiServer({ store: h().db.store, config: testConfig({ HTTP_MAX_HEAVY_REQUESTS: '1' }), clock: systemClock, logger: silentLogger });
    const { port } = await server.start();
    try {
      const base = `http://127.0.0.1:${port}`;
      const reader = new TestClient(base);
      const email = uniqueEmail();
      assert.equal((await reader.post('/auth/register', { email, password: 'correct horse' })).status, 201);
      const wid = await containerWorkflow(reader);
      const job = await insertJob(h().db.store, wid, 'COMPLETED');
      await insertLines(h(), job.id, job.attempts, lines(Array.from({ length: 20_000 }, (_, i) => `${i} ${'x'.repeat(1_000)}`)));
      // A download (20 MB) whose client reads nothing: its answer cannot be sent.
      const slow = net.connect({ port, host: '127.0.0.1' });
      slow.on('error', () => {});
      slow.write(`GET ${logsPath(wid, job.id, '/raw')} HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: ${reader.cookieHeader()}\r\n\r\n`);
      slow.pause();
      await waitFor(() => server.heavyRequests.running === 1, 'the download holds the place', 10_000);
      const other = new TestClient(base);
      assert.equal((await other.post('/auth/register', { email: uniqueEmail(), password: 'correct horse' })).status, 201);
      let answered = false;
      const page = other.get('/workflows').then((r) => ((answered = true), r));
      await waitFor(() => server.heavyRequests.waiting === 1, 'the page waits', 10_000);
      assert.equal(answered, false);
      // Light routes do not wait.
      assert.equal((await other.get('/users')).status, 200);
      slow.destroy();
      assert.equal((await page).status, 200);
      await waitFor(() => server.heavyRequests.running === 0, 'every place given back', 10_000);
    } finally {
      await server.stop();
    }
  });
});
