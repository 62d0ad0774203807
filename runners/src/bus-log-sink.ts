/**
 * The log sink runners use in production: captured lines of CONTAINER jobs go
 * to log-ingest as `log.batch` messages on QUEUES.logs. docs/logs.md describes
 * the protocol and its guarantees.
 *
 * - Batches: consecutive lines of one attempt, packed by column (`columns`),
 *   cut at maxBatchLines or ~maxBatchBytes. One batch per attempt is in
 *   flight at a time, so batches go out in sequence order. No lingering
 *   (Nagle's rule): with nothing in flight, what is buffered is published at
 *   the next turn of the event loop; lines written while a batch is in
 *   flight go in the next one. A lone line waits for nothing, and the faster
 *   lines come (or the slower the bus), the larger the batches.
 * - Never drops a line: a publish that fails (bus down, no confirm) is retried
 *   with backoff until it succeeds, or until abandon() (the runner's shutdown
 *   gave up).
 * - Bounded: lines waiting or in flight, over all attempts of this runner,
 *   stay within bufferLines / bufferBytes. When full, write() returns a
 *   promise that settles once there is room; the container executor awaits
 *   it, so reading the container's output pauses (back-pressure reaches the
 *   container's stdout/stderr pipes).
 * - close() resolves once every line of the attempt is published: the runner
 *   publishes job.finished after it, so an attempt's lines precede its result
 *   on the bus.
 * - Jobs without log retention send no lines at all, only their line count
 *   (count-only batches, at most one per countIntervalMs, and a last one at
 *   close): log-ingest counts lines of every job for analytics.
 */
import { positiveInt, retry, retryPolicies, type Clock, type RetryPolicy } from '@orloj/common/core';
import type { Logger } from '@orloj/common/logging';
import { LOG_BATCH_TTL_MS, MESSAGE_TYPES, QUEUES, type LogBatchMessage, type LogColumns } from '@orloj/common/messages';
import type { SignedBus } from '@orloj/common/envelope';
import type { CapturedLine, JobLogWriter, LogSink, LogSinkJob } from './log-sink.js';

/** Most lines in one log.batch, and the size (text plus ~80 bytes a line) at which a batch is cut. */
const BATCH_LINES = 5_000;
const BATCH_BYTES = 1024 * 1024;
/** Lines and bytes held over all attempts before writes wait (back-pressure on the containers' output). */
const BUFFER_LINES = 10_000;
const BUFFER_BYTES = 16 * 1024 * 1024;
/** How often the sink reports the counts of jobs without retention. */
const COUNT_INTERVAL_MS = 1_000;

export interface BusLogSinkOptions {
  /** Signs as role 'runners'. */
  bus: SignedBus;
  logger: Logger;
  clock: Clock;
  /** Most lines in one batch (BATCH_LINES unless set). */
  maxBatchLines?: number;
  /** A batch is cut once its lines reach about this many bytes (UTF-8 text plus ~80 bytes of JSON per line; BATCH_BYTES unless set). */
  maxBatchBytes?: number;
  /** Lines held (waiting or being published) over all attempts before write() waits (BUFFER_LINES unless set). */
  bufferLines?: number;
  /** Bytes held, counted like maxBatchBytes, before write() waits (BUFFER_BYTES unless set). */
  bufferBytes?: number;
  /** Jobs without retention: at most one count-only batch per this many clock ms while they run (COUNT_INTERVAL_MS unless set). */
  countIntervalMs?: number;
  /** Backoff between attempts to publish a batch: doubling from initialMs up to maxMs, with jitter (retryPolicies.logPublish unless set). */
  retry?: { initialMs?: number; maxMs?: number };
}

export interface BusLogSinkMetrics {
  /** Lines waiting or being published right now. */
  bufferedLines: number;
  bufferedBytes: number;
  /** write() calls that had to wait for room. */
  waits: number;
  batches: number;
  lines: number;
  /** Failed publish attempts (each was retried). */
  publishFailures: number;
  /** Lines given up on by abandon(). */
  abandonedLines: number;
}

