import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ensureKeyDir, keyEnvName } from '@orloj/common/envelope';
import { deleteBusObjects, workflowFixture, RoleProcess, needService, createTestDatabase, type TestDatabase } from '@orloj/common/test-support';
import { insertUser } from '@orloj/notifier/test-support';
import { QUEUE_FLOOR } from '@orloj/scheduler';
import { insertDueWorkflows, slowTarget } from './support/slow-target.js';

const SPEED = 10;
const WORKFLOWS = 16;

/**
 * Separate role processes on PostgreSQL and RabbitMQ, one-minute HEARTBEAT
 * workflows on a 10× clock against a target that answers in 3 s, so jobs wait
 * QUEUED behind the runners. JOB_QUEUE_TIMEOUT is an hour (6 min real): any
 * job that starts within seconds did so without it.
 */
describe('recovery: separate roles on PostgreSQL and RabbitMQ', function () {
  this.timeout(300_000);
  let db: TestDatabase;
  let amqpUrl: string;
  let dataDir: string;
  let target: Awaited<ReturnType<typeof slowTarget>>;
  const prefix = `orloj-recov-${crypto.randomBytes(4).toString('hex')}.`;
  const processes: RoleProcess[] = [];
  let origin: number;

  const role = (name: string, env: Record<string, string> = {}) => {
    const p = new RoleProcess(
      name,
      { databaseUrl: db.url, amqpUrl, busPrefix: prefix, dataDir },
      { ORLOJ_CLOCK: `accelerated:${origin}:${SPEED}`, RUNNER_ALLOW_TARGETS: '127.0.0.0/8', JOB_QUEUE_TIMEOUT: '1h', MAX_ACTIVE_JOBS_PER_USER: '1000', CONTAINER_REGISTRIES: 'docker.io,localhost', DOCKER_HOST: 'unix:///nonexistent.sock', ...env },
      name === 'runners' ? /runner started/ : new RegExp(`${name} started`),
    );
    processes.push(p);
    return p;
  };

  before(async function () {
    amqpUrl = needService(this, 'amqp');
    db = await createTestDatabase('postgres', this);
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'orloj-recov-'));
    await ensureKeyDir(dataDir);
    target = await slowTarget(3_000);
    origin = Date.now();
    const userId = await insertUser(db.store);
    await insertDueWorkflows(db.store, userId, target.url, origin, WORKFLOWS);
  });

  // Each test starts the processes it needs and leaves none behind: it can run alone (-g) or in any order.
  afterEach(async () => {
    for (const p of processes) await p.stop('SIGTERM');
  });

  after(async () => {
    for (const p of processes) await p.stop('SIGKILL');
    target?.close();
    await db?.drop();
    if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
    if (amqpUrl) await deleteBusObjects(amqpUrl, prefix);
  });

  const queued = async () => (await db.store.db.selectFrom('jobs').select('id').where('status', '=', 'QUEUED').execute()).map((r) => r.id);

  /** Every one of these jobs has started (or ended) within `ms` of now. */
  async function allStart(ids: readonly string[], ms: number, what: string): Promise<void> {
    const since = Date.now();
    for (;;) {
      const rows = await db.store.db.selectFrom('jobs').select(['id', 'started_at']).where('id', 'in', [...ids]).execute();
      const waiting = rows.filter((r) => r.started_at === null);
      if (waiting.length === 0) return;
      assert.ok(Date.now() - since < ms, `${waiting.length} of ${ids.length} jobs not started ${ms} ms after ${what}:\n${processes.map((p) => `--- ${p.role}\n${p.output.slice(-3000)}`).join('\n')}`);
      await new Promise((r) => setTimeout(r, 200)); // poll interval: the rows and output change in other processes
    }
  }

  async function pileUp(min: number): Promise<string[]> {
    for (const deadline = Date.now() + 90_000; ; ) {
      const ids = await queued();
      if (ids.length >= min) return ids;
      assert.ok(Date.now() < deadline, `fewer than ${min} jobs QUEUED`);
      await new Promise((r) => setTimeout(r, 200)); // poll interval: the rows and output change in other processes
    }
  }

  it('two schedulers with default settings: only one leads', async () => {
    const first = role('scheduler');
    const second = role('scheduler');
    await first.start();
    await second.start();
    // Several lease terms (15 s of clock each) go by.
    await new Promise((r) => setTimeout(r, 6_000)); // ruling out a second leader: wall time must pass
    const leaders = [first, second].filter((p) => /became the scheduler leader/.test(p.output));
    assert.equal(leaders.length, 1, 'exactly one process became the leader');
  });

  async function startScheduler(): Promise<RoleProcess> {
    const scheduler = role('scheduler');
    await scheduler.start();
    return scheduler;
  }

  it('a runner killed with jobs QUEUED: a new runner starts every one of them within seconds', async () => {
    await startScheduler();
    const runner = role('runners', { RUNNER_CONCURRENCY: '2' });
    await runner.start();
    // The hand-out keeps QUEUE_FLOOR jobs waiting while the runner's 2 slots are busy (docs/adr/0014).
    const waiting = await pileUp(QUEUE_FLOOR);
    await runner.stop('SIGKILL');
    const next = role('runners', { RUNNER_CONCURRENCY: '64' });
    await next.start();
    await allStart(waiting, 20_000, 'the new runner started');
  });

  it('a runner with wrong keys: its refusals are dead-lettered and logged, the jobs run elsewhere within seconds', async () => {
    const scheduler = await startScheduler();
    const keys = path.join(dataDir, 'keys');
    const pem = (file: string) => fs.readFileSync(path.join(keys, file), 'utf8');
    const wrong = role('runners', {
      RUNNER_CONCURRENCY: '64',
      [keyEnvName('runners', 'private')]: pem('runners.key'),
      [keyEnvName('api', 'public')]: pem('api.pub'),
      // another installation's scheduler key: nothing the scheduler signs verifies
      [keyEnvName('scheduler', 'public')]: crypto.generateKeyPairSync('ed25519').publicKey.export({ type: 'spki', format: 'pem' }).toString(),
    });
    await wrong.start();
    const waiting = await pileUp(QUEUE_FLOOR);
    for (const deadline = Date.now() + 30_000; !/failed its signature check/.test(wrong.output); ) {
      assert.ok(Date.now() < deadline, `the wrong runner refused nothing:\n${wrong.output}`);
      await new Promise((r) => setTimeout(r, 200)); // poll interval: the rows and output change in other processes
    }
    assert.match(wrong.output, /"level":50.*"claimedRole":"scheduler"|"claimedRole":"scheduler".*"level":50/);
    const good = role('runners', { RUNNER_CONCURRENCY: '64' });
    await good.start();
    // The refusing runner keeps taking its share: refused jobs come back after at most 10 s each.
    await allStart(waiting, 60_000, 'a good runner started');
    assert.match(scheduler.output, /a runner refused a job message; handing the job out again/);
  });

  it('two runners with default settings on one host and runtime: restarting one leaves the container of the other alone', async function () {
    const dockerHost = needService(this, 'docker');
    await startScheduler();
    const ingest = role('log-ingest');
    await ingest.start();
    const runners = [role('runners', { DOCKER_HOST: dockerHost }), role('runners', { DOCKER_HOST: dockerHost })];
    for (const r of runners) await r.start();
    const clockNow = origin + (Date.now() - origin) * SPEED;
    const userId = await insertUser(db.store);
    const script = 'i=0; while [ $i -lt 10 ]; do i=$((i+1)); echo "line $i"; sleep 1; done';
    const workflow = workflowFixture(userId, {
      name: 'container',
      kind: 'CONTAINER',
      payload: JSON.stringify({ image: 'localhost/orloj-test/busybox:1', cmd: ['sh', '-c', script], timeout: '60s' }),
      logRetention: true,
      buildStatus: 'COMPLETED',
      buildCompletedAt: clockNow - 1,
      nextDueAt: clockNow,
      maxConsecutiveJobFailuresAllowed: 100,
      createdAt: clockNow,
      updatedAt: clockNow,
    });
    await db.store.workflows.insert(workflow);
    const job = async () => (await db.store.jobs.list({ workflowId: workflow.id, limit: 10 })).at(-1);
    let first = await job();
    for (const deadline = Date.now() + 60_000; !first?.runnerId || first.status !== 'RUNNING'; first = await job()) {
      assert.ok(Date.now() < deadline, `the container job did not start: ${JSON.stringify(first)}`);
      await new Promise((r) => setTimeout(r, 100)); // poll interval: the rows and output change in other processes
    }
    // Restart the runner that is not running it, while the container runs.
    const other = runners.find((r) => !r.output.includes(`"runnerId":"${first.runnerId}"`));
    assert.ok(other && runners.some((r) => r !== other), 'one runner runs the job, the other does not');
    await other.stop('SIGKILL');
    await other.start();
    let done = await db.store.jobs.findById(first.id);
    for (const deadline = Date.now() + 90_000; done && !['COMPLETED', 'FAILED', 'CANCELED'].includes(done.status); done = await db.store.jobs.findById(first.id)) {
      assert.ok(Date.now() < deadline, 'the container job did not end');
      await new Promise((r) => setTimeout(r, 200)); // poll interval: the rows and output change in other processes
    }
    assert.equal(done?.status, 'COMPLETED', JSON.stringify(done));
    assert.equal(done?.attempts, first.attempts, 'the same attempt ran through');
    for (const deadline = Date.now() + 30_000; (await db.store.logs.count(first.id, first.attempts)) < 10; ) {
      assert.ok(Date.now() < deadline, 'the lines did not all arrive');
      await new Promise((r) => setTimeout(r, 200)); // poll interval: the rows and output change in other processes
    }
    const lines = await db.store.logQueries.after({ jobId: first.id, attempt: first.attempts, after: -1, limit: 100 });
    assert.deepEqual(
      lines.map((l) => l.message),
      Array.from({ length: 10 }, (_, i) => `line ${i + 1}`),
    );
  });
});
