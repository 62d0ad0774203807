import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startOrloj, type RunningOrloj } from '@orloj/server';
import { createLogger, RequestContext } from '@orloj/common/logging';
import { createTestDatabase, type TestDatabase, needService, services, deleteBusObjects } from '@orloj/common/test-support';
import { TestClient } from '@orloj/api/test-support';

type Line = Record<string, unknown>;

/** Resolves with the first line `match` accepts, as soon as it is written. */
function lineWhere(lines: Line[], match: (l: Line) => boolean, what: string, ms = 15_000): Promise<Line> {
  const deadline = Date.now() + ms;
  return new Promise((resolve, reject) => {
    const look = () => {
      const found = lines.find(match);
      if (found) return resolve(found);
      if (Date.now() > deadline) return reject(new Error(`no log line ${what}`));
      setTimeout(look, 25); // poll interval: the log lines arrive from another process
    };
    look();
  });
}

// In one process, but over RabbitMQ as well: there the api's async context cannot
// reach the scheduler's handler, so only the envelope's req_id carries the id.
const combos = [
  { name: 'SQLite + in-process bus', engine: 'sqlite' as const, amqp: false },
  { name: 'PostgreSQL + RabbitMQ', engine: 'postgres' as const, amqp: true },
];

for (const combo of combos) {
  describe(`request ids on bus messages [${combo.name}]`, function () {
    this.timeout(60_000);
    let db: TestDatabase;
    let orloj: RunningOrloj | undefined;
    let dataDir: string;
    const busPrefix = `orloj-reqid-${crypto.randomBytes(4).toString('hex')}.`;
    const lines: Line[] = [];

    before(async function () {
      if (combo.amqp) needService(this, 'amqp');
      db = await createTestDatabase(combo.engine, this);
      dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'orloj-reqid-'));
      const requestContext = new RequestContext();
      // debug: the notifier's line per applied event is a debug line.
      const logger = createLogger({ level: 'debug', context: requestContext, destination: { write: (line: string) => void lines.push(JSON.parse(line) as Line) } });
      orloj = await startOrloj({
        // api, scheduler and runners: an installation by itself, which makes its own keys on RabbitMQ too.
        roles: ['api', 'scheduler', 'runners', 'notifier'],
        logger,
        requestContext,
        env: {
          DATA_DIR: dataDir,
          DATABASE_URL: db.url,
          BUS_URL: combo.amqp ? services.amqp : 'memory:',
          BUS_PREFIX: busPrefix,
          PORT: '0',
          RATE_LIMIT_ENABLED: 'false',
          DOCKER_HOST: 'unix:///nonexistent/docker.sock',
        },
      });
    });

    after(async () => {
      await orloj?.stop();
      if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
      await db?.drop();
      if (combo.amqp && services.amqp) await deleteBusObjects(services.amqp, busPrefix);
    });

    it("logs the scheduler's, the runner's and the notifier's handling of a manual job with the reqId of the api request that scheduled it", async () => {
      const c = new TestClient(`http://127.0.0.1:${orloj!.port}`);
      assert.equal((await c.post('/auth/register', { email: `reqid-${crypto.randomUUID()}@example.com`, password: 'password123' })).status, 201);
      const created = await c.post(
        '/workflows',
        { name: 'traced', kind: 'HEARTBEAT', payload: JSON.stringify({ endpoint: 'http://127.0.0.1:9/' }), interval: 60, max_consecutive_job_failures_allowed: 3 },
        { headers: { 'idempotency-key': crypto.randomUUID() } },
      );
      assert.equal(created.status, 201, created.text);
      const id = created.json.id as string;
      for (const deadline = Date.now() + 15_000; (await c.get(`/workflows/${id}`)).json.build_status !== 'COMPLETED'; ) {
        if (Date.now() > deadline) throw new Error('the build did not complete');
        await new Promise((r) => setTimeout(r, 25)); // poll interval: the build runs in another role
      }
      const scheduled = await c.post(`/workflows/${id}/jobs/schedule`, undefined, { headers: { 'idempotency-key': crypto.randomUUID() } });
      assert.equal(scheduled.status, 201, scheduled.text);
      const reqId = scheduled.headers['x-request-id'];
      assert.equal(typeof reqId, 'string');
      const access = await lineWhere(lines, (l) => l.msg === 'request' && l.reqId === reqId, 'for the request');
      assert.equal(access.path, `/workflows/${id}/jobs/schedule`);
      const woken = await lineWhere(lines, (l) => l.role === 'scheduler' && l.reqId === reqId, 'of the scheduler with the request id');
      assert.equal(woken.msg, 'woken by the api: taking new work now');
      // The job carries the request id to the runner (jobs.request_id, then job.run's envelope): its lines for the job carry it too.
      const started = await lineWhere(lines, (l) => l.role === 'runners' && l.msg === 'job started' && l.reqId === reqId, 'of the runner starting the job');
      assert.equal(started.workflowId, id);
      await lineWhere(lines, (l) => l.role === 'runners' && l.msg === 'job finished' && l.reqId === reqId, 'of the runner finishing the job');
      // Its end is a domain event (the outbox, relayed with the job's request id): the notifier's line for it carries the id too.
      const applied = await lineWhere(lines, (l) => l.role === 'notifier' && l.msg === 'applied a domain event' && l.jobId === scheduled.json.id, 'of the notifier applying the job\'s end');
      assert.equal(applied.reqId, reqId);
      assert.equal(applied.workflowId, id);
      assert.match(String(applied.kind), /^job\.(completed|failed)$/);
      // Events no request caused carry none: the workflow's creation, its build.
      const built = await lineWhere(lines, (l) => l.role === 'notifier' && l.msg === 'applied a domain event' && l.kind === 'build.completed' && l.workflowId === id, 'of the build');
      assert.equal(built.reqId, undefined);
    });
  });
}
