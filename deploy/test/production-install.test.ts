import assert from 'node:assert/strict';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import { once } from 'node:events';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { TestClient } from '@orloj/api/test-support';
import { needService, services, until } from '@orloj/common/test-support';
import { repoDir } from './support/image.js';

const run = promisify(execFile);
const TEST_IMAGE = 'localhost/orloj-test/busybox:1';
/** Tools only the test and release commands use: a production install must not have them. */
const TEST_TOOLS = ['mocha', 'eslint', 'lerna', 'playwright-core', '@kubernetes/client-node', 'kubernetes-models', 'autocannon', 'fast-check', 'dpdm', 'vitest', 'jsdom', 'openapi-typescript'];

/** This tree as a clone of it would have it: tracked files and new ones, nothing ignored (no node_modules, dist, data). */
async function copyTree(to: string): Promise<void> {
  const { stdout } = await run('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: repoDir, maxBuffer: 16 << 20 });
  for (const file of stdout.split('\0').filter(Boolean)) {
    const from = path.join(repoDir, file);
    if (!fs.existsSync(from)) continue; // deleted, not yet committed
    fs.mkdirSync(path.dirname(path.join(to, file)), { recursive: true });
    fs.copyFileSync(from, path.join(to, file));
  }
}

/**
 * The README's run command on a production install (`npm ci --omit=dev`: no dev
 * dependencies), then `npm start`, which builds from that install and serves the embedded
 * default: a HEARTBEAT job checks a local HTTP target and a CONTAINER job runs in podman.
 * So the packages the service loads at run time, and those its build needs, are the ones
 * a production install gets (docs/operations.md, "Install and first run").
 */
describe('deploy: orloj from a production install', function () {
  // An npm install (from this machine's npm cache) and a full build: minutes on a busy machine.
  this.timeout(20 * 60_000);
  let dir: string;
  let orloj: ChildProcess | undefined;
  let output = '';
  let hits = 0;
  const target = http.createServer((_req, res) => {
    hits++;
    res.end('ok');
  });

  before(async function () {
    needService(this, 'docker');
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'orloj-production-install-'));
    await copyTree(dir);
    // Scripts stay off for this install: the postinstall would compile SQLite for
    // better-sqlite3 (minutes here); the same package, at the same version, is already
    // built in this tree, and `npm start` runs the rest of what the postinstall does.
    await run('npm', ['ci', '--omit=dev', '--ignore-scripts', '--prefer-offline', '--no-audit', '--no-fund'], { cwd: dir, timeout: 15 * 60_000, maxBuffer: 64 << 20 });
    const addon = 'node_modules/better-sqlite3/build/Release/better_sqlite3.node';
    fs.mkdirSync(path.dirname(path.join(dir, addon)), { recursive: true });
    fs.copyFileSync(path.join(repoDir, addon), path.join(dir, addon));
    await new Promise<void>((r) => target.listen(0, '127.0.0.1', r));
  });

  after(async () => {
    if (orloj?.pid && orloj.exitCode === null) {
      const closed = once(orloj, 'close');
      process.kill(-orloj.pid, 'SIGTERM');
      await closed;
    }
    target.close();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('has the build tools and none of the test tools', () => {
    const missing = ['typescript', 'vite', '@vitejs/plugin-react'].filter((p) => !fs.existsSync(path.join(dir, 'node_modules', p, 'package.json')));
    assert.deepEqual(missing, []);
    const present = TEST_TOOLS.filter((p) => fs.existsSync(path.join(dir, 'node_modules', p)));
    assert.deepEqual(present, []);
  });

  it('builds with npm start, serves the dashboard and runs a HEARTBEAT and a CONTAINER job', async () => {
    const dataDir = path.join(dir, 'data');
    // Its own process group: npm, the shell it runs and orloj stop together.
    orloj = spawn('npm', ['start'], {
      cwd: dir,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: {
        PATH: process.env.PATH ?? '',
        HOME: process.env.HOME ?? os.homedir(),
        DATA_DIR: dataDir,
        HOST: '127.0.0.1',
        PORT: '0',
        RUNNER_ALLOW_TARGETS: '127.0.0.0/8',
        CONTAINER_REGISTRIES: 'localhost',
        DOCKER_HOST: services.docker!,
      },
    });
    orloj.stdout!.on('data', (d: Buffer) => (output += d.toString()));
    orloj.stderr!.on('data', (d: Buffer) => (output += d.toString()));
    const printed = (pattern: RegExp) => until(async () => pattern.exec(output) ?? (orloj!.exitCode !== null ? 'exited' : null), (m) => m !== null, `${pattern} in:\n${output}`, 15 * 60_000);
    const running = await printed(/orloj is running \([^)]*\) at (http:\/\/localhost:\d+)/);
    assert.ok(Array.isArray(running), `orloj exited:\n${output}`);
    const url = running[1]!;
    // A newcomer is told where the dashboard is and how to sign up: the line after "running",
    // which may arrive in a later chunk of the pipe.
    const escaped = url.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    const told = await printed(new RegExp(`the dashboard is at ${escaped}/ \\(new here\\? sign up at ${escaped}/signup`));
    assert.ok(Array.isArray(told), `orloj exited:\n${output}`);

    const c = new TestClient(url);
    const page = await c.get('/', { headers: { accept: 'text/html' } });
    assert.equal(page.status, 200);
    assert.match(page.text, /<div id="root">/);
    const reg = await c.post('/auth/register', { email: `production-${crypto.randomUUID()}@example.com`, password: 'password123' });
    assert.equal(reg.status, 201, reg.text);

    const endpoint = `http://127.0.0.1:${(target.address() as AddressInfo).port}/health`;
    const heartbeat = await runOnce(c, { name: 'check', kind: 'HEARTBEAT', payload: JSON.stringify({ endpoint }) });
    assert.equal(heartbeat.status, 'COMPLETED', JSON.stringify(heartbeat));
    assert.ok(hits >= 1, 'the target was checked');
    const container = await runOnce(c, { name: 'box', kind: 'CONTAINER', payload: JSON.stringify({ image: TEST_IMAGE, cmd: ['sh', '-c', 'echo from-the-container'] }) });
    assert.equal(container.status, 'COMPLETED', JSON.stringify(container));
    const logs = await until(
      () => c.get(`/workflows/${container.workflow_id}/jobs/${container.id}/logs`),
      (r) => r.text.includes('from-the-container'),
      'the container line in the job log',
      60_000,
    );
    assert.equal(logs.status, 200);
  });
});

/** Creates a workflow, runs it now, and answers the job once it ended. */
async function runOnce(c: TestClient, body: Record<string, unknown>): Promise<Record<string, any>> {
  const created = await c.post('/workflows', { interval: 60, max_consecutive_job_failures_allowed: 3, ...body }, { headers: { 'idempotency-key': crypto.randomUUID() } });
  assert.equal(created.status, 201, created.text);
  const id = created.json.id as string;
  await until(() => c.get(`/workflows/${id}`).then((r) => r.json), (w) => w.build_status === 'COMPLETED', `${body.kind} build COMPLETED`, 60_000);
  const scheduled = await c.post(`/workflows/${id}/jobs/schedule`, undefined, { headers: { 'idempotency-key': crypto.randomUUID() } });
  assert.equal(scheduled.status, 201, scheduled.text);
  const job = await until(
    () => c.get(`/workflows/${id}/jobs/${scheduled.json.id}`).then((r) => r.json),
    (j) => ['COMPLETED', 'FAILED', 'CANCELED'].includes(j.status),
    `the ${body.kind} job to end`,
    120_000,
  );
  return { ...job, workflow_id: id };
}
