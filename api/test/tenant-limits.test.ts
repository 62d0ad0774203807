import assert from 'node:assert/strict';
import { describeApi, key, testConfig, workflowBody } from './support/harness.js';
import type { TestClient } from './support/client.js';

/**
 * Issue 14, findings 2-5 at the HTTP surface: what a tenant's CONTAINER
 * payload may ask for is the operator's choice (docs/security.md).
 */
const container = (payload: Record<string, unknown>) => workflowBody({ kind: 'CONTAINER', payload: JSON.stringify(payload) });
const fields = (res: { json: { errors?: { field: string }[] } }) => (res.json.errors ?? []).map((e) => e.field).sort();

async function refused(c: TestClient, payload: Record<string, unknown>, field: string): Promise<string> {
  const res = await c.post('/workflows', container(payload), { headers: key() });
  assert.equal(res.status, 400, `${JSON.stringify(payload)}: ${res.text}`);
  assert.equal(res.json.code, 'validation_failed');
  assert.deepEqual(fields(res), [field], JSON.stringify(payload));
  return (res.json.errors as { message: string }[])[0]!.message;
}

async function accepted(c: TestClient, payload: Record<string, unknown>): Promise<string> {
  const res = await c.post('/workflows', container(payload), { headers: key() });
  assert.equal(res.status, 201, `${JSON.stringify(payload)}: ${res.text}`);
  return res.json.id as string;
}

describe('tenant limit settings', () => {
  it('default to a closed, modest setup', () => {
    const { containers, tenants } = testConfig({ CONTAINER_REGISTRIES: '' });
    assert.deepEqual(containers.registries, ['docker.io']);
    assert.equal(containers.networkEnabled, false);
    assert.equal(containers.maxMemoryMb, 1024);
    assert.equal(containers.maxCpus, 1);
    assert.equal(containers.maxTimeoutMs, 30 * 60_000);
    assert.equal(containers.maxLogLines, 100_000);
    assert.equal(containers.maxLogBytes, 32 * 1024 * 1024);
    assert.equal(tenants.maxWorkflowsPerUser, 500);
    assert.equal(tenants.maxActiveJobsPerUser, 0, 'no hard per-user limit by default: the hand-out is fair (ADR 0014)');
  });

  it('refuse to start on bad values, naming the variable', () => {
    const cases: [Record<string, string>, RegExp][] = [
      [{ CONTAINER_REGISTRIES: 'docker.io,https://evil.example/' }, /CONTAINER_REGISTRIES/],
      [{ CONTAINER_NETWORK_ENABLED: 'maybe' }, /CONTAINER_NETWORK_ENABLED/],
      [{ CONTAINER_MAX_MEMORY_MB: '2' }, /CONTAINER_MAX_MEMORY_MB/],
      [{ CONTAINER_MAX_CPUS: '0' }, /CONTAINER_MAX_CPUS/],
      [{ CONTAINER_MAX_CPUS: 'lots' }, /CONTAINER_MAX_CPUS/],
      [{ CONTAINER_MAX_TIMEOUT: '2h' }, /CONTAINER_MAX_TIMEOUT/],
      [{ JOB_LOG_MAX_LINES: '0' }, /JOB_LOG_MAX_LINES/],
      [{ JOB_LOG_MAX_MB: '-1' }, /JOB_LOG_MAX_MB/],
      [{ MAX_WORKFLOWS_PER_USER: '0' }, /MAX_WORKFLOWS_PER_USER/],
      [{ MAX_ACTIVE_JOBS_PER_USER: 'x' }, /MAX_ACTIVE_JOBS_PER_USER/],
    ];
    for (const [env, pattern] of cases) assert.throws(() => testConfig(env), pattern, JSON.stringify(env));
  });
});

