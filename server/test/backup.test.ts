import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { execFile, spawnSync, type ChildProcess } from 'node:child_process';
import { promisify } from 'node:util';
import type { AddressInfo } from 'node:net';
import SQLite from 'better-sqlite3';
import pg from 'pg';
import { newId } from '@orloj/common/core';
import { openDatabase } from '@orloj/common/store';
import { createTestDatabase, needService, requireServices, workflowFixture } from '@orloj/common/test-support';
import { TestClient } from '@orloj/api/test-support';
import { finish, orloj, waitForLine } from './support/cli.js';

/** Starts `orloj start` on a free port; resolves once it serves. */
async function startServer(env: Record<string, string>): Promise<{ child: ChildProcess; exit: ReturnType<typeof finish>; baseUrl: string }> {
  const child = orloj(['start'], {
    PORT: '0',
    RATE_LIMIT_ENABLED: 'false',
    RUNNER_ALLOW_TARGETS: '127.0.0.0/8',
    DOCKER_HOST: 'unix:///nonexistent/docker.sock',
    ...env,
  });
  running.add(child);
  const exit = finish(child);
  const line = await waitForLine(child, /orloj is running/);
  const port = /listening on [\d.]+:(\d+)\)/.exec(line)![1]!;
  return { child, exit, baseUrl: `http://127.0.0.1:${port}` };
}

/** Servers not stopped yet: a failing test must not leave one behind. */
const running = new Set<ChildProcess>();

async function stopServer(server: { child: ChildProcess; exit: ReturnType<typeof finish> }): Promise<void> {
  running.delete(server.child);
  server.child.kill('SIGTERM');
  const r = await server.exit;
  assert.equal(r.code, 0, r.stderr);
}

async function listWorkflowIds(c: TestClient): Promise<Set<string>> {
  const ids = new Set<string>();
  let cursor = '';
  do {
    const res = await c.get(`/workflows?limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
    assert.equal(res.status, 200, res.text);
    for (const w of res.json.workflows as { id: string }[]) ids.add(w.id);
    cursor = res.json.cursor as string;
  } while (cursor);
  return ids;
}

describe('orloj backup and restore [SQLite]', function () {
  this.timeout(240_000);
  const dirs: string[] = [];
  const tempDir = () => {
    const d = fs.mkdtempSync(path.join(os.tmpdir(), 'orloj-backup-'));
    dirs.push(d);
    return d;
  };
  const target = http.createServer((_req, res) => res.end('ok'));
  let endpoint: string;
  before(async () => {
    await new Promise<void>((r) => target.listen(0, '127.0.0.1', r));
    endpoint = `http://127.0.0.1:${(target.address() as AddressInfo).port}/health`;
  });
  after(async () => {
    for (const child of running) child.kill('SIGKILL');
    await new Promise((r) => target.close(r));
    for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
  });

  it('refuses a PostgreSQL DATABASE_URL, pointing at pg_dump', async () => {
    const r = await finish(orloj(['backup', path.join(tempDir(), 'x.db')], { DATABASE_URL: 'postgres://localhost/orloj' }));
    assert.equal(r.code, 1);
    assert.match(r.stderr, /with PostgreSQL use pg_dump/);
  });

  it('copies the database while the server runs and writes; a restore into a new DATA_DIR keeps data and sessions', async () => {
    const live = tempDir();
    // Jobs every second of real time (one-minute interval at 60x): the scheduler writes throughout.
    const clock = `accelerated:${Date.now()}:60`;
    const first = await startServer({ DATA_DIR: live, ORLOJ_CLOCK: clock });
    const c = new TestClient(first.baseUrl);
    assert.equal((await c.post('/auth/register', { email: `backup-${crypto.randomUUID()}@example.com`, password: 'correct horse' })).status, 201);
    const create = async (name: string) => {
      const res = await c.post(
        '/workflows',
        { name, kind: 'HEARTBEAT', payload: JSON.stringify({ endpoint }), interval: 1, max_consecutive_job_failures_allowed: 3 },
        { headers: { 'idempotency-key': crypto.randomUUID() } },
      );
      assert.equal(res.status, 201, res.text);
      return res.json.id as string;
    };
    const early = await create('before the backup');
    // Wait for jobs to exist: the backup must carry the scheduler's writes too.
    const deadline = Date.now() + 60_000;
    for (let jobs = 0; jobs < 2; ) {
      const res = await c.get(`/workflows/${early}/jobs`);
      jobs = (res.json.jobs as { status: string }[]).filter((j) => j.status === 'COMPLETED').length;
      if (jobs >= 2) break;
      if (Date.now() > deadline) throw new Error(`no completed jobs: ${res.text}`);
      await new Promise((r) => setTimeout(r, 100)); // poll interval: the jobs run in another process
    }

    // Load: workflows created one after another for as long as the backup takes.
    const created: { id: string; sentAt: number; doneAt: number }[] = [];
    let loading = true;
    const load = Promise.all(
      [0, 1, 2].map(async (n) => {
        for (let i = 0; loading; i++) {
          const sentAt = Date.now();
          const id = await create(`load ${n}.${i}`);
          created.push({ id, sentAt, doneAt: Date.now() });
        }
      }),
    );
    const file = path.join(tempDir(), 'orloj-backup.db');
    const startedAt = Date.now();
    const r = await finish(orloj(['backup', file], { DATA_DIR: live }));
    const endedAt = Date.now();
    loading = false;
    await load;
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /backup written: .*orloj-backup\.db \(\d+ bytes, migration \d{4}-[a-z-]+\)/);
    assert.equal(fs.statSync(file).mode & 0o777, 0o600);
    assert.ok(created.some((w) => w.sentAt > startedAt && w.doneAt < endedAt), 'the server wrote while the backup ran');
    await stopServer(first);

    const copy = new SQLite(file, { readonly: true });
    assert.equal(copy.pragma('integrity_check', { simple: true }), 'ok');
    const jobsInCopy = (copy.prepare('select count(*) as n from jobs').get() as { n: number }).n;
    copy.close();
    assert.ok(jobsInCopy >= 2);

    // Restore on a new machine: the backup as orloj.db, with the secrets and keys of DATA_DIR beside it.
    const restored = tempDir();
    fs.copyFileSync(file, path.join(restored, 'orloj.db'));
    fs.copyFileSync(path.join(live, 'secrets.json'), path.join(restored, 'secrets.json'));
    fs.cpSync(path.join(live, 'keys'), path.join(restored, 'keys'), { recursive: true });
    const second = await startServer({ DATA_DIR: restored, ORLOJ_CLOCK: clock });
    try {
      const old = new TestClient(second.baseUrl);
      for (const [k, v] of c.cookies) old.cookies.set(k, v);
      // The session and CSRF cookies from before the backup: the session row came in the
      // database, and the secrets that sealed and signed them came along.
      assert.equal((await old.post('/auth/validate')).status, 200);
      const ids = await listWorkflowIds(old);
      assert.ok(ids.has(early));
      for (const w of created) {
        if (w.doneAt < startedAt) assert.ok(ids.has(w.id), `workflow created before the backup is missing: ${w.id}`);
        if (w.sentAt > endedAt) assert.ok(!ids.has(w.id), `workflow created after the backup is present: ${w.id}`);
      }
      const jobs = await old.get(`/workflows/${early}/jobs`);
      assert.ok((jobs.json.jobs as unknown[]).length >= 2);
    } finally {
      await stopServer(second);
    }
  });
});

