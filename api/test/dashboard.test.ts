import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { systemClock } from '@orloj/common/core';
import { silentLogger } from '@orloj/common/logging';
import { ApiServer, DASHBOARD_CSP } from '@orloj/api';
import { createTestDatabase, type TestDatabase } from '@orloj/common/test-support';
import { TestClient } from './support/client.js';
import { testConfig, uniqueEmail } from './support/harness.js';

const HTML = { accept: 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8' };
const INDEX = '<!doctype html><title>orloj</title><div id="root"></div>';

describe('dashboard serving', function () {
  let db: TestDatabase;
  let dir: string;
  let server: ApiServer;
  let c: TestClient;

  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'orloj-dashboard-'));
    fs.mkdirSync(path.join(dir, 'assets'));
    fs.writeFileSync(path.join(dir, 'index.html'), INDEX);
    fs.writeFileSync(path.join(dir, 'assets', 'index-Ab12Cd.js'), 'console.log(1)');
    fs.writeFileSync(path.join(dir, 'assets', 'index-Ab12Cd.js.br'), zlib.brotliCompressSync('console.log(1)'));
    fs.writeFileSync(path.join(dir, 'assets', 'index-Ab12Cd.js.gz'), zlib.gzipSync('console.log(1)'));
    fs.writeFileSync(path.join(dir, 'favicon.svg'), '<svg xmlns="http://www.w3.org/2000/svg"/>');
    db = await createTestDatabase('sqlite');
    server = new ApiServer({ store: db.store, config: testConfig(), clock: systemClock, logger: silentLogger, dashboardDir: dir });
    c = new TestClient(`http://127.0.0.1:${(await server.start()).port}`);
  });

  after(async () => {
    await server?.stop();
    await db?.drop();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('serves index.html to a browser navigating to any app path, revalidated and under a strict CSP', async () => {
    for (const p of ['/', '/login', '/workflows', '/workflows/0190a5b2-7c3e-7d4f-8a1b-2c3d4e5f6a7b/jobs/x']) {
      const res = await c.get(p, { headers: HTML });
      assert.equal(res.status, 200, p);
      assert.equal(res.text, INDEX);
      assert.match(String(res.headers['content-type']), /^text\/html/);
      assert.equal(res.headers['cache-control'], 'no-cache');
      assert.equal(res.headers['content-security-policy'], DASHBOARD_CSP);
      assert.equal(res.headers['x-content-type-options'], 'nosniff');
      assert.equal(res.headers['x-frame-options'], 'DENY');
      assert.equal(res.headers['referrer-policy'], 'same-origin');
    }
  });

  it('sends the same document headers for /index.html by name, and the API policy on every other file', async () => {
    for (const headers of [HTML, {}]) {
      const res = await c.get('/index.html', { headers });
      assert.equal(res.status, 200);
      assert.equal(res.text, INDEX);
      assert.equal(res.headers['content-security-policy'], DASHBOARD_CSP);
      assert.match(DASHBOARD_CSP, /frame-ancestors 'none'/);
      assert.equal(res.headers['x-frame-options'], 'DENY');
      assert.equal(res.headers['referrer-policy'], 'same-origin');
      assert.equal(res.headers['x-content-type-options'], 'nosniff');
    }
    for (const p of ['/assets/index-Ab12Cd.js', '/favicon.svg']) {
      const res = await c.get(p);
      assert.equal(res.status, 200, p);
      assert.match(String(res.headers['content-security-policy']), /^default-src 'none'.*frame-ancestors 'none'/, p);
      assert.equal(res.headers['x-frame-options'], 'DENY', p);
      assert.equal(res.headers['referrer-policy'], 'same-origin', p);
    }
  });

  it('serves hashed assets as immutable for a year and the top-level files revalidated', async () => {
    const asset = await c.get('/assets/index-Ab12Cd.js');
    assert.equal(asset.status, 200);
    assert.equal(asset.text, 'console.log(1)');
    assert.match(String(asset.headers['cache-control']), /max-age=31536000.*immutable/);
    assert.match(String(asset.headers['content-type']), /javascript/);
    const icon = await c.get('/favicon.svg');
    assert.equal(icon.status, 200);
    assert.equal(icon.headers['cache-control'], 'no-cache');
  });

  it("sends the build's compressed copy of a file to a client that accepts it, varying by Accept-Encoding", async () => {
    const raw = (encoding: string) =>
      new Promise<{ headers: http.IncomingHttpHeaders; body: Buffer }>((resolve, reject) => {
        http.get(`${c.baseUrl}/assets/index-Ab12Cd.js`, { headers: { 'accept-encoding': encoding } }, (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (d: Buffer) => chunks.push(d));
          res.on('end', () => resolve({ headers: res.headers, body: Buffer.concat(chunks) }));
        }).on('error', reject);
      });
    const br = await raw('gzip, deflate, br');
    assert.equal(br.headers['content-encoding'], 'br');
    assert.equal(zlib.brotliDecompressSync(br.body).toString(), 'console.log(1)');
    const gz = await raw('gzip');
    assert.equal(gz.headers['content-encoding'], 'gzip');
    assert.equal(zlib.gunzipSync(gz.body).toString(), 'console.log(1)');
    const plain = await raw('identity');
    assert.equal(plain.headers['content-encoding'], undefined);
    assert.equal(plain.body.toString(), 'console.log(1)');
    for (const res of [br, gz, plain]) {
      assert.match(String(res.headers.vary), /accept-encoding/i);
      assert.match(String(res.headers['content-type']), /javascript/);
    }
  });

  it('answers a missing asset, a traversal attempt and a missing top-level file with the API 404 problem', async () => {
    for (const p of ['/assets/nope.js', '/assets/..%2f..%2fetc%2fpasswd', '/nope.txt']) {
      const res = await c.get(p, { headers: HTML });
      assert.equal(res.status, 404, p);
      assert.match(String(res.headers['content-type']), /problem\+json/, p);
    }
    // sent as-is: a URL parser would resolve the dots before they left the client
    const raw = await new Promise<http.IncomingMessage>((resolve, reject) =>
      http.get({ host: '127.0.0.1', port: new URL(c.baseUrl).port, path: '/assets/../../../../etc/passwd', headers: HTML }, resolve).on('error', reject),
    );
    raw.resume();
    assert.equal(raw.statusCode, 404);
  });

  it('never shadows the API: JSON clients, the /api prefix and non-GET methods reach the routes', async () => {
    // curl and fetch send */* or application/json, never text/html by name
    assert.equal((await c.get('/workflows')).status, 401);
    assert.equal((await c.get('/workflows', { headers: { accept: 'application/json' } })).status, 401);
    // below /api the API answers even a browser
    const api = await c.get('/api/workflows', { headers: HTML });
    assert.equal(api.status, 401);
    assert.match(String(api.headers['content-type']), /problem\+json/);
    assert.equal((await c.get('/api/openapi.json', { headers: HTML })).json.openapi, '3.1.0');
    // a file-like path that is an API route is not taken for a dashboard file
    assert.equal((await c.get('/openapi.json', { headers: HTML })).json.openapi, '3.1.0');
    const reg = await c.post('/auth/register', { email: uniqueEmail(), password: 'correct horse' }, { headers: HTML });
    assert.equal(reg.status, 201);
    assert.equal((await c.get('/api/users')).status, 200);
  });

  it('serves no dashboard when none is configured', async () => {
    const bare = new ApiServer({ store: db.store, config: testConfig(), clock: systemClock, logger: silentLogger });
    try {
      const res = await new TestClient(`http://127.0.0.1:${(await bare.start()).port}`).get('/', { headers: HTML });
      assert.equal(res.status, 404);
      assert.match(String(res.headers['content-type']), /problem\+json/);
    } finally {
      await bare.stop();
    }
  });
});
