import assert from 'node:assert/strict';
import crypto, { type KeyObject } from 'node:crypto';
import { pino } from 'pino';
import { ManualClock, newId, systemClock, type Clock } from '@orloj/common/core';
import { MESSAGE_TYPES, PRODUCER_POLICY, QUEUES, type JobRunMessage, type LogBatchMessage } from '@orloj/common/messages';
import { EnvelopeSigner, EnvelopeVerifier, SignedBus, type Envelope, type ProducerRole } from '@orloj/common/envelope';
import { MemoryBus, type Bus, type PublishOptions } from '@orloj/common/bus';
import { deferred, ForwardingBus, Inbox, waitFor, within, type Deferred } from '@orloj/common/test-support';
import { BusLogSink, LogSinkAbandonedError, type BusLogSinkOptions } from '../src/bus-log-sink.js';
import type { ContainerExecutor, ContainerRunHooks, ContainerRunResult, ContainerRunSpec } from '../src/executors/container.executor.js';
import { HttpCheckExecutor } from '../src/executors/http-check.executor.js';
import type { CapturedLine, LogSinkJob } from '../src/log-sink.js';
import { Runner } from '../src/runner.js';

const logger = pino({ level: 'silent' });
const pairs = { scheduler: crypto.generateKeyPairSync('ed25519'), runners: crypto.generateKeyPairSync('ed25519') };
const publicKeys: Partial<Record<ProducerRole, KeyObject>> = { scheduler: pairs.scheduler.publicKey, runners: pairs.runners.publicKey };

function signedBus(bus: Bus, role: 'scheduler' | 'runners', clock: Clock): SignedBus {
  return new SignedBus({
    bus,
    logger,
    verifier: new EnvelopeVerifier({ publicKeys, policy: PRODUCER_POLICY, clock }),
    signer: new EnvelopeSigner({ role, privateKey: pairs[role].privateKey, clock }),
  });
}

/**
 * A bus in front of the in-process one that records what was published (in
 * confirm order), can hold log batches at a gate (a slow broker) and can
 * refuse them (a broker outage).
 */
class TestBus extends ForwardingBus {
  /** type of every confirmed publish, in order */
  readonly confirmed: { type: string; body: unknown }[] = [];
  refuse = 0;
  refused = 0;
  gate: Deferred<void> | undefined;
  /** Called when a log batch reaches the gate. */
  atGate = new Inbox<LogBatchMessage>();
  override async publish(queue: string, message: unknown, options?: PublishOptions): Promise<void> {
    const envelope = message as Envelope;
    if (envelope.type === MESSAGE_TYPES.logBatch) {
      if (this.refuse > 0) {
        this.refuse -= 1;
        this.refused += 1;
        throw new Error('broker unavailable');
      }
      if (this.gate) {
        this.atGate.push(envelope.body as LogBatchMessage);
        await this.gate.promise;
      }
    }
    await super.publish(queue, message, options);
    this.confirmed.push({ type: envelope.type, body: envelope.body });
  }
  /** Published batches, their columns unpacked into `lines` (what log-ingest reads). */
  batches(jobId?: string): LogBatchMessage[] {
    return this.confirmed
      .filter((c) => c.type === MESSAGE_TYPES.logBatch)
      .map((c) => unpack(c.body as LogBatchMessage))
      .filter((b) => jobId === undefined || b.job_id === jobId);
  }
}

function unpack(b: LogBatchMessage): LogBatchMessage {
  if (!b.columns) return b;
  const c = b.columns;
  const { columns: _packed, ...rest } = b;
  return {
    ...rest,
    lines: c.messages.map((message, i) => ({ sequence_num: c.first + i, stream: c.streams[i] === 'e' ? 'stderr' : 'stdout', message, timestamp: c.timestamps[i]! })),
  };
}

function job(retain = true): LogSinkJob {
  return { job_id: newId(), workflow_id: newId(), attempt: 2, log_retention: retain };
}

function line(n: number, message = `line ${n}`): CapturedLine {
  return { sequence_num: n, stream: n % 2 ? 'stderr' : 'stdout', message, timestamp: 1767225600000 + n };
}