/** The sink gave up (abandon()): lines still held were not published. */
export class LogSinkAbandonedError extends Error {
  constructor() {
    super('the log sink was abandoned before every line was published');
    this.name = 'LogSinkAbandonedError';
  }
}

/** JSON around a line's text in a batch: {"sequence_num":…,"stream":"stdout","message":"…","timestamp":…}. */
const LINE_OVERHEAD_BYTES = 80;

interface Waiter {
  size: number;
  admit: () => void;
  fail: (err: unknown) => void;
}

export class BusLogSink implements LogSink {
  readonly bus: SignedBus;
  readonly log: Logger;
  readonly clock: Clock;
  readonly maxBatchLines: number;
  readonly maxBatchBytes: number;
  readonly bufferLines: number;
  readonly bufferBytes: number;
  readonly countIntervalMs: number;
  private readonly retryPolicy: RetryPolicy;

  private usedLines = 0;
  private usedBytes = 0;
  private readonly waiters: Waiter[] = [];
  private readonly abandoning = new AbortController();
  readonly counts = { waits: 0, batches: 0, lines: 0, publishFailures: 0, abandonedLines: 0 };

  constructor(options: BusLogSinkOptions) {
    this.bus = options.bus;
    this.log = options.logger.child({ component: 'log-sink' });
    this.clock = options.clock;
    this.maxBatchLines = positiveInt('maxBatchLines', options.maxBatchLines ?? BATCH_LINES);
    this.maxBatchBytes = positiveInt('maxBatchBytes', options.maxBatchBytes ?? BATCH_BYTES);
    this.bufferLines = positiveInt('bufferLines', options.bufferLines ?? BUFFER_LINES);
    this.bufferBytes = positiveInt('bufferBytes', options.bufferBytes ?? BUFFER_BYTES);
    this.countIntervalMs = positiveInt('countIntervalMs', options.countIntervalMs ?? COUNT_INTERVAL_MS);
    const initialMs = positiveInt('retry.initialMs', options.retry?.initialMs ?? retryPolicies.logPublish.initialMs);
    const maxMs = Math.max(initialMs, positiveInt('retry.maxMs', options.retry?.maxMs ?? retryPolicies.logPublish.maxMs));
    this.retryPolicy = { ...retryPolicies.logPublish, initialMs, maxMs };
  }

  open(job: LogSinkJob): JobLogWriter {
    if (!job.log_retention) return new CountingWriter(this, job);
    return new BatchingWriter(this, job);
  }

  /**
   * Gives up on every line not yet published (the runner's shutdown ran out
   * of time): retries stop, waiting and later writes reject, and close()
   * rejects with LogSinkAbandonedError. log-ingest keeps what was published.
   */
  abandon(): void {
    if (this.abandoning.signal.aborted) return;
    this.abandoning.abort(new LogSinkAbandonedError());
    for (const w of this.waiters.splice(0)) w.fail(new LogSinkAbandonedError());
  }

  get abandoned(): AbortSignal {
    return this.abandoning.signal;
  }

  metrics(): BusLogSinkMetrics {
    return { bufferedLines: this.usedLines, bufferedBytes: this.usedBytes, ...this.counts };
  }

  // ---- the shared buffer (used by the writers) ------------------------------

  /** Takes room for one line if there is some and nobody waits before us. */
  tryReserve(size: number): boolean {
    if (this.waiters.length > 0 || !this.fits(size)) return false;
    this.usedLines += 1;
    this.usedBytes += size;
    return true;
  }

  /** Waits (in arrival order) for room for one line; `admit` runs once the room is taken. */
  reserve(size: number, admit: () => void): Promise<void> {
    if (this.abandoning.signal.aborted) return Promise.reject(new LogSinkAbandonedError());
    this.counts.waits += 1;
    return new Promise<void>((resolve, reject) => {
      this.waiters.push({
        size,
        admit: () => {
          admit();
          resolve();
        },
        fail: reject,
      });
    });
  }

