import assert from 'node:assert/strict';
import { systemClock } from '@orloj/common/core';
import { silentLogger } from '@orloj/common/logging';
import { MESSAGE_TYPES, QUEUES, TOPICS, type LiveLogsMessage, type LogBatchMessage } from '@orloj/common/messages';
import type { Envelope, RoleKeys, SignedBus } from '@orloj/common/envelope';
import type { Subscription } from '@orloj/common/bus';
import { Store } from '@orloj/common/store';
import { describeEachEngine, needService, Inbox } from '@orloj/common/test-support';
import { LogIngester, type LogIngesterOptions } from '../src/log-ingester.js';
import { busFor, generateKeys, insertLogJob, lines, openBus, publishBatch, rowCount, storedLines, until, type TestJob } from './support.js';

/**
 * `store` whose first `n` transactions fail after their work (rolled back, as if the commit
 * was lost) with `error()`; `failures` counts them.
 */
function failingCommits(store: Store, n: number, error: () => Error): { store: Store; failures: number } {
  const flaky = { store: Object.create(store) as Store, failures: 0 };
  flaky.store.transaction = (fn) =>
    store.transaction(async (tx) => {
      const result = await fn(tx);
      if (flaky.failures < n) {
        flaky.failures += 1;
        throw error();
      }
      return result;
    });
  return flaky;
}

