import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { RunningOrloj } from '@orloj/server';
import { silentLogger } from '@orloj/common/logging';
import { needService, services, until as kitUntil } from '@orloj/common/test-support';
import { TestClient } from '@orloj/api/test-support';
import { inProcessOrloj, INSTALLATIONS } from './support/in-process-orloj.js';

const TEST_IMAGE = 'localhost/orloj-test/busybox:1';

/** The kit's until with this suite's bound: state changes in other roles, announced by no event we can await. */
const until = <T>(read: () => Promise<T>, ok: (v: T) => boolean, what: string, ms = 30_000): Promise<T> => kitUntil(read, ok, what, ms, { everyMs: 50 });

/** A local HEARTBEAT target whose answer the test sets. */
function target() {
  let status = 200;
  const server = http.createServer((_req, res) => {
    res.statusCode = status;
    res.end('ok');
  });
  return {
    server,
    setStatus: (s: number) => (status = s),
    async start() {
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      return `http://127.0.0.1:${(server.address() as AddressInfo).port}/health`;
    },
  };
}

for (const combo of INSTALLATIONS) {
  describe(`orloj end to end [${combo.name}]`, function () {
    this.timeout(120_000);
    const installation = inProcessOrloj(combo, 'e2e');
    let orloj: RunningOrloj;
    let c: TestClient;
    const t = target();
    let endpoint: string;

    before(async () => {
      endpoint = await t.start();
      orloj = await installation.start({
        roles: ['api', 'scheduler', 'runners'],
        logger: silentLogger,
        env: {
          RUNNER_ALLOW_TARGETS: '127.0.0.0/8',
          CONTAINER_REGISTRIES: 'docker.io,localhost',
          // one clock minute passes in one real second: a one-minute workflow runs every second
          ORLOJ_CLOCK: `accelerated:${Date.now()}:60`,
          SCHEDULER_TICK: '10s',
          JOB_LEASE_TTL: '60s',
          RUNNER_SHUTDOWN_GRACE: '5s',
          ...(services.docker ? { DOCKER_HOST: services.docker } : { DOCKER_HOST: 'unix:///nonexistent/docker.sock' }),
        },
      });
      c = new TestClient(`http://127.0.0.1:${orloj.port}`);
      assert.equal((await c.post('/auth/register', { email: `e2e-${crypto.randomUUID()}@example.com`, password: 'password123' })).status, 201);
    });

    after(() => {
      t.server.close();
    });

    async function create(body: Record<string, unknown>): Promise<string> {
      const res = await c.post('/workflows', { interval: 1, max_consecutive_job_failures_allowed: 3, ...body }, { headers: { 'idempotency-key': crypto.randomUUID() } });
      assert.equal(res.status, 201, res.text);
      return res.json.id;
    }
    const workflow = (id: string) => c.get(`/workflows/${id}`).then((r) => r.json);
    const jobs = (id: string, qs = '') => c.get(`/workflows/${id}/jobs?limit=100${qs}`).then((r) => r.json.jobs as Record<string, any>[]);

    it('builds a HEARTBEAT workflow and runs it every interval', async () => {
      const id = await create({ name: 'ping', kind: 'HEARTBEAT', payload: JSON.stringify({ endpoint }) });
      await until(() => workflow(id), (w) => w.build_status === 'COMPLETED', 'build COMPLETED');
      const done = await until(() => jobs(id, '&status=COMPLETED'), (js) => js.length >= 2, 'two completed runs');
      assert.equal(done[0]!.trigger, 'AUTOMATIC');
      assert.ok(done[0]!.started_at && done[0]!.completed_at);
      await c.patch(`/workflows/${id}`);
    });

    it('runs a manual job at once without moving the schedule', async () => {
      const id = await create({ name: 'manual', kind: 'HEARTBEAT', payload: JSON.stringify({ endpoint }), interval: 60 });
      await until(() => workflow(id), (w) => w.build_status === 'COMPLETED', 'build COMPLETED');
      const res = await c.post(`/workflows/${id}/jobs/schedule`, undefined, { headers: { 'idempotency-key': crypto.randomUUID() } });
      assert.equal(res.status, 201, res.text);
      const job = await until(() => c.get(`/workflows/${id}/jobs/${res.json.id}`).then((r) => r.json), (j) => j.status === 'COMPLETED', 'manual job COMPLETED');
      assert.equal(job.trigger, 'MANUAL');
      await c.patch(`/workflows/${id}`);
    });

    it('fails jobs on an unexpected status and terminates the workflow after the failure limit', async () => {
      const failing = target();
      failing.setStatus(503);
      const url = await failing.start();
      const id = await create({ name: 'down', kind: 'HEARTBEAT', payload: JSON.stringify({ endpoint: url }) });
      const w = await until(() => workflow(id), (x) => x.terminated_at !== undefined, 'auto-termination', 60_000);
      assert.equal(w.consecutive_job_failures_count, 3);
      const failed = await jobs(id, '&status=FAILED');
      assert.equal(failed.length, 3);
      assert.equal(failed[0]!.status_reason_code, 'UNEXPECTED_STATUS_CODE');
      assert.match(failed[0]!.status_reason_message, /503.*200/);
      failing.server.close();
    });

    it('refuses a loopback target unless allowed (here it is allowed) and fails on a refused connection', async () => {
      const closed = target();
      const url = await closed.start();
      closed.server.close();
      const id = await create({ name: 'refused', kind: 'HEARTBEAT', payload: JSON.stringify({ endpoint: url }) });
      const [job] = await until(() => jobs(id, '&status=FAILED'), (js) => js.length >= 1, 'a FAILED job');
      assert.equal(job!.status_reason_code, 'EXECUTION_FAILED');
      await c.patch(`/workflows/${id}`);
    });

    describe('CONTAINER workflows', () => {
      before(function () {
        needService(this, 'docker');
      });

      it('builds, runs a container and completes', async () => {
        const id = await create({ name: 'box', kind: 'CONTAINER', payload: JSON.stringify({ image: TEST_IMAGE, cmd: ['sh', '-c', 'echo hello; echo oops >&2'] }), interval: 60 });
        await until(() => workflow(id), (w) => w.build_status === 'COMPLETED', 'build COMPLETED');
        const res = await c.post(`/workflows/${id}/jobs/schedule`, {}, { headers: { 'idempotency-key': crypto.randomUUID() } });
        const job = await until(() => c.get(`/workflows/${id}/jobs/${res.json.id}`).then((r) => r.json), (j) => j.status === 'COMPLETED', 'container job COMPLETED');
        assert.ok(job.started_at);
        await c.patch(`/workflows/${id}`);
      });

      it('reports a non-zero exit', async () => {
        const id = await create({ name: 'exit3', kind: 'CONTAINER', payload: JSON.stringify({ image: TEST_IMAGE, cmd: ['sh', '-c', 'exit 3'] }), interval: 60 });
        await until(() => workflow(id), (w) => w.build_status === 'COMPLETED', 'build COMPLETED');
        const res = await c.post(`/workflows/${id}/jobs/schedule`, {}, { headers: { 'idempotency-key': crypto.randomUUID() } });
        const job = await until(() => c.get(`/workflows/${id}/jobs/${res.json.id}`).then((r) => r.json), (j) => j.status === 'FAILED', 'FAILED');
        assert.equal(job.status_reason_code, 'NON_ZERO_EXIT');
        assert.match(job.status_reason_message, /3/);
        await c.patch(`/workflows/${id}`);
      });

      it('fails the build of a missing image', async () => {
        const id = await create({ name: 'missing', kind: 'CONTAINER', payload: JSON.stringify({ image: 'localhost/orloj-test/does-not-exist:1' }) });
        const w = await until(() => workflow(id), (w) => w.build_status === 'FAILED', 'build FAILED');
        assert.equal(w.build_error_code, 'IMAGE_PULL_FAILED');
        assert.match(w.build_error, /local image is not present/);
        const res = await c.post(`/workflows/${id}/jobs/schedule`, {}, { headers: { 'idempotency-key': crypto.randomUUID() } });
        assert.equal(res.status, 412);
      });

      it('says why the build of an unpullable registry image failed, until an update builds again (issue 26)', async function () {
        if (!services.docker) this.skip();
        const id = await create({ name: 'unpullable', kind: 'CONTAINER', payload: JSON.stringify({ image: 'docker.io/acme/does-not-exist:1.0' }) });
        const w = await until(() => workflow(id), (w) => w.build_status === 'FAILED', 'build FAILED');
        assert.equal(w.build_error_code, 'IMAGE_PULL_FAILED');
        assert.equal(w.build_error, 'The container image could not be found or pulled.');
        const listed = (await c.get('/workflows?query=unpullable')).json.workflows as Record<string, unknown>[];
        assert.equal(listed[0]!.build_error, w.build_error);
        const put = await c.put(`/workflows/${id}`, { name: 'unpullable', payload: JSON.stringify({ image: TEST_IMAGE, cmd: ['true'] }), interval: 60, max_consecutive_job_failures_allowed: 3 }, { headers: { 'idempotency-key': crypto.randomUUID() } });
        assert.equal(put.status, 204, put.text);
        const rebuilt = await until(() => workflow(id), (w) => w.build_status === 'COMPLETED', 'build COMPLETED');
        assert.equal(rebuilt.build_error, null);
        await c.patch(`/workflows/${id}`);
      });

      it('stops a running container when the workflow is terminated', async () => {
        const id = await create({ name: 'sleeper', kind: 'CONTAINER', payload: JSON.stringify({ image: TEST_IMAGE, cmd: ['sleep', '600'], timeout: '30m' }), interval: 60 });
        await until(() => workflow(id), (w) => w.build_status === 'COMPLETED', 'build COMPLETED');
        const res = await c.post(`/workflows/${id}/jobs/schedule`, {}, { headers: { 'idempotency-key': crypto.randomUUID() } });
        const jobUrl = `/workflows/${id}/jobs/${res.json.id}`;
        await until(() => c.get(jobUrl).then((r) => r.json), (j) => j.status === 'RUNNING', 'RUNNING');
        assert.equal((await c.patch(`/workflows/${id}`)).status, 204);
        const job = await until(() => c.get(jobUrl).then((r) => r.json), (j) => j.status === 'CANCELED', 'CANCELED');
        assert.equal(job.status_reason_code, 'WORKFLOW_TERMINATED');
        assert.equal((await c.delete(`/workflows/${id}`)).status, 204);
      });
    });
  });
}