describe('BusLogSink', () => {
  let memory: MemoryBus;
  let bus: TestBus;

  beforeEach(() => {
    memory = new MemoryBus({ logger });
    bus = new TestBus(memory);
  });
  afterEach(async () => {
    bus.gate?.resolve();
    await memory.close();
  });

  function sink(options: Partial<BusLogSinkOptions> = {}, clock: Clock = systemClock): BusLogSink {
    return new BusLogSink({ bus: signedBus(bus, 'runners', clock), logger, clock, retry: { initialMs: 5, maxMs: 20 }, ...options });
  }

  it('publishes signed log.batch messages on the logs queue, packed by column, with the attempt and retain flag', async () => {
    const received = new Inbox<Envelope>();
    await signedBus(memory, 'scheduler', systemClock).consume(QUEUES.logs, received.push);
    const j = job();
    const w = sink().open(j);
    for (let i = 0; i < 3; i++) await w.write(line(i));
    await w.close();
    const e = await received.next('the batch');
    assert.equal(e.type, MESSAGE_TYPES.logBatch);
    assert.equal(e.producer, 'runners');
    assert.ok(e.expires_at - e.issued_at >= 60 * 60_000 - 1, 'log batches are valid for an hour, so they survive a log-ingest outage');
    assert.deepEqual(e.body, {
      job_id: j.job_id,
      workflow_id: j.workflow_id,
      attempt: 2,
      retain: true,
      lines: [],
      columns: { first: 0, streams: 'oeo', messages: ['line 0', 'line 1', 'line 2'], timestamps: [1767225600000, 1767225600001, 1767225600002] },
    });
  });

  it('cuts batches at maxBatchLines and at maxBatchBytes, keeping sequence order', async () => {
    const s = sink({ maxBatchLines: 100, maxBatchBytes: 10_000 });
    const a = job();
    const w = s.open(a);
    bus.gate = deferred(); // hold the first batch so the rest queue up
    for (let i = 0; i < 250; i++) await w.write(line(i));
    await bus.atGate.next('the first batch');
    bus.gate.resolve();
    bus.gate = undefined;
    await w.close();
    assert.deepEqual(bus.batches(a.job_id).map((b) => b.lines.length), [100, 100, 50]);

    const b = job();
    const big = s.open(b);
    const text = 'x'.repeat(2_000); // ~2 080 bytes counted per line: 4 lines fit in 10 000
    for (let i = 0; i < 10; i++) await big.write(line(i, text));
    await big.close();
    assert.deepEqual(bus.batches(b.job_id).map((x) => x.lines.length), [4, 4, 2]);
    const all = [...bus.batches(a.job_id), ...bus.batches(b.job_id)].flatMap((x) => x.lines.map((l) => l.sequence_num));
    assert.deepEqual(all, [...Array.from({ length: 250 }, (_, i) => i), ...Array.from({ length: 10 }, (_, i) => i)]);
  });

  it('publishes a lone line at once, without waiting for more or for the clock', async () => {
    const clock = new ManualClock(); // never advanced: no clock time may pass before a publish
    const s = sink({}, clock);
    const j = job();
    const w = s.open(j);
    await w.write(line(0));
    await waitFor(() => bus.batches().length === 1, 'the lone line');
    await w.write(line(1));
    await waitFor(() => bus.batches().length === 2, 'the next lone line');
    await w.close();
    assert.deepEqual(bus.batches().map((b) => b.lines.map((l) => l.sequence_num)), [[0], [1]]);
  });

  it('puts lines written in one go in one batch, and lines written while a batch is in flight in the next', async () => {
    const s = sink({}, new ManualClock());
    const j = job();
    const w = s.open(j);
    bus.gate = deferred();
    // A chunk of container output: lines written one after the other without a turn of the event loop.
    for (let i = 0; i < 3; i++) await w.write(line(i));
    assert.deepEqual((await bus.atGate.next('the first batch')).columns?.messages, ['line 0', 'line 1', 'line 2']);
    for (let i = 3; i < 8; i++) await w.write(line(i));
    await new Promise((r) => setImmediate(r));
    const held = bus.gate;
    bus.gate = undefined;
    held.resolve();
    await w.close();
    assert.deepEqual(bus.batches().map((b) => b.lines.map((l) => l.sequence_num)), [[0, 1, 2], [3, 4, 5, 6, 7]]);
  });

  it('bounds the buffer over all attempts: write() waits for room while the bus is slow, and nothing is dropped', async () => {
    const s = sink({ bufferLines: 100, maxBatchLines: 30 });
    bus.gate = deferred();
    const jobs = [job(), job()];
    const writers = jobs.map((j) => s.open(j));
    let maxBuffered = 0;
    let waited = 0;
    const produce = async (k: number) => {
      for (let i = 0; i < 400; i++) {
        const r = writers[k]!.write(line(i));
        if (r) {
          waited += 1;
          await r;
        }
        maxBuffered = Math.max(maxBuffered, s.metrics().bufferedLines);
      }
    };
    const producing = Promise.all([produce(0), produce(1)]);
    await bus.atGate.next('a batch at the slow broker');
    await waitFor(() => s.metrics().waits > 0, 'a writer to wait for room');
    // The bus is stuck: the producers are paused with the buffer full, not growing it.
    await new Promise((r) => setTimeout(r, 50)); // ruling out growth: the buffer must stay full while time passes
    assert.equal(s.metrics().bufferedLines, 100);
    let progress = 0;
    // Let batches through one at a time.
    const release = setInterval(() => {
      const g = bus.gate;
      bus.gate = deferred();
      g?.resolve();
      progress += 1;
    }, 2);
    try {
      await within(producing, 'the producers to finish', 10_000);
      for (const w of writers) await w.close();
    } finally {
      clearInterval(release);
      bus.gate.resolve();
    }
    assert.ok(progress > 0);
    assert.ok(maxBuffered <= 100, `the buffer held ${maxBuffered} lines`);
    assert.ok(waited > 0, 'write() never applied back-pressure');
    assert.equal(s.metrics().bufferedLines, 0);
    for (const j of jobs) {
      const seqs = bus.batches(j.job_id).flatMap((b) => b.lines.map((l) => l.sequence_num));
      assert.deepEqual(seqs, Array.from({ length: 400 }, (_, i) => i), 'every line once, in order');
      assert.ok(bus.batches(j.job_id).every((b) => b.lines.length <= 30));
    }
  });

  it('retries a batch the bus refused, with backoff, until it is published', async () => {
    const s = sink();
    bus.refuse = 3;
    const j = job();
    const w = s.open(j);
    for (let i = 0; i < 5; i++) await w.write(line(i));
    await w.close();
    assert.equal(bus.refused, 3);
    assert.equal(s.metrics().publishFailures, 3);
    assert.deepEqual(bus.batches(j.job_id).flatMap((b) => b.lines.map((l) => l.sequence_num)), [0, 1, 2, 3, 4]);
  });

  it('sends only the line count of a job without retention', async () => {
    const clock = new ManualClock();
    const s = sink({ countIntervalMs: 1_000 }, clock);
    const j = job(false);
    const w = s.open(j);
    for (let i = 0; i < 10; i++) assert.equal(w.write(line(i)), undefined, 'counting never waits');
    clock.advance(1_000);
    w.write(line(10));
    await waitFor(() => bus.batches().length === 1, 'a count-only batch while running');
    for (let i = 11; i < 20; i++) w.write(line(i));
    await w.close();
    assert.deepEqual(
      bus.batches().map((b) => [b.retain, b.lines.length, b.line_count]),
      [
        [false, 0, 11],
        [false, 0, 20],
      ],
    );
  });

  it('gives up when abandoned: close() and waiting writes reject, the buffer is released', async () => {
    const s = sink({ bufferLines: 5, retry: { initialMs: 10_000, maxMs: 10_000 } });
    bus.refuse = 1_000;
    const w = s.open(job());
    for (let i = 0; i < 5; i++) await w.write(line(i));
    const waiting = w.write(line(5));
    assert.ok(waiting instanceof Promise);
    const closing = w.close();
    s.abandon();
    await assert.rejects(waiting, LogSinkAbandonedError);
    await assert.rejects(closing, LogSinkAbandonedError);
    assert.equal(s.metrics().bufferedLines, 0);
    // The batch being retried and the line that waited for room: 5 were held, all lost (the waiting one never got room).
    assert.equal(s.metrics().abandonedLines, 5);
  });
});