describeEachEngine('log-ingest', (db, engine) => {
  // SQLite with the in-process bus (the embedded default); PostgreSQL with RabbitMQ.
  let closeBus: () => Promise<void>;
  let keys: RoleKeys;
  let runners: SignedBus;
  let ingester: LogIngester | undefined;
  let live: Inbox<LiveLogsMessage>;
  let liveSub: Subscription;
  let raw: Awaited<ReturnType<typeof openBus>>['bus'];

  before(async function () {
    const amqpUrl = engine === 'postgres' ? needService(this, 'amqp') : undefined;
    const opened = await openBus(amqpUrl);
    raw = opened.bus;
    closeBus = opened.close;
    keys = generateKeys();
    runners = busFor(raw, 'runners', keys);
  });

  after(async () => {
    await closeBus?.();
  });

  beforeEach(async () => {
    live = new Inbox<LiveLogsMessage>();
    // The api's side of live tails.
    liveSub = await busFor(raw, 'api', keys).subscribe(TOPICS.liveLogs, (e: Envelope) => {
      if (e.type === MESSAGE_TYPES.liveLogs && e.producer === 'log-ingest') live.push(e.body as LiveLogsMessage);
    });
  });

  afterEach(async () => {
    await ingester?.stop();
    ingester = undefined;
    await liveSub.cancel();
  });

  async function startIngester(options: Partial<LogIngesterOptions> = {}): Promise<LogIngester> {
    ingester = new LogIngester({ store: db().store, bus: busFor(raw, 'log-ingest', keys), logger: silentLogger, clock: systemClock, quietMs: 0, ...options });
    await ingester.start();
    return ingester;
  }

  const count = (job: TestJob, attempt = 1) => db().store.logs.count(job.jobId, attempt);
  const batchesDone = (n: number) => until(async () => ingester!.metrics(), (m) => m.batches + m.orphaned >= n, `${n} batches applied`);

  it('stores a batch, counts its lines and broadcasts them for live tails', async () => {
    const job = await insertLogJob(db().store);
    await startIngester();
    const sent = lines(0, 250);
    await publishBatch(runners, job, sent);
    await batchesDone(1);
    assert.deepEqual(await storedLines(db().store, job.jobId), sent);
    assert.equal(await count(job), 250);
    const message = await live.next('the live broadcast');
    assert.deepEqual(message, { job_id: job.jobId, workflow_id: job.workflowId, attempt: 1, lines: sent });
  });

  it('keeps no line past the per-job cap (maxLinesPerJob), counting it, for a runner that does not cap', async () => {
    const job = await insertLogJob(db().store);
    await startIngester({ maxLinesPerJob: 100 });
    await publishBatch(runners, job, lines(0, 150));
    await batchesDone(1);
    // 0..99 and the runner's marker place, 100; the rest counted only.
    assert.deepEqual(await storedLines(db().store, job.jobId), lines(0, 101));
    assert.equal(await count(job), 150);
  });

  it('stores a batch packed by column (as runners send it) like the same lines one by one', async () => {
    const job = await insertLogJob(db().store);
    await startIngester();
    const sent = lines(10, 14, (i) => `packed ${i}`);
    const columns = { first: 10, streams: sent.map((l) => (l.stream === 'stderr' ? 'e' : 'o')).join(''), messages: sent.map((l) => l.message), timestamps: sent.map((l) => l.timestamp) };
    await publishBatch(runners, job, [], { columns });
    // malformed: one timestamp short; and lines together with columns
    await publishBatch(runners, job, [], { columns: { ...columns, first: 20, timestamps: columns.timestamps.slice(1) } });
    await publishBatch(runners, job, lines(30, 31), { columns: { ...columns, first: 40 } });
    await batchesDone(1);
    await until(async () => ingester!.metrics().malformed, (n) => n === 2, 'two malformed batches');
    assert.deepEqual(await storedLines(db().store, job.jobId), sent);
    assert.equal(await count(job), 14);
    assert.deepEqual((await live.next('the live lines')).lines, sent);
  });

  it('writes nothing twice for a redelivered or overlapping batch, and never doubles or lowers the count', async () => {
    const job = await insertLogJob(db().store);
    await startIngester();
    await publishBatch(runners, job, lines(100, 200));
    await publishBatch(runners, job, lines(100, 200)); // the same lines again (a runner's retry after a lost confirm)
    await publishBatch(runners, job, lines(0, 150)); // late and overlapping
    await batchesDone(3);
    assert.equal(await rowCount(db().store, job.jobId), 200);
    assert.deepEqual(
      (await storedLines(db().store, job.jobId)).map((l) => l.sequence_num),
      Array.from({ length: 200 }, (_, i) => i),
    );
    assert.equal(await count(job), 200, 'the count is the highest sequence_num + 1, not a sum');
    assert.deepEqual(ingester!.metrics(), { ...ingester!.metrics(), stored: 200, duplicates: 150 });
  });

  it('waits out a store that loses its connection and stores the batch exactly once', async () => {
    const job = await insertLogJob(db().store);
    // A store whose first two transactions fail after writing (rolled back): as if the commit was lost.
    const store = db().store;
    const flaky = failingCommits(store, 2, () => Object.assign(new Error('connection lost'), { code: 'ECONNRESET' }));
    await startIngester({ store: flaky.store });
    await publishBatch(runners, job, lines(0, 50));
    await batchesDone(1);
    assert.equal(flaky.failures, 2);
    assert.equal(ingester!.metrics().retries, 2);
    assert.equal(await rowCount(store, job.jobId), 50);
    assert.equal(await count(job), 50);
  });

  it('hands a batch that keeps failing back to the bus, and stores the redelivery exactly once', async () => {
    const job = await insertLogJob(db().store);
    const store = db().store;
    const flaky = failingCommits(store, 1, () => new Error('not a connection error: the commit "failed" after the rows were written'));
    await startIngester({ store: flaky.store, maxRetryMs: 0 });
    await publishBatch(runners, job, lines(0, 50));
    await batchesDone(1);
    assert.equal(flaky.failures, 1);
    assert.equal(await rowCount(store, job.jobId), 50);
    assert.equal(await count(job), 50);
    assert.equal((await live.next('the broadcast')).lines.length, 50);
    await new Promise((r) => setTimeout(r, 100)); // ruling out a second broadcast: an absence announces nothing
    assert.equal(live.all.length, 1, 'broadcast once, after the commit that counted');
  });

  it('only counts the lines of a job without retention', async () => {
    const job = await insertLogJob(db().store, { workflow: { logRetention: false } });
    await startIngester();
    // Count-only batches (what runners send), and the older full shape with retain: false.
    await publishBatch(runners, job, [], { retain: false, line_count: 500 });
    await publishBatch(runners, job, lines(500, 600), { retain: false });
    await publishBatch(runners, job, [], { retain: false, line_count: 300 }); // late: never lowers
    await batchesDone(3);
    assert.equal(await rowCount(db().store, job.jobId), 0);
    assert.equal(await count(job), 600);
    const retained = await insertLogJob(db().store);
    await publishBatch(runners, retained, lines(0, 1));
    const message = await live.next('a live broadcast');
    assert.equal(message.job_id, retained.jobId, 'lines that were not retained were broadcast');
  });

  it('stores unicode, empty, 16 KiB and awkward lines exactly (NUL becomes U+FFFD)', async () => {
    const job = await insertLogJob(db().store);
    await startIngester();
    const texts = [
      '',
      'Grüße aus Köln — İstanbul ß ẞ Σίσυφος 🌍👩‍👩‍👧 日本語',
      'x'.repeat(16 * 1024),
      'é'.repeat(8 * 1024), // 16 KiB of UTF-8 in 8 192 characters
      '{"level":"info","msg":"json \\"quoted\\"","n":1}',
      `tabs\tand\\backslashes\\ and 'quotes' and "double" and %_* and \r carriage`,
      '   ',
      'bell \u0007 and escape \u001b[31mred\u001b[0m',
    ];
    const sent = texts.map((message, i) => ({ sequence_num: i, stream: 'stdout' as const, message, timestamp: 1767225600000 + i }));
    await publishBatch(runners, job, [...sent, { sequence_num: texts.length, stream: 'stderr', message: 'nul\u0000byte', timestamp: 1 }]);
    await batchesDone(1);
    const stored = await storedLines(db().store, job.jobId);
    assert.deepEqual(stored.slice(0, texts.length), sent);
    assert.deepEqual(stored[texts.length], { sequence_num: texts.length, stream: 'stderr', message: 'nul\ufffdbyte', timestamp: 1 });
    assert.equal((await live.next()).lines[texts.length]!.message, 'nul\ufffdbyte', 'live lines differ from the stored ones');
  });

  it('drops (acks) a batch for a job that no longer exists, without blocking later batches', async () => {
    const gone = await insertLogJob(db().store);
    const kept = await insertLogJob(db().store);
    await db().store.db.deleteFrom('workflows').where('id', '=', gone.workflowId).execute();
    await startIngester();
    await publishBatch(runners, gone, lines(0, 10));
    await publishBatch(runners, kept, lines(0, 10));
    await batchesDone(2);
    assert.equal(ingester!.metrics().orphaned, 1);
    assert.equal(await rowCount(db().store, gone.jobId), 0);
    assert.equal(await count(gone), 0);
    assert.equal(await rowCount(db().store, kept.jobId), 10);
  });

  it('drops malformed batches and batches not signed by runners', async () => {
    const job = await insertLogJob(db().store);
    await startIngester();
    await runners.publish(QUEUES.logs, MESSAGE_TYPES.logBatch, { job_id: job.jobId, attempt: 1, lines: 'nope' } as unknown as LogBatchMessage);
    await runners.publish(QUEUES.logs, MESSAGE_TYPES.logBatch, {
      job_id: job.jobId,
      workflow_id: job.workflowId,
      attempt: 1,
      retain: true,
      lines: [{ sequence_num: -1, stream: 'stdout', message: 'x', timestamp: 0 }],
    });
    // The api's key may not produce log batches.
    await busFor(raw, 'api', keys).publish(QUEUES.logs, MESSAGE_TYPES.logBatch, { job_id: job.jobId, workflow_id: job.workflowId, attempt: 1, retain: true, lines: lines(0, 5) });
    await publishBatch(runners, job, lines(5, 6));
    await batchesDone(1);
    await until(async () => ingester!.metrics().malformed, (n) => n === 2, 'two malformed batches');
    assert.deepEqual((await storedLines(db().store, job.jobId)).map((l) => l.sequence_num), [5]);
  });

  it("broadcasts one attempt's batches in order, each attempt separately", async () => {
    const job = await insertLogJob(db().store);
    await startIngester({ prefetch: 16 });
    const n = 40;
    for (let b = 0; b < n; b++) {
      await publishBatch(runners, job, lines(b * 50, b * 50 + 50));
      if (b % 10 === 0) await publishBatch(runners, job, lines(b, b + 1), { attempt: 2 });
    }
    const received = await live.take(n + 4, 'every live broadcast', 20_000);
    const first = received.filter((m) => m.attempt === 1).map((m) => m.lines[0]!.sequence_num);
    assert.deepEqual(first, Array.from({ length: n }, (_, b) => b * 50));
    assert.equal(await rowCount(db().store, job.jobId), n * 50 + 4);
    assert.equal(await count(job, 1), n * 50);
    assert.equal(await count(job, 2), 31);
  });

  it('merges batches of one attempt that queued up, storing each line once and broadcasting each batch in order', async () => {
    const job = await insertLogJob(db().store);
    const n = 30;
    // Queued before the ingester starts: they arrive together and wait behind the first write.
    for (let b = 0; b < n; b++) await publishBatch(runners, job, lines(b * 20, b * 20 + 20));
    await publishBatch(runners, job, lines(100, 120)); // a redelivered overlap in the middle of a merge
    await startIngester({ prefetch: 16, maxMergeLines: 200 });
    await batchesDone(n + 1);
    const received = await live.take(n + 1, 'every live broadcast', 20_000);
    assert.deepEqual(received.slice(0, n).map((m) => m.lines[0]!.sequence_num), Array.from({ length: n }, (_, b) => b * 20));
    assert.equal(await rowCount(db().store, job.jobId), n * 20);
    assert.equal(await count(job, 1), n * 20);
    assert.equal(ingester!.metrics().stored, n * 20);
    assert.equal(ingester!.metrics().duplicates, 20);
  });

  it('stores a large batch in chunks (over the SQLite parameter limit in one statement)', async () => {
    const job = await insertLogJob(db().store);
    await startIngester();
    const sent = lines(0, 7_000, (i) => `chunked ${i}`);
    await publishBatch(runners, job, sent);
    await batchesDone(1);
    assert.equal(await rowCount(db().store, job.jobId), 7_000);
    assert.deepEqual(await storedLines(db().store, job.jobId), sent);
    assert.equal(await count(job), 7_000);
  });
});
