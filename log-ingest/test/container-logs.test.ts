import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { AcceleratedClock, newId, systemClock } from '@orloj/common/core';
import { newWorkflow } from '@orloj/common/domain';
import { silentLogger } from '@orloj/common/logging';
import { MESSAGE_TYPES, QUEUES, type JobFinishedMessage, type JobRunMessage } from '@orloj/common/messages';
import type { Envelope } from '@orloj/common/envelope';
import { startOrloj, type RunningOrloj } from '@orloj/server';
import { BusLogSink, ContainerExecutor, HttpCheckExecutor, Runner } from '@orloj/runners';
import { createTestDatabase, type Engine, type TestDatabase, needService, deferred } from '@orloj/common/test-support';
import { LogIngester } from '../src/log-ingester.js';
import { busFor, generateKeys, insertLogJob, openBus, storedLines, until } from './support.js';

/** Built by scripts/container-runtime.sh: static busybox, no CMD. */
const IMAGE = 'localhost/orloj-test/busybox:1';
const MANY = 200_000;
const UNICODE = 'Grüße aus Köln — İstanbul ß ẞ Σίσυφος 🌍 日本語';
const JSON_LINE = '{"level":"info","msg":"json \\"quoted\\" line","n":1}';

/**
 * What the container prints, stream by stream. Order between the streams is
 * the runtime's; within a stream it is the container's.
 */
const SCRIPT = [
  `echo 'first stdout'`,
  `echo 'first stderr' >&2`,
  `echo '${JSON_LINE}'`,
  `echo ''`,
  `echo '${UNICODE}'`,
  `echo '{"level":"error","msg":"on stderr"}' >&2`,
  `echo '' >&2`,
  // 100 KiB in one line: cut into 16 KiB pieces
  `head -c 102400 /dev/zero | tr '\\0' 'a'; echo`,
  `awk 'BEGIN { for (i = 1; i <= ${MANY}; i++) print "many " i }'`,
  `echo 'last stderr' >&2`,
  `printf 'no newline at the end'`,
].join('; ');

const EXPECTED = {
  stdout: [
    'first stdout',
    JSON_LINE,
    '',
    UNICODE,
    ...Array<string>(6).fill('a'.repeat(16 * 1024)),
    'a'.repeat(4 * 1024),
    ...Array.from({ length: MANY }, (_, i) => `many ${i + 1}`),
    'no newline at the end',
  ],
  stderr: ['first stderr', '{"level":"error","msg":"on stderr"}', '', 'last stderr'],
};

const combos: { name: string; engine: Engine; amqp: boolean }[] = [
  { name: 'SQLite + in-process bus', engine: 'sqlite', amqp: false },
  { name: 'PostgreSQL + RabbitMQ', engine: 'postgres', amqp: true },
];

