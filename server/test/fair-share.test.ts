import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { newId } from '@orloj/common/core';
import { newJob } from '@orloj/common/domain';
import { until, workflowFixture } from '@orloj/common/test-support';
import { QUEUE_FLOOR } from '@orloj/scheduler';
import { openDatabase, Store, type DatabaseHandle } from '@orloj/common/store';
import { OrlojProcess } from './support/orloj-process.js';
import { insertDueWorkflows, slowTarget } from './support/slow-target.js';

/** A clock minute is 15 s of real time: three slots of every workflow in 45 s. */
const SPEED = 4;
const MINUTE_MS = 60_000 / SPEED;

/**
 * Issue 30 on the embedded default (one process, SQLite, in-process bus) with
 * the default settings — RUNNER_CONCURRENCY 4, no per-user limit — and one
 * user: the runners they have are theirs (docs/adr/0014-work-conserving-fair-hand-out.md).
 * Waits are for rows (jobs ended), each bounded generously; what is asserted
 * is that no slot was skipped.
 */
describe('the fair hand-out on the embedded default: a lone user uses every runner slot, two share them', function () {
  // Four rounds of a clock minute (15 s) each, on a loaded machine.
  this.timeout(300_000);
  /** This test's DATA_DIR and the test's own handle on the process's SQLite file. */
  let data: { dir: string; database: DatabaseHandle; store: Store };
  let orloj: OrlojProcess | undefined;
  let target: Awaited<ReturnType<typeof slowTarget>> | undefined;
  /** The process clock's origin: its now is origin + SPEED × the real time since. */
  let origin = 0;
  const processNow = () => Math.floor(origin + (Date.now() - origin) * SPEED);

  beforeEach(async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'orloj-fair-'));
    const database = openDatabase(`sqlite:${path.join(dir, 'orloj.db')}`);
    await database.migrate();
    data = { dir, database, store: Store.fromHandle(database) };
  });
  afterEach(async () => {
    await orloj?.stop('SIGKILL');
    target?.close();
    await data.database.close();
    fs.rmSync(data.dir, { recursive: true, force: true });
  });

  /** Starts orloj against a target answering after `answerAfterMs`; the process clock's now, once it runs. */
  async function start(answerAfterMs: number): Promise<number> {
    target = await slowTarget(answerAfterMs);
    origin = Date.now();
    // Only what a test needs beyond the defaults: the accelerated clock, a loopback target, no container runtime.
    orloj = new OrlojProcess([], { DATA_DIR: data.dir, PORT: '0', LOG_LEVEL: 'warn', ORLOJ_CLOCK: `accelerated:${origin}:${SPEED}`, RUNNER_ALLOW_TARGETS: '127.0.0.0/8', DOCKER_HOST: 'unix:///nonexistent.sock' });
    orloj.spawn();
    await orloj.waitFor(/orloj is running/);
    // Due from now on the process's clock, once it runs: a slow start must not count as skipped slots.
    return processNow();
  }

  /** A user with `workflows` one-minute checks against the target, all due at `now`. */
  async function addUser(now: number, workflows: number): Promise<string> {
    const userId = newId();
    await data.store.users.insert({ id: userId, email: `${userId}@example.com`, passwordHash: 'x', notificationPreference: 'NONE', createdAt: now, updatedAt: now });
    await insertDueWorkflows(data.store, userId, target!.url, now, workflows);
    return userId;
  }

  /** Jobs COMPLETED, of one user or of everyone. */
  async function completed(userId?: string): Promise<number> {
    let q = data.store.db.selectFrom('jobs').select((eb) => eb.fn.countAll().as('n')).where('status', '=', 'COMPLETED');
    if (userId) q = q.where('user_id', '=', userId);
    return Number((await q.executeTakeFirstOrThrow()).n);
  }

  /** Waits for `n` COMPLETED jobs: a clock minute per round, plus generous room for a loaded machine. */
  async function waitCompleted(n: number, minutes: number): Promise<void> {
    for (const deadline = Date.now() + minutes * MINUTE_MS + 120_000; ; ) {
      const ended = await completed();
      if (ended >= n) return;
      assert.ok(Date.now() < deadline, `${ended} of ${n} jobs ended:\n${orloj!.output.slice(-3000)}`);
      await new Promise((r) => setTimeout(r, 250)); // polls the process's SQLite file; nothing to await instead
    }
  }

  async function run(workflows: number, answerAfterMs: number): Promise<void> {
    const now = await start(answerAfterMs);
    await addUser(now, workflows);
    const skipped = async () => Number((await data.store.db.selectFrom('workflows').select((eb) => eb.fn.sum('skipped_slots').as('n')).executeTakeFirstOrThrow()).n ?? 0);
    // The first round counts from when the test wrote the rows on its own reading of the clock; what is measured starts after it.
    await waitCompleted(workflows, 1);
    const before = await skipped();
    await waitCompleted(4 * workflows, 4);
    assert.equal((await skipped()) - before, 0, `slots skipped while the user had the runners to themselves:\n${orloj!.output.slice(-3000)}`);
  }

  it('runs every slot of 500 fast one-minute checks', async () => {
    await run(500, 0);
  });

  it('runs every slot of slow checks that need most of the 4 runner slots', async () => {
    // 14 checks of 3 s each per 15-s minute: 2.8 of the 4 slots busy on average.
    await run(14, 3_000);
  });

  it("starts a user's run-now after only a few of another user's jobs while that user fills the runners", async () => {
    // 100 checks of 3 s each per 15-s minute want 20 slots: the runners stay full.
    const now = await start(3_000);
    const greedy = await addUser(now, 100);
    await waitCompleted(8, 1);
    const other = await addUser(now, 0);
    const flow = workflowFixture(other, { payload: JSON.stringify({ endpoint: target!.url }), buildStatus: 'COMPLETED', buildCompletedAt: now, nextDueAt: null, intervalMinutes: 10_000 });
    await data.store.workflows.insert(flow);
    const manual = newJob(flow, 'MANUAL', processNow(), processNow());
    await data.store.jobs.insert(manual);
    const ran = await until(() => data.store.jobs.findById(manual.id), (j) => j?.status === 'COMPLETED', 'the run-now ended', 120_000);
    // An order, not a time: behind the few jobs waiting in the queue (QUEUE_FLOOR while the runners are full),
    // not behind the greedy user's backlog of dozens.
    const before = await data.store.db
      .selectFrom('jobs')
      .select((eb) => eb.fn.countAll().as('n'))
      .where('user_id', '=', greedy)
      .where('started_at', '>', manual.scheduledAt)
      .where('started_at', '<', ran!.startedAt!)
      .executeTakeFirstOrThrow();
    assert.ok(Number(before.n) <= 3 * QUEUE_FLOOR, `${before.n} of the other user's jobs started before the run-now:\n${orloj!.output.slice(-3000)}`);
  });

  it('gives two users who each want more than half of the runners about half each', async () => {
    // Each user's 12 checks of 3 s a 15-s minute want 2.4 of the 4 slots: 4.8 together.
    const now = await start(3_000);
    const [a, b] = [await addUser(now, 12), await addUser(now, 12)];
    await waitCompleted(16, 1);
    const [a0, b0] = [await completed(a), await completed(b)];
    // Three minutes of contention: about 20 jobs a minute fit in the runners.
    await waitCompleted(a0 + b0 + 60, 4);
    const [da, db] = [(await completed(a)) - a0, (await completed(b)) - b0];
    const share = da / (da + db);
    assert.ok(share >= 0.4 && share <= 0.6, `user a ran ${da} and user b ${db} jobs while both wanted more than half of the runners`);
  });
});