describeApi('container payload limits (defaults)', (h) => {
  it('refuses registries outside CONTAINER_REGISTRIES, loopback and metadata addresses included (SSRF)', async () => {
    const c = await h().user();
    for (const image of [
      '127.0.0.1:18390/probe/x:1',
      'localhost:18390/probe/x:1',
      '169.254.169.254/latest:1',
      '169.254.169.254:80/latest:1',
      'registry.example.com:5000/team/app:v1',
      'ghcr.io/team/app:1',
      'index.docker.io.evil.example/x:1',
    ]) {
      const message = await refused(c, { image }, 'payload.image');
      assert.match(message, /registry/);
    }
    // Docker Hub references, however spelled, and the test images (allowed in the harness like an operator would).
    for (const image of ['alpine:3', 'library/alpine:3.20', 'docker.io/library/alpine:3', 'index.docker.io/team/app:1', 'localhost/orloj-test/busybox:1']) {
      await accepted(c, { image });
    }
  });

  it('refuses image ids, which runtimes find in their local store whatever registry they came from (issue 29)', async () => {
    const c = await h().user();
    const id = '9578d416c758b94a950dfbc32a161b656dc396b558386359e900e398a24f45d9';
    for (const image of [`sha256:${id}`, id, 'sha256:9578d416']) {
      assert.match(await refused(c, { image }, 'payload.image'), /image id/);
    }
    // A short id prefix is a valid name (docker.io/library/9578d416:latest): the runner reads it as one.
    await accepted(c, { image: '9578d416' });
  });

  it('refuses a network other than none: networked containers are off by default', async () => {
    const c = await h().user();
    const message = await refused(c, { image: 'alpine:3', network: 'bridge' }, 'payload.network');
    assert.match(message, /not enabled/);
    await accepted(c, { image: 'alpine:3', network: 'none' });
  });

  it('refuses memory, CPUs and timeouts above the maxima, naming each field', async () => {
    const c = await h().user();
    assert.match(await refused(c, { image: 'alpine:3', memory_mb: 65536 }, 'payload.memory_mb'), /at most 1024/);
    assert.match(await refused(c, { image: 'alpine:3', cpus: 64 }, 'payload.cpus'), /at most 1\b/);
    assert.match(await refused(c, { image: 'alpine:3', timeout: '1h' }, 'payload.timeout'), /at most 1800s/);
    const res = await c.post('/workflows', container({ image: '127.0.0.1:1/x:1', memory_mb: 2048, cpus: 2, timeout: '31m', network: 'bridge' }), { headers: key() });
    assert.equal(res.status, 400);
    assert.deepEqual(fields(res), ['payload.cpus', 'payload.image', 'payload.memory_mb', 'payload.network', 'payload.timeout']);
    await accepted(c, { image: 'alpine:3', memory_mb: 1024, cpus: 1, timeout: '30m' });
  });

  it('applies the same rules on update, and leaves the workflow as it was', async () => {
    const c = await h().user();
    const id = await accepted(c, { image: 'alpine:3' });
    const before = (await c.get(`/workflows/${id}`)).json;
    const res = await c.put(`/workflows/${id}`, { ...container({ image: '127.0.0.1:18390/probe/x:1', network: 'bridge' }), kind: undefined }, { headers: key() });
    assert.equal(res.status, 400, res.text);
    assert.deepEqual(fields(res), ['payload.image', 'payload.network']);
    assert.deepEqual((await c.get(`/workflows/${id}`)).json, before);
  });
});

describeApi(
  'container payload limits (widened by the operator)',
  (h) => {
    it('accepts what the operator allowed', async () => {
      const c = await h().user();
      await accepted(c, { image: 'registry.example.com:5000/team/app:v1', network: 'bridge', memory_mb: 4096, cpus: 2.5, timeout: '1h' });
      await refused(c, { image: 'alpine:3' }, 'payload.image');
      await refused(c, { image: 'registry.example.com/team/app:v1' }, 'payload.image');
    });
  },
  {
    env: {
      CONTAINER_REGISTRIES: 'registry.example.com:5000',
      CONTAINER_NETWORK_ENABLED: 'true',
      CONTAINER_MAX_MEMORY_MB: '4096',
      CONTAINER_MAX_CPUS: '2.5',
      CONTAINER_MAX_TIMEOUT: '1h',
    },
  },
);

describeApi(
  'workflows per user',
  (h) => {
    it('answers 409 workflow_limit_reached beyond MAX_WORKFLOWS_PER_USER, concurrent creates included', async () => {
      const c = await h().user();
      const results = await Promise.all(Array.from({ length: 6 }, () => c.post('/workflows', workflowBody(), { headers: key() })));
      assert.deepEqual(results.map((r) => r.status).sort(), [201, 201, 201, 409, 409, 409]);
      const problem = results.find((r) => r.status === 409)!;
      assert.equal(problem.json.code, 'workflow_limit_reached');
      assert.match(problem.json.detail as string, /3 workflows/);
      // another user is not affected
      const other = await h().user();
      assert.equal((await other.post('/workflows', workflowBody(), { headers: key() })).status, 201);
      // deleting a (terminated) workflow makes room
      const id = (await c.get('/workflows?terminated=false')).json.workflows[0].id as string;
      assert.equal((await c.patch(`/workflows/${id}`, {})).status, 204);
      assert.equal((await c.delete(`/workflows/${id}`)).status, 204);
      assert.equal((await c.post('/workflows', workflowBody(), { headers: key() })).status, 201);
    });
  },
  { env: { MAX_WORKFLOWS_PER_USER: '3' } },
);