describe('PostgreSQL backup and restore with pg_dump and pg_restore (docs/operations.md)', function () {
  this.timeout(120_000);
  const run = promisify(execFile);

  it('restores a dump into a new database that orloj takes as it was, migrations and rows', async function () {
    const base = needService(this, 'postgres');
    const missing = () => ['pg_dump', 'pg_restore'].some((tool) => spawnSync(tool, ['--version']).status !== 0);
    // They come with Debian's postgresql (scripts/services.sh); a remote TEST_DATABASE_URL may leave them out.
    if (missing() && requireServices) spawnSync('apt-get', ['install', '-y', '--no-install-recommends', 'postgresql-client'], { stdio: 'ignore' });
    if (missing()) {
      if (requireServices) throw new Error('REQUIRE_SERVICES=1 but pg_dump / pg_restore are not installed and apt-get could not install postgresql-client');
      this.skip();
    }
    const source = await createTestDatabase('postgres', this);
    const name = `orloj_restore_${crypto.randomBytes(4).toString('hex')}`;
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'orloj-pgdump-'));
    const admin = new pg.Client({ connectionString: base });
    await admin.connect();
    try {
      const userId = newId();
      await source.store.users.insert({ id: userId, email: `${userId}@example.com`, passwordHash: 'x', notificationPreference: 'ALL', createdAt: 0, updatedAt: 0 });
      const workflow = workflowFixture(userId);
      await source.store.workflows.insert(workflow);
      const schema = /search_path=(\w+)/.exec(new URL(source.url).searchParams.get('options') ?? '')![1]!;

      const dump = path.join(dir, 'orloj.dump');
      await run('pg_dump', ['--format=custom', `--schema=${schema}`, `--file=${dump}`, base]);
      await admin.query(`create database ${name}`);
      const target = new URL(base);
      target.pathname = `/${name}`;
      await run('pg_restore', ['--no-owner', `--dbname=${target.toString()}`, dump]);

      target.searchParams.set('options', `-c search_path=${schema}`);
      const restored = openDatabase(target.toString());
      try {
        assert.deepEqual((await restored.migrationStatus()).pending, []);
        assert.deepEqual(await restored.migrate(), []);
        const rows = await restored.db.selectFrom('workflows').select(['id', 'user_id']).execute();
        assert.deepEqual(rows, [{ id: workflow.id, user_id: userId }]);
      } finally {
        await restored.close();
      }
    } finally {
      await admin.query(`drop database if exists ${name}`);
      await admin.end();
      await source.drop();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
