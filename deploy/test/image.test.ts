import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { chown, mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { TestClient } from '@orloj/api/test-support';
import { IMAGE, buildImage, freePort, podman, podmanEnv, run, until } from './support/image.js';

/**
 * The Containerfile, built offline (deploy/test/support/image.ts), run as an operator
 * runs the embedded default: no arguments, a read-only root file system, DATA_DIR a
 * volume. A user signs up and a HEARTBEAT workflow's job runs against a local target.
 */
describe('deploy: the container image', function () {
  this.timeout(20 * 60_000);
  let container: string | undefined;
  let dataDir: string;
  let hits = 0;
  const target = http.createServer((_req, res) => {
    hits++;
    res.end('ok');
  });

  before(async function () {
    await buildImage(this);
    await new Promise<void>((r) => target.listen(0, '127.0.0.1', r));
  });

  after(async () => {
    if (container) await podman(['rm', '-f', '-t', '5', container]).catch(() => undefined);
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
    target.close();
  });

  it('runs as a non-root user with orloj as entrypoint, DATA_DIR a volume and a readiness HEALTHCHECK', async () => {
    const [config] = JSON.parse(await podman(['image', 'inspect', IMAGE])) as [
      {
        Config: { User: string; Entrypoint: string[]; Cmd: string[]; Volumes: Record<string, unknown>; Env: string[] };
        Healthcheck?: { Test: string[] };
      },
    ];
    assert.equal(config.Config.User, '1000:1000');
    assert.deepEqual(config.Config.Entrypoint, ['orloj']);
    assert.deepEqual(config.Config.Cmd, ['start']);
    assert.ok('/data' in config.Config.Volumes);
    assert.ok(config.Config.Env.includes('DATA_DIR=/data'));
    assert.deepEqual(config.Healthcheck?.Test, ['CMD', 'node', '/app/healthcheck.mjs']);
    // No sources, tests or dev dependencies in the runtime image.
    const listing = await podman(['run', '--rm', '--entrypoint', 'sh', IMAGE, '-c', 'ls /app /app/api; test -e /app/node_modules/typescript && echo HAS-TYPESCRIPT; id -u']);
    assert.doesNotMatch(listing, /^(src|test|tsconfig.*|Containerfile)$|HAS-TYPESCRIPT/m);
    assert.match(listing, /\bdist\b/);
    assert.match(listing, /^1000$/m);
    assert.match(await podman(['run', '--rm', IMAGE, '--help']), /orloj start/);
  });

  it('runs the embedded default read-only: sign up, create a workflow, its job runs', async () => {
    dataDir = await mkdtemp(path.join(tmpdir(), 'orloj-image-data-'));
    await chown(dataDir, 1000, 1000);
    // Host networking: the job's target listens on this machine's loopback.
    const port = await freePort();
    container = `orloj-image-test-${crypto.randomBytes(4).toString('hex')}`;
    await podman([
      'run', '-d', '--name', container, '--network', 'host', '--read-only', '--tmpfs', '/tmp',
      '--cap-drop', 'ALL', '--security-opt', 'no-new-privileges', '-v', `${dataDir}:/data`,
      '-e', `PORT=${port}`, '-e', 'HOST=127.0.0.1', '-e', 'RUNNER_ALLOW_TARGETS=127.0.0.0/8', '-e', 'LOG_LEVEL=warn',
      '-e', 'DOCKER_HOST=unix:///nonexistent/docker.sock',
      IMAGE,
    ]); // prettier-ignore
    const c = new TestClient(`http://127.0.0.1:${port}`);
    await until(() => c.get('/openapi.json'), (r) => r.status === 200, 'the api to answer', 120_000).catch(async (err: unknown) => {
      throw new Error(`${String(err)}\ncontainer log:\n${await podman(['logs', '--tail', '40', container!]).catch(String)}`);
    });

    const reg = await c.post('/auth/register', { email: `image-${crypto.randomUUID()}@example.com`, password: 'password123' });
    assert.equal(reg.status, 201, reg.text);
    const endpoint = `http://127.0.0.1:${(target.address() as AddressInfo).port}/health`;
    const created = await c.post(
      '/workflows',
      { name: 'image smoke', kind: 'HEARTBEAT', interval: 60, max_consecutive_job_failures_allowed: 3, payload: JSON.stringify({ endpoint }) },
      { headers: { 'idempotency-key': crypto.randomUUID() } },
    );
    assert.equal(created.status, 201, created.text);
    const id = created.json.id as string;
    await until(() => c.get(`/workflows/${id}`).then((r) => r.json), (w) => w.build_status === 'COMPLETED', 'build COMPLETED');
    const scheduled = await c.post(`/workflows/${id}/jobs/schedule`, undefined, { headers: { 'idempotency-key': crypto.randomUUID() } });
    assert.equal(scheduled.status, 201, scheduled.text);
    const job = await until(() => c.get(`/workflows/${id}/jobs/${scheduled.json.id}`).then((r) => r.json), (j) => j.status === 'COMPLETED', 'the job COMPLETED');
    assert.equal(job.status, 'COMPLETED');
    assert.ok(hits >= 1, 'the target was checked');

    // The database and generated secrets went to the volume, nowhere else.
    const { stdout } = await run('ls', [dataDir]);
    assert.match(stdout, /orloj\.db/);
    assert.match(stdout, /secrets\.json/);
    // The HEALTHCHECK answers as the readiness probe does: healthy while orloj is ready…
    assert.equal((await c.get('/readyz')).status, 200);
    const name = container;
    const healthcheck = (env: string[] = []) =>
      run('podman', ['exec', ...env.flatMap((e) => ['-e', e]), name, 'node', '/app/healthcheck.mjs'], { env: podmanEnv }).then(
        () => 'healthy',
        (err: { stderr?: string }) => `unhealthy: ${err.stderr ?? ''}`.trim(),
      );
    assert.equal(await healthcheck(), 'healthy');
    // …and unhealthy, saying why, when nothing answers where it looks (a check that cannot fail proves nothing).
    assert.match(await healthcheck(['PORT=1', 'OPS_PORT=2']), /^unhealthy: orloj is not ready: refused/);
  });
});
