import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { startOrloj, type RunningOrloj } from '@orloj/server';
import { silentLogger } from '@orloj/common/logging';
import { ensureKeyDir } from '@orloj/common/envelope';
import { SseReader, TestClient } from '@orloj/api/test-support';
import { deleteBusObjects, until, needService, services, createTestDatabase, type TestDatabase } from '@orloj/common/test-support';
import { startNginx, type Nginx } from './support/nginx.js';
import { scratchDir } from './support/tls-servers.js';

const TEST_IMAGE = 'localhost/orloj-test/busybox:1';

const key = () => ({ headers: { 'idempotency-key': crypto.randomUUID() } });

/**
 * deploy/nginx/orloj.conf in front of two api replicas of the distributed
 * topology (PostgreSQL, RabbitMQ, the other roles in a third process): /api
 * routing to both, the contract's limits (429, 413) and a live tail through
 * the ingress. The limits are nginx's own: the replicas run without theirs.
 */
describe('nginx ingress in front of two api replicas', function () {
  this.timeout(120_000);
  let dir: string;
  let db: TestDatabase | undefined;
  const prefix = `orloj-ingress-${crypto.randomBytes(4).toString('hex')}.`;
  const started: RunningOrloj[] = [];
  let nginx: Nginx | undefined;
  let replicas: string[];
  /** Through the ingress. */
  let c: TestClient;
  /** Straight to a replica, for polling that must not spend the ingress's rate. */
  let direct: TestClient;

  before(async function () {
    const amqp = needService(this, 'amqp');
    const docker = needService(this, 'docker');
    db = await createTestDatabase('postgres', this);
    dir = scratchDir('ingress');
    const env = {
      DATA_DIR: path.join(dir, 'data'),
      DATABASE_URL: db.url,
      BUS_URL: amqp,
      BUS_PREFIX: prefix,
      PORT: '0',
      OPS_PORT: '0',
      RATE_LIMIT_ENABLED: 'false',
      DOCKER_HOST: docker,
      // the test image is built locally (localhost/…), outside the default allow-list (docs/security.md)
      CONTAINER_REGISTRIES: 'docker.io,localhost',
      LOG_LEVEL: 'silent',
    };
    // The operator's step: distributed processes read their signing keys from DATA_DIR, they never make them.
    await ensureKeyDir(env.DATA_DIR);
    // the first start migrates and writes the shared secrets
    started.push(await startOrloj({ roles: ['scheduler', 'runners', 'log-ingest', 'notifier'], logger: silentLogger, env }));
    for (let i = 0; i < 2; i++) started.push(await startOrloj({ roles: ['api'], logger: silentLogger, env: { ...env, SCHEDULER_ID: `api-${i}` } }));
    replicas = started.slice(1).map((o) => `127.0.0.1:${o.port}`);
    nginx = await startNginx(this, dir, replicas);
    c = new TestClient(`${nginx.url}/api`);
    const reg = await c.post('/auth/register', { email: `ingress-${crypto.randomUUID()}@example.com`, password: 'password123' });
    assert.equal(reg.status, 201, reg.text);
    direct = c.clone();
    (direct as { baseUrl: string }).baseUrl = `http://${replicas[0]}`;
  });

  after(async () => {
    await nginx?.stop();
    for (const o of [...started].reverse()) await o.stop();
    await db?.drop();
    if (services.amqp) await deleteBusObjects(services.amqp, prefix);
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  /**
   * Waits until the ingress's bucket is full again: a request passes, then
   * the burst of 40 refills at 20 per second (the limit's own semantics, not
   * a guess at how long something takes).
   */
  const rested = async () => {
    await until(() => c.get('/workflows').then((r) => r.status), (s) => s !== 429, 'the rate limit to refill', 10_000);
    await new Promise((r) => setTimeout(r, 2_100)); // nginx's limit refills in real time (see above)
  };

  it('serves the routes below /api from both replicas, with one session', async () => {
    const before = nginx!.accessLog().length;
    for (let i = 0; i < 6; i++) {
      const res = await c.get('/workflows');
      assert.equal(res.status, 200, res.text);
    }
    const used = new Set(
      nginx!
        .accessLog()
        .slice(before)
        .filter((l) => l.uri === '/api/workflows')
        .map((l) => l.upstream),
    );
    assert.deepEqual([...used].sort(), [...replicas].sort());
  });

  it('answers 413 with a problem document for a body over 4 MiB, and passes one under it', async () => {
    const big = await c.send('POST', '/workflows', { rawBody: Buffer.alloc(4 * 1024 * 1024 + 1, 'a'), headers: { 'content-type': 'application/json', ...key().headers } });
    assert.equal(big.status, 413);
    assert.equal(big.headers['content-type'], 'application/problem+json');
    assert.equal(big.json.code, 'body_too_large');
    const small = await c.send('POST', '/workflows', { rawBody: Buffer.from('{"name":'), headers: { 'content-type': 'application/json', ...key().headers } });
    assert.equal(small.status, 400, 'reaches orloj, which names the problem');
  });

  it('tails a running job live through the ingress, and refuses a sixth open stream with 429', async () => {
    await rested();
    const created = await c.post(
      '/workflows',
      {
        name: 'talker',
        kind: 'CONTAINER',
        payload: JSON.stringify({ image: TEST_IMAGE, cmd: ['sh', '-c', 'i=0; while [ $i -lt 600 ]; do echo line-$i; i=$((i+1)); sleep 0.2; done'], timeout: '30m' }),
        interval: 60,
        max_consecutive_job_failures_allowed: 3,
        log_retention: true,
      },
      key(),
    );
    assert.equal(created.status, 201, created.text);
    const id = created.json.id as string;
    await until(() => direct.get(`/workflows/${id}`).then((r) => r.json), (w) => w.build_status === 'COMPLETED', 'build COMPLETED', 60_000);
    const job = await c.post(`/workflows/${id}/jobs/schedule`, undefined, key());
    assert.equal(job.status, 201, job.text);
    const events = `/workflows/${id}/jobs/${job.json.id}/events`;
    await until(() => direct.get(`/workflows/${id}/jobs/${job.json.id}`).then((r) => r.json), (j) => j.status === 'RUNNING', 'RUNNING', 60_000);

    const streams: SseReader[] = [];
    try {
      for (let i = 0; i < 5; i++) streams.push(await SseReader.open(c, events));
      for (const s of streams) assert.equal(s.status, 200, s.text);
      // lines printed after the stream opened arrive while the job runs
      // lines printed after the stream opened arrive while the job runs: nothing buffers them
      const first = streams[0]!;
      await first.until((r) => r.logs().length >= 1, 'the first lines', 30_000);
      const seen = first.logs().length;
      await first.until((r) => r.logs().length >= seen + 3, 'lines printed later', 30_000);
      assert.match(first.logs().at(-1)!.json.message, /^line-\d+$/);
      const sixth = await SseReader.open(c, events);
      streams.push(sixth);
      assert.equal(sixth.status, 429);
      assert.equal(JSON.parse(sixth.text).code, 'rate_limited');
      // orloj also serves the route without /api: the limit holds there too
      const bare = c.clone();
      (bare as { baseUrl: string }).baseUrl = nginx!.url;
      const unprefixed = await SseReader.open(bare, events);
      streams.push(unprefixed);
      assert.equal(unprefixed.status, 429);
    } finally {
      for (const s of streams) s.close();
      await c.patch(`/workflows/${id}`);
    }
  });

  it('answers 429 with Retry-After beyond 20 requests per second (burst 40), and 10 logins per minute (burst 5)', async () => {
    await rested();
    const statuses = await Promise.all(Array.from({ length: 90 }, () => c.get('/workflows').then((r) => r)));
    const limited = statuses.filter((r) => r.status === 429);
    const passed = statuses.filter((r) => r.status === 200).length;
    assert.ok(limited.length >= 20, `expected at least 20 of 90 at once to be refused, got ${limited.length}`);
    assert.ok(passed >= 41, `the burst (40, and the one request the rate allows) passes; passed ${passed}`);
    assert.equal(limited[0]!.headers['retry-after'], '1');
    assert.equal(limited[0]!.json.code, 'rate_limited');

    const logins = [];
    for (let i = 0; i < 8; i++) logins.push((await c.post('/auth/login', { email: 'nobody@example.com', password: 'wrong-password' }, { noCookies: true })).status);
    // register spent one; burst 5 allows five more at once, then 429
    assert.ok(logins.includes(429), JSON.stringify(logins));
    assert.ok(logins.slice(0, 4).every((s) => s === 401), JSON.stringify(logins));
  });
});
