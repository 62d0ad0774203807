import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import type { RunningOrloj } from '@orloj/server';
import { createLogger, RequestContext } from '@orloj/common/logging';
import { until } from '@orloj/common/test-support';
import { TestClient } from '@orloj/api/test-support';
import { inProcessOrloj, INSTALLATIONS } from './support/in-process-orloj.js';

type Line = Record<string, unknown>;

/** The first line `match` accepts, once it is written. */
async function lineWhere(lines: Line[], match: (l: Line) => boolean, what: string): Promise<Line> {
  return (await until(async () => lines.find(match), (l) => l !== undefined, `a log line ${what}`, 30_000, { everyMs: 25 }))!;
}

// In one process, but over RabbitMQ as well: there the api's async context cannot
// reach the scheduler's handler, so only the envelope's req_id carries the id.
for (const combo of INSTALLATIONS) {
  describe(`request ids on bus messages [${combo.name}]`, function () {
    this.timeout(60_000);
    const installation = inProcessOrloj(combo, 'reqid');
    let orloj: RunningOrloj | undefined;
    const lines: Line[] = [];

    before(async () => {
      const requestContext = new RequestContext();
      // debug: the notifier's line per applied event is a debug line.
      const logger = createLogger({ level: 'debug', context: requestContext, destination: { write: (line: string) => void lines.push(JSON.parse(line) as Line) } });
      orloj = await installation.start({
        // api, scheduler and runners: an installation by itself, which makes its own keys on RabbitMQ too.
        roles: ['api', 'scheduler', 'runners', 'notifier'],
        logger,
        requestContext,
        env: {
          DOCKER_HOST: 'unix:///nonexistent/docker.sock',
        },
      });
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