for (const combo of combos) {
  describe(`container logs end to end [${combo.name}]`, function () {
    this.timeout(180_000);
    let db: TestDatabase | undefined;
    let closeAll: (() => Promise<void>) | undefined;

    before(function () {
      needService(this, 'docker');
      if (combo.amqp) needService(this, 'amqp');
    });

    after(async () => {
      await closeAll?.();
      await db?.drop();
    });

    it('stores every line a real container prints, on both streams, in order and exactly once', async function () {
      db = await createTestDatabase(combo.engine, this);
      const opened = await openBus(combo.amqp ? needService(this, 'amqp') : undefined);
      const keys = generateKeys();
      const containers = new ContainerExecutor({ dockerHost: needService(this, 'docker'), logger: silentLogger });
      assert.deepEqual(await containers.ensureImage(IMAGE), { ok: true }, `${IMAGE} is missing: run scripts/container-runtime.sh ensure`);
      const http = new HttpCheckExecutor({ logger: silentLogger });
      const runnerBus = busFor(opened.bus, 'runners', keys);
      const sink = new BusLogSink({ bus: runnerBus, logger: silentLogger, clock: systemClock });
      const runner = new Runner({ bus: runnerBus, logger: silentLogger, clock: systemClock, runnerId: `runner-${newId()}`, http, containers, logSink: sink });
      const ingester = new LogIngester({ store: db.store, bus: busFor(opened.bus, 'log-ingest', keys), logger: silentLogger, clock: systemClock });
      closeAll = async () => {
        await runner.stop();
        await ingester.stop();
        await http.close();
        await opened.close();
      };
      // The test plays the scheduler.
      const scheduler = busFor(opened.bus, 'scheduler', keys);
      const finished = deferred<JobFinishedMessage>();
      await scheduler.consume(QUEUES.jobEvents, (e: Envelope) => {
        if (e.type === MESSAGE_TYPES.jobFinished) finished.resolve(e.body as JobFinishedMessage);
      });
      await ingester.start();
      await runner.start();

      const job = await insertLogJob(db.store);
      const run: JobRunMessage = {
        job_id: job.jobId,
        workflow_id: job.workflowId,
        attempt: 1,
        kind: 'CONTAINER',
        payload: JSON.stringify({ image: IMAGE, cmd: ['sh', '-c', SCRIPT], timeout: '120s' }),
        log_retention: true,
      };
      const started = Date.now();
      await scheduler.publish(QUEUES.jobs, MESSAGE_TYPES.jobRun, run);
      const result = await finished.promise;
      const ranMs = Date.now() - started;
      assert.equal(result.status, 'COMPLETED', JSON.stringify(result));

      const total = EXPECTED.stdout.length + EXPECTED.stderr.length;
      const store = db.store;
      await until(() => store.logs.count(job.jobId, 1), (n) => n === total, `the count of ${total} lines`, 60_000);
      const storedMs = Date.now() - started;
      const rows = await storedLines(store, job.jobId);
      assert.equal(rows.length, total);
      assert.deepEqual(
        rows.map((r) => r.sequence_num),
        Array.from({ length: total }, (_, i) => i),
        'sequence numbers are 0 … n-1, each once',
      );
      for (const stream of ['stdout', 'stderr'] as const) {
        const got = rows.filter((r) => r.stream === stream).map((r) => r.message);
        assert.equal(got.length, EXPECTED[stream].length, `${stream} line count`);
        const firstDiff = got.findIndex((m, i) => m !== EXPECTED[stream][i]);
        assert.equal(firstDiff, -1, `${stream} line ${firstDiff}: ${JSON.stringify(got[firstDiff]?.slice(0, 80))} != ${JSON.stringify(EXPECTED[stream][firstDiff]?.slice(0, 80))}`);
      }
      assert.ok(rows.every((r) => Number.isSafeInteger(r.timestamp) && r.timestamp > 1_600_000_000_000));
      const m = sink.metrics();
      assert.equal(m.lines, total);
      assert.equal(m.bufferedLines, 0);
      // The job's result was published after its last line: stored lines are complete once the result is in.
      console.log(
        `      ${total} lines: container done and result in after ${ranMs} ms, all stored after ${storedMs} ms ` +
          `(${Math.round(total / (storedMs / 1000))} lines/s end to end); ${m.batches} batches, ${m.waits} back-pressure waits`,
      );
    });
  });
}

describe('orloj start: runners publish container lines, log-ingest stores them [SQLite + in-process bus]', function () {
  this.timeout(120_000);
  let db: TestDatabase | undefined;
  let orloj: RunningOrloj | undefined;
  let dataDir: string | undefined;

  after(async () => {
    await orloj?.stop();
    await db?.drop();
    if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('stores the lines of a scheduled CONTAINER job run by the composed roles', async function () {
    const dockerHost = needService(this, 'docker');
    db = await createTestDatabase('sqlite', this);
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'orloj-logs-'));
    const clock = new AcceleratedClock(Date.now(), 60);
    orloj = await startOrloj({
      roles: ['scheduler', 'runners', 'log-ingest'],
      logger: silentLogger,
      clock,
      env: {
        DATA_DIR: dataDir,
        DATABASE_URL: db.url,
        BUS_URL: 'memory:',
        SCHEDULER_TICK: '10s',
        JOB_LEASE_TTL: '60s',
        RUNNER_SHUTDOWN_GRACE: '5s',
        DOCKER_HOST: dockerHost,
        CONTAINER_REGISTRIES: 'docker.io,localhost',
      },
    });
    const store = db.store;
    const userId = newId();
    await store.users.insert({ id: userId, email: `${userId}@example.com`, passwordHash: 'x', notificationPreference: 'ALL', createdAt: 0, updatedAt: 0 });
    const workflow = newWorkflow(
      {
        userId,
        name: 'printer',
        kind: 'CONTAINER',
        payload: JSON.stringify({ image: IMAGE, cmd: ['sh', '-c', 'for i in 1 2 3 4 5; do echo "out $i"; echo "err $i" >&2; done'], timeout: '30s' }),
        intervalMinutes: 1,
        maxConsecutiveJobFailuresAllowed: 3,
      },
      clock.now(),
    );
    await store.workflows.insert(workflow);
    const jobId = await until(
      async () => (await store.db.selectFrom('job_log_counts').select(['job_id', 'lines']).where('workflow_id', '=', workflow.id).executeTakeFirst()) ?? null,
      (row) => row !== null && row.lines === 10,
      'the first job to count 10 lines',
      60_000,
    ).then((row) => row!.job_id);
    const rows = await storedLines(store, jobId);
    assert.deepEqual(
      rows.filter((r) => r.stream === 'stdout').map((r) => r.message),
      ['out 1', 'out 2', 'out 3', 'out 4', 'out 5'],
    );
    assert.deepEqual(
      rows.filter((r) => r.stream === 'stderr').map((r) => r.message),
      ['err 1', 'err 2', 'err 3', 'err 4', 'err 5'],
    );
    assert.deepEqual(rows.map((r) => r.sequence_num), [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
  });
});