  release(lines: number, bytes: number): void {
    this.usedLines -= lines;
    this.usedBytes -= bytes;
    while (this.waiters.length > 0 && this.fits(this.waiters[0]!.size)) {
      const w = this.waiters.shift()!;
      this.usedLines += 1;
      this.usedBytes += w.size;
      w.admit();
    }
  }

  private fits(size: number): boolean {
    // An empty buffer takes any line, so a line larger than bufferBytes cannot block forever.
    return this.usedLines === 0 || (this.usedLines + 1 <= this.bufferLines && this.usedBytes + size <= this.bufferBytes);
  }

  /** Publishes until the bus takes the batch (retryPolicies.logPublish); throws only once abandoned. */
  async publish(body: LogBatchMessage, lines: number, log: Logger): Promise<void> {
    if (this.abandoning.signal.aborted) throw new LogSinkAbandonedError();
    try {
      await retry(
        async () => {
          try {
            await this.bus.publish(QUEUES.logs, MESSAGE_TYPES.logBatch, body, { ttlMs: LOG_BATCH_TTL_MS });
          } catch (err) {
            this.counts.publishFailures += 1;
            throw err;
          }
        },
        {
          policy: this.retryPolicy,
          clock: this.clock,
          signal: this.abandoning.signal,
          onRetry: (err, retryInMs) => log.warn({ err, lines, retryInMs }, 'could not publish log lines; retrying'),
        },
      );
    } catch (err) {
      // Without a give-up rule, retry only ends by throwing once abandoned.
      if (this.abandoning.signal.aborted) throw new LogSinkAbandonedError();
      throw err;
    }
    this.counts.batches += 1;
    this.counts.lines += lines;
  }
}

/** A retained attempt: lines buffered, batched and published in order by one pump. */
class BatchingWriter implements JobLogWriter {
  private readonly log: Logger;
  // The buffered lines, by column (what a batch carries).
  private seqs: number[] = [];
  private streams: string[] = [];
  private messages: string[] = [];
  private timestamps: number[] = [];
  private sizes: number[] = [];
  /** Bytes of the buffered lines. */
  private bytes = 0;
  private closing = false;
  /** Highest sequence_num written + 1. */
  private written = 0;
  private failure: unknown;
  private wake: (() => void) | undefined;
  private readonly pump: Promise<void>;

  constructor(
    private readonly sink: BusLogSink,
    private readonly job: LogSinkJob,
  ) {
    this.log = sink.log.child({ jobId: job.job_id, attempt: job.attempt });
    this.pump = this.run().then(
      () => undefined,
      (err: unknown) => this.fail(err),
    );
  }

  write(line: CapturedLine): void | Promise<void> {
    if (this.failure !== undefined) throw this.failure;
    if (this.closing) throw new Error('write() after close()');
    const size = Buffer.byteLength(line.message, 'utf8') + LINE_OVERHEAD_BYTES;
    if (this.sink.tryReserve(size)) {
      this.push(line, size);
      return;
    }
    return this.sink.reserve(size, () => this.push(line, size));
  }

  async close(options: { lineCount?: number } = {}): Promise<void> {
    this.closing = true;
    this.notify();
    await this.pump;
    if (this.failure !== undefined) throw this.failure;
    const count = options.lineCount ?? 0;
    if (count > this.written) {
      // Lines the log cap dropped: counted for analytics, never stored.
      const { job } = this;
      await this.sink.publish({ job_id: job.job_id, workflow_id: job.workflow_id, attempt: job.attempt, retain: job.log_retention, lines: [], line_count: count }, 0, this.log);
    }
  }

  private notify(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }

  private push(line: CapturedLine, size: number): void {
    this.written = Math.max(this.written, line.sequence_num + 1);
    this.seqs.push(line.sequence_num);
    this.streams.push(line.stream === 'stderr' ? 'e' : 'o');
    this.messages.push(line.message);
    this.timestamps.push(line.timestamp);
    this.sizes.push(size);
    this.bytes += size;
    this.notify();
  }

  private woken(): Promise<void> {
    return new Promise((resolve) => (this.wake = resolve));
  }

  private full(): boolean {
    return this.closing || this.seqs.length >= this.sink.maxBatchLines || this.bytes >= this.sink.maxBatchBytes;
  }