/** A container executor that "runs" by emitting scripted lines on both streams. */
class ScriptedContainers {
  constructor(private readonly script: { stream: 'stdout' | 'stderr'; message: string }[]) {}
  removeOrphans(): Promise<string[]> {
    return Promise.resolve([]);
  }
  ensureImage(): Promise<{ ok: true }> {
    return Promise.resolve({ ok: true });
  }
  async run(_spec: ContainerRunSpec, hooks: ContainerRunHooks): Promise<ContainerRunResult> {
    for (const l of this.script) {
      const r = hooks.onLine({ ...l, timestamp: Date.now() });
      if (r) await r;
    }
    return { status: 'COMPLETED', exitCode: 0, containerId: 'c'.repeat(64), startedAt: Date.now(), finishedAt: Date.now(), lineCount: this.script.length };
  }
}

describe('Runner with the BusLogSink', () => {
  let memory: MemoryBus;
  let bus: TestBus;
  let runner: Runner | undefined;
  let http: HttpCheckExecutor;

  beforeEach(() => {
    memory = new MemoryBus({ logger });
    bus = new TestBus(memory);
    http = new HttpCheckExecutor({ logger });
  });
  afterEach(async () => {
    bus.gate?.resolve();
    await runner?.stop();
    runner = undefined;
    await http.close();
    await memory.close();
  });

  async function start(script: { stream: 'stdout' | 'stderr'; message: string }[]): Promise<{ scheduler: SignedBus; sink: BusLogSink }> {
    const runnerBus = signedBus(bus, 'runners', systemClock);
    const sink = new BusLogSink({ bus: runnerBus, logger, clock: systemClock, maxBatchLines: 7, retry: { initialMs: 5, maxMs: 20 } });
    runner = new Runner({
      bus: runnerBus,
      logger,
      clock: systemClock,
      runnerId: `runner-${newId()}`,
      http,
      containers: new ScriptedContainers(script) as unknown as ContainerExecutor,
      logSink: sink,
    });
    await runner.start();
    return { scheduler: signedBus(memory, 'scheduler', systemClock), sink };
  }

  async function run(scheduler: SignedBus, partial: Partial<JobRunMessage>): Promise<JobRunMessage> {
    const j: JobRunMessage = {
      job_id: newId(),
      workflow_id: newId(),
      attempt: 1,
      kind: 'CONTAINER',
      payload: JSON.stringify({ image: 'localhost/orloj-test/busybox:1', cmd: ['true'], timeout: '30s' }),
      log_retention: true,
      ...partial,
    };
    await scheduler.publish(QUEUES.jobs, MESSAGE_TYPES.jobRun, j);
    return j;
  }

  const finishedIndex = (jobId: string) =>
    bus.confirmed.findIndex((c) => c.type === MESSAGE_TYPES.jobFinished && (c.body as { job_id: string }).job_id === jobId);

  it('numbers lines 0, 1, 2 … across both streams and publishes them all before job.finished', async () => {
    const script = Array.from({ length: 30 }, (_, i) => ({ stream: (i % 3 === 0 ? 'stderr' : 'stdout') as 'stdout' | 'stderr', message: `m${i}` }));
    const { scheduler } = await start(script);
    bus.refuse = 2; // the bus hiccups: lines are retried, the result still comes after them
    const j = await run(scheduler, {});
    await waitFor(() => finishedIndex(j.job_id) >= 0, 'job.finished');
    const batches = bus.batches(j.job_id);
    const published = batches.flatMap((b) => b.lines);
    assert.deepEqual(
      published.map((l) => [l.sequence_num, l.stream, l.message]),
      script.map((l, i) => [i, l.stream, l.message]),
    );
    assert.ok(batches.every((b) => b.lines.length <= 7 && b.attempt === 1 && b.retain));
    const lastBatch = bus.confirmed.findLastIndex((c) => c.type === MESSAGE_TYPES.logBatch);
    assert.ok(lastBatch < finishedIndex(j.job_id), 'job.finished was published before the last log batch');
  });

  it('pauses the container output while the bus is slow (back-pressure reaches onLine)', async () => {
    const script = Array.from({ length: 200 }, (_, i) => ({ stream: 'stdout' as const, message: `p${i}` }));
    const runnerBus = signedBus(bus, 'runners', systemClock);
    const sink = new BusLogSink({ bus: runnerBus, logger, clock: systemClock, maxBatchLines: 10, bufferLines: 20 });
    let maxBuffered = 0;
    const containers = new ScriptedContainers(script);
    const original = containers.run.bind(containers);
    containers.run = (spec, hooks) =>
      original(spec, {
        ...hooks,
        onLine: (l) => {
          maxBuffered = Math.max(maxBuffered, sink.metrics().bufferedLines);
          return hooks.onLine(l);
        },
      });
    runner = new Runner({ bus: runnerBus, logger, clock: systemClock, runnerId: `runner-${newId()}`, http, containers: containers as unknown as ContainerExecutor, logSink: sink });
    await runner.start();
    bus.gate = deferred();
    const j = await run(signedBus(memory, 'scheduler', systemClock), {});
    await bus.atGate.next('the first batch');
    await waitFor(() => sink.metrics().waits > 0, 'the container output to pause');
    assert.equal(finishedIndex(j.job_id), -1);
    const gate = bus.gate;
    bus.gate = undefined;
    gate.resolve();
    await waitFor(() => finishedIndex(j.job_id) >= 0, 'job.finished');
    assert.ok(maxBuffered <= 20, `the buffer held ${maxBuffered} lines`);
    assert.equal(bus.batches(j.job_id).flatMap((b) => b.lines).length, 200);
  });

  it('publishes no log messages for HEARTBEAT jobs, and only counts for jobs without retention', async () => {
    const { scheduler } = await start([{ stream: 'stdout', message: 'quiet' }, { stream: 'stderr', message: 'please' }]);
    const hb = await run(scheduler, { kind: 'HEARTBEAT', payload: JSON.stringify({ endpoint: 'http://127.0.0.1:9/' }) });
    const counted = await run(scheduler, { log_retention: false });
    await waitFor(() => finishedIndex(hb.job_id) >= 0 && finishedIndex(counted.job_id) >= 0, 'both jobs to finish');
    assert.deepEqual(bus.batches(hb.job_id), []);
    assert.deepEqual(
      bus.batches(counted.job_id).map((b) => [b.retain, b.lines, b.line_count]),
      [[false, [], 2]],
    );
  });
});
