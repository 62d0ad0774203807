import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { newId } from '@orloj/common/core';
import { openDatabase, Store, type DatabaseHandle } from '@orloj/common/store';
import { tempDir } from '@orloj/common/test-support';
import { QUEUE_FLOOR } from '@orloj/scheduler';
import { OrlojProcess } from './support/orloj-process.js';
import { insertDueWorkflows, slowTarget } from './support/slow-target.js';

const SPEED = 10;
const WORKFLOWS = 30;

/**
 * Distributed processes missing the keys of their role refuse to start, and
 * say which variable to set (before touching the store or the broker: the
 * URLs here lead nowhere).
 */
describe('recovery: a distributed process without its keys refuses to start', function () {
  this.timeout(120_000);
  const dataDir = tempDir('orloj-keys-');

  const run = async (roles: string, env: Record<string, string> = {}) => {
    const p = new OrlojProcess(['--roles', roles], { DATA_DIR: dataDir(), BUS_URL: 'amqp://127.0.0.1:1', DATABASE_URL: 'postgres://127.0.0.1:1/none', ...env });
    p.spawn();
    return { code: await p.exitCode(), output: p.output };
  };

  it('a runner without keys names ORLOJ_RUNNERS_PRIVATE_KEY and the scheduler public key it needs', async () => {
    const { code, output } = await run('runners');
    assert.equal(code, 1, output);
    assert.match(output, /ORLOJ_RUNNERS_PRIVATE_KEY/);
    assert.match(output, /ORLOJ_SCHEDULER_PUBLIC_KEY/);
    assert.equal(fs.existsSync(path.join(dataDir(), 'keys')), false, 'made no keys of its own');
  });

  it('a scheduler with only its own private key names the public keys it lacks', async () => {
    const pem = crypto.generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
    const { code, output } = await run('scheduler', { ORLOJ_SCHEDULER_PRIVATE_KEY: pem });
    assert.equal(code, 1, output);
    assert.match(output, /ORLOJ_RUNNERS_PUBLIC_KEY/);
    assert.match(output, /ORLOJ_API_PUBLIC_KEY/);
    assert.doesNotMatch(output, /ORLOJ_SCHEDULER_PRIVATE_KEY/);
  });

  it('a scheduler without any key names its private key', async () => {
    const { code, output } = await run('scheduler');
    assert.equal(code, 1, output);
    assert.match(output, /ORLOJ_SCHEDULER_PRIVATE_KEY/);
  });
});

/**
 * The embedded default (one process, in-process bus, SQLite) restarted while
 * jobs wait QUEUED behind a slow target: their messages died with the old
 * process, and the new one hands them out at once, not after
 * JOB_QUEUE_TIMEOUT (an hour here). On an accelerated clock (10×) so slots
 * come every 6 s.
 */
describe('recovery: the embedded server restarted with jobs QUEUED', function () {
  this.timeout(300_000);
  let dataDir: string;
  let target: Awaited<ReturnType<typeof slowTarget>>;
  let database: DatabaseHandle;
  let store: Store;
  let orloj: OrlojProcess;

  before(async () => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'orloj-recovery-'));
    // Answers after 3 s: with 4 runner slots the hand-out keeps QUEUE_FLOOR jobs QUEUED (the rest wait PENDING, docs/adr/0014).
    target = await slowTarget(3_000);
    database = openDatabase(`sqlite:${path.join(dataDir, 'orloj.db')}`);
    await database.migrate();
    store = Store.fromHandle(database);
    const userId = newId();
    const now = Date.now();
    await store.users.insert({ id: userId, email: `${userId}@example.com`, passwordHash: 'x', notificationPreference: 'NONE', createdAt: now, updatedAt: now });
    await insertDueWorkflows(store, userId, target.url, now, WORKFLOWS);
    orloj = new OrlojProcess([], {
      DATA_DIR: dataDir,
      PORT: '0',
      LOG_LEVEL: 'warn',
      ORLOJ_CLOCK: `accelerated:${now}:${SPEED}`,
      RUNNER_ALLOW_TARGETS: '127.0.0.0/8',
      RUNNER_CONCURRENCY: '4',
      JOB_QUEUE_TIMEOUT: '1h',
      DOCKER_HOST: 'unix:///nonexistent.sock',
    });
  });

  after(async () => {
    await orloj?.stop('SIGKILL');
    await database?.close();
    target?.close();
    if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
  });

  const queued = async () => store.db.selectFrom('jobs').select(['id', 'workflow_id', 'attempts']).where('status', '=', 'QUEUED').execute();

  for (const signal of ['SIGKILL', 'SIGTERM'] as const) {
    it(`hands out every QUEUED job within seconds after a ${signal} restart`, async () => {
      orloj.spawn();
      await orloj.waitFor(/orloj is running/);
      // Wait until jobs pile up QUEUED behind the slow target.
      for (let deadline = Date.now() + 60_000; (await queued()).length < QUEUE_FLOOR; ) {
        assert.ok(Date.now() < deadline, `no jobs piled up QUEUED:\n${orloj.output}`);
        await new Promise((r) => setTimeout(r, 200)); // poll interval: the jobs change in another process
      }
      await orloj.stop(signal);
      const waiting = await queued();
      // A runner may have taken one between the poll and the signal; some are left to recover.
      assert.ok(waiting.length >= 1, `${waiting.length} jobs QUEUED at the ${signal}`);

      // Room for all of them now: what is measured is the hand-out, not the runners.
      orloj.spawn({ RUNNER_CONCURRENCY: '64' });
      await orloj.waitFor(/orloj is running/);
      const restarted = Date.now();
      const ids = waiting.map((j) => j.id);
      let still = ids;
      while (still.length > 0) {
        // Generous for a loaded machine; without recovery they would wait an hour of clock (6 min).
        assert.ok(Date.now() - restarted < 30_000, `${still.length} of ${ids.length} jobs still not started 30 s after the restart:\n${orloj.output}`);
        await new Promise((r) => setTimeout(r, 200)); // poll interval: the jobs change in another process
        const rows = await store.db.selectFrom('jobs').select(['id', 'started_at']).where('id', 'in', ids).execute();
        still = rows.filter((r) => r.started_at === null).map((r) => r.id);
      }
      assert.match(orloj.output, /handed out again the jobs queued or running before the restart/);
      // The guarantees held: one job per slot, never two open jobs of one workflow.
      const dupSlots = await store.db
        .selectFrom('jobs')
        .select(['workflow_id', 'slot_at'])
        .groupBy(['workflow_id', 'slot_at'])
        .having((eb) => eb.fn.countAll(), '>', 1)
        .execute();
      assert.deepEqual(dupSlots, []);
      const open = await store.db
        .selectFrom('jobs')
        .select('workflow_id')
        .where('status', 'in', ['QUEUED', 'RUNNING'])
        .groupBy('workflow_id')
        .having((eb) => eb.fn.countAll(), '>', 1)
        .execute();
      assert.deepEqual(open, []);
      await orloj.stop('SIGTERM');
    });
  }
});