  private async run(): Promise<void> {
    const { sink } = this;
    for (;;) {
      if (this.seqs.length === 0) {
        if (this.closing) return;
        await this.woken();
        continue;
      }
      // Nothing of this attempt is in flight (the pump publishes one batch at
      // a time): what is buffered goes now, and lines written meanwhile wait
      // for the next batch (Nagle). One turn of the event loop first, so the
      // lines of one chunk of container output (delivered in microtasks) share
      // a batch rather than the first going alone.
      if (!this.full()) await nextTurn();
      // Cut a batch: whole consecutive lines, within the line and byte limits (at least one line).
      const first = this.seqs[0]!;
      let n = 0;
      let bytes = 0;
      while (
        n < this.seqs.length &&
        n < sink.maxBatchLines &&
        (n === 0 || (bytes + this.sizes[n]! <= sink.maxBatchBytes && this.seqs[n] === first + n))
      ) {
        bytes += this.sizes[n]!;
        n++;
      }
      const columns: LogColumns = {
        first,
        streams: this.streams.slice(0, n).join(''),
        messages: this.messages.slice(0, n),
        timestamps: this.timestamps.slice(0, n),
      };
      this.drop(n, bytes);
      const body: LogBatchMessage = {
        job_id: this.job.job_id,
        workflow_id: this.job.workflow_id,
        attempt: this.job.attempt,
        retain: true,
        lines: [],
        columns,
      };
      try {
        await sink.publish(body, n, this.log);
      } catch (err) {
        // Abandoned (publish throws only then): this batch is lost as well as what is still buffered.
        sink.counts.abandonedLines += n;
        throw err;
      } finally {
        sink.release(n, bytes);
      }
    }
  }

  /** Forgets the first n buffered lines (their room is released by the caller). */
  private drop(n: number, bytes: number): void {
    if (n === this.seqs.length) {
      this.seqs = [];
      this.streams = [];
      this.messages = [];
      this.timestamps = [];
      this.sizes = [];
    } else {
      this.seqs.splice(0, n);
      this.streams.splice(0, n);
      this.messages.splice(0, n);
      this.timestamps.splice(0, n);
      this.sizes.splice(0, n);
    }
    this.bytes -= bytes;
  }

  private fail(err: unknown): void {
    this.failure = err;
    const lost = this.seqs.length;
    this.sink.counts.abandonedLines += lost;
    this.sink.release(lost, this.bytes);
    this.drop(lost, this.bytes);
    this.log.error({ err, lines: lost }, 'gave up publishing log lines of the job');
  }
}

/** An attempt without retention: only its line count travels, now and then and at close. */
class CountingWriter implements JobLogWriter {
  private readonly log: Logger;
  private count = 0;
  private published = 0;
  private lastSent: number;
  private sending: Promise<void> | undefined;

  constructor(
    private readonly sink: BusLogSink,
    private readonly job: LogSinkJob,
  ) {
    this.log = sink.log.child({ jobId: job.job_id, attempt: job.attempt });
    this.lastSent = sink.clock.now();
  }

  write(line: CapturedLine): void {
    this.count = Math.max(this.count, line.sequence_num + 1);
    if (!this.sending && this.sink.clock.now() - this.lastSent >= this.sink.countIntervalMs) {
      // Not awaited: counting never holds the container's output up. One at a time.
      this.sending = this.send().then(
        () => (this.sending = undefined),
        () => (this.sending = undefined),
      );
    }
  }

  async close(options: { lineCount?: number } = {}): Promise<void> {
    await this.sending;
    this.count = Math.max(this.count, options.lineCount ?? 0);
    if (this.count > this.published) await this.send();
  }

  private async send(): Promise<void> {
    const count = this.count;
    this.lastSent = this.sink.clock.now();
    await this.sink.publish(
      { job_id: this.job.job_id, workflow_id: this.job.workflow_id, attempt: this.job.attempt, retain: false, lines: [], line_count: count },
      0,
      this.log,
    );
    this.published = Math.max(this.published, count);
  }
}

function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
