import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import amqp from 'amqplib';
import { silentLogger } from '@orloj/common/logging';
import { QUEUES } from '@orloj/common/messages';
import { ensureKeyDir, type RoleKeys } from '@orloj/common/envelope';
import { AmqpBus, createBus } from '@orloj/common/bus';
import { createTestDatabase, type TestDatabase, needService, deleteBusObjects, RoleProcess } from '@orloj/common/test-support';
import { busFor, insertLogJob, lines, publishBatch, until, type TestJob } from './support.js';

const JOBS = 4;
const BATCHES = 120; // per job
const PER_BATCH = 400;
const TOTAL = JOBS * BATCHES * PER_BATCH; // 192 000 lines

/**
 * A log-ingest process (`orloj start --roles log-ingest` on PostgreSQL and
 * RabbitMQ) killed with SIGKILL while it ingests, then started again: every
 * line published as a runner would is stored exactly once, the counts are
 * right and nothing was dead-lettered. An acked batch was committed first;
 * an unacked one is redelivered to the new process.
 */
describe('log-ingest killed with SIGKILL mid-stream', function () {
  this.timeout(180_000);
  let db: TestDatabase;
  let amqpUrl: string;
  let dataDir: string;
  let keys: RoleKeys;
  const prefix = `orloj-crash-${crypto.randomBytes(4).toString('hex')}.`;
  let ingest: RoleProcess;

  before(async function () {
    amqpUrl = needService(this, 'amqp');
    db = await createTestDatabase('postgres', this);
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'orloj-crash-'));
    keys = await ensureKeyDir(dataDir); // the same keys the child reads from DATA_DIR
    ingest = new RoleProcess('log-ingest', { databaseUrl: db.url, amqpUrl, busPrefix: prefix, dataDir });
  });

  after(async () => {
    await ingest?.stop('SIGKILL');
    await db?.drop();
    if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
    if (amqpUrl) await deleteBusObjects(amqpUrl, prefix);
  });

  const stored = async (): Promise<number> => {
    const r = await db.store.db.selectFrom('job_logs').select((eb) => eb.fn.countAll<string>().as('n')).executeTakeFirstOrThrow();
    return Number(r.n);
  };

  it('loses no acknowledged line and stores every line exactly once after a restart', async () => {
    const jobs: TestJob[] = [];
    for (let j = 0; j < JOBS; j++) jobs.push(await insertLogJob(db.store));

    await ingest.start();

    // Publish as runners would (each batch confirmed by the broker before the next of its job) …
    const bus = await createBus(amqpUrl, { logger: silentLogger, prefix });
    const runners = busFor(bus, 'runners', keys);
    const publishing = Promise.all(
      jobs.map(async (job) => {
        for (let b = 0; b < BATCHES; b++) {
          await publishBatch(runners, job, lines(b * PER_BATCH, (b + 1) * PER_BATCH, (i) => `job line ${i} ${'·'.repeat(i % 50)}`));
        }
      }),
    );
    publishing.catch(() => undefined);

    // … and kill the process mid-stream: some lines stored, not all.
    const before = await until(stored, (n) => n >= TOTAL / 10, 'a tenth of the lines to be stored', 60_000);
    await ingest.stop('SIGKILL');
    const atKill = await stored();
    assert.ok(atKill < TOTAL, `the process had already stored everything (${atKill} lines) before the kill`);
    assert.ok(atKill >= before);
    try {
      await publishing;
    } finally {
      await (bus as AmqpBus).close();
    }

    await ingest.start();
    await until(stored, (n) => n === TOTAL, `all ${TOTAL} lines (at kill: ${atKill})`, 120_000);

    for (const job of jobs) {
      const r = await db.store.db
        .selectFrom('job_logs')
        .select((eb) => [eb.fn.countAll<string>().as('n'), eb.fn.min('sequence_num').as('lo'), eb.fn.max('sequence_num').as('hi')])
        .where('job_id', '=', job.jobId)
        .where('attempt', '=', 1)
        .executeTakeFirstOrThrow();
      assert.deepEqual([Number(r.n), Number(r.lo), Number(r.hi)], [BATCHES * PER_BATCH, 0, BATCHES * PER_BATCH - 1]);
      assert.equal(await db.store.logs.count(job.jobId, 1), BATCHES * PER_BATCH);
    }
    const sample = await db.store.db.selectFrom('job_logs').select('message').where('job_id', '=', jobs[0]!.jobId).where('sequence_num', '=', 12_345).executeTakeFirstOrThrow();
    assert.equal(sample.message, `job line 12345 ${'·'.repeat(12_345 % 50)}`);

    // Nothing left behind, nothing dead-lettered.
    const connection = await amqp.connect(amqpUrl);
    try {
      const ch = await connection.createChannel();
      await until(async () => (await ch.checkQueue(`${prefix}${QUEUES.logs}`)).messageCount, (n) => n === 0, 'the logs queue to drain');
      // checkQueue closes its channel when the queue does not exist: a channel of its own.
      const deadCh = await connection.createChannel();
      deadCh.on('error', () => undefined);
      const dead = await deadCh.checkQueue(`${prefix}${QUEUES.logs}.dead`).catch(() => ({ messageCount: 0 }));
      assert.equal(dead.messageCount, 0, 'batches were dead-lettered');
    } finally {
      await connection.close().catch(() => undefined);
    }
    await ingest.stop('SIGTERM');
  });
});
