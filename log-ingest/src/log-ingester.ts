/**
 * The log-ingest role: consumes `log.batch` messages from QUEUES.logs (sent by
 * runners, see runners/src/bus-log-sink.ts), stores retained lines in
 * job_logs, counts every line in job_log_counts, and re-broadcasts stored
 * lines on TOPICS.liveLogs for live tails. docs/logs.md describes it.
 *
 * - Idempotent: lines are keyed by (job, attempt, sequence_num) and inserted
 *   with ON CONFLICT DO NOTHING; the count only ever rises to the highest
 *   sequence_num + 1. A redelivered batch writes nothing twice.
 * - Durable before acked: a batch's lines and its count are written in one
 *   transaction, and the message is acked only after the commit. A crash
 *   (kill -9) at any point loses no acknowledged line.
 * - Patient: a store that is down (restart, failover) is waited for, so a
 *   database outage does not dead-letter batches.
 * - Ordered per attempt: batches of one attempt are stored and broadcast one
 *   at a time in arrival order (runners publish them in sequence order), so
 *   the stored lines of an attempt are always a prefix without gaps, and live
 *   lines arrive in order. Different attempts are written concurrently (up
 *   to `prefetch` batches).
 */
import { isUuid, type Clock } from '@orloj/common/core';
import type { Logger } from '@orloj/common/logging';
import { MESSAGE_TYPES, QUEUES, TOPICS, type LiveLogsMessage, type LogBatchMessage, type LogLineMessage } from '@orloj/common/messages';
import type { Envelope, SignedBus } from '@orloj/common/envelope';
import type { Subscription } from '@orloj/common/bus';
import { isConnectionError, type Store } from '@orloj/common/store';

export interface LogIngesterOptions {
  store: Store;
  /** Verifies as any role; signs live broadcasts as role 'log-ingest'. */
  bus: SignedBus;
  logger: Logger;
  clock: Clock;
  /** Batches handled at once (the consumer's prefetch). Default 16. */
  prefetch?: number;
  /**
   * How long (clock ms) a batch that fails with a non-connection error is
   * retried before it is handed back to the bus (redelivered, dead-lettered
   * after the delivery limit). Connection errors are retried until stop().
   * Default 60 s.
   */
  maxRetryMs?: number;
  /** On stop: keep consuming until no batch arrived for quietMs … Default 250. */
  quietMs?: number;
  /** … but for no longer than this (clock ms). Default 5 000. */
  drainMs?: number;
  /**
   * JOB_LOG_MAX_LINES: lines past it (sequence_num above it; the runner's
   * marker line sits at it at most) are counted, never stored. The runner caps
   * first; this holds for a runner that does not. Default: no cap.
   */
  maxLinesPerJob?: number;
}

export interface LogIngesterMetrics {
  /** Batches applied (committed). */
  batches: number;
  /** Lines newly stored. */
  stored: number;
  /** Retained lines that were already stored (redeliveries). */
  duplicates: number;
  /** Batches dropped because their job no longer exists. */
  orphaned: number;
  /** Messages dropped as malformed or of another type. */
  malformed: number;
  /** Store attempts that failed and were retried. */
  retries: number;
  /** Live broadcasts that failed (best effort: not retried). */
  liveFailures: number;
  /** Batches being handled now. */
  inFlight: number;
}

const DEFAULT_PREFETCH = 16;

export class LogIngester {
  private readonly store: Store;
  private readonly bus: SignedBus;
  private readonly log: Logger;
  private readonly clock: Clock;
  private readonly prefetch: number;
  private readonly maxRetryMs: number;
  private readonly quietMs: number;
  private readonly drainMs: number;
  private readonly maxLinesPerJob: number | undefined;

  private readonly counts = { batches: 0, stored: 0, duplicates: 0, orphaned: 0, malformed: 0, retries: 0, liveFailures: 0 };
  /** The last step of each attempt's chain of batches. */
  private readonly chains = new Map<string, Promise<void>>();
  private inFlight = 0;
  private lastActivity = 0;
  private readonly stopping = new AbortController();
  private sub: Subscription | undefined;
  private starting: Promise<void> | undefined;
  private stopped: Promise<void> | undefined;

  constructor(options: LogIngesterOptions) {
    this.store = options.store;
    this.bus = options.bus;
    this.clock = options.clock;
    this.log = options.logger.child({ role: 'log-ingest' });
    this.prefetch = positiveInt('prefetch', options.prefetch ?? DEFAULT_PREFETCH);
    this.maxRetryMs = nonNegativeInt('maxRetryMs', options.maxRetryMs ?? 60_000);
    this.quietMs = nonNegativeInt('quietMs', options.quietMs ?? 250);
    this.drainMs = nonNegativeInt('drainMs', options.drainMs ?? 5_000);
    this.maxLinesPerJob = options.maxLinesPerJob === undefined ? undefined : positiveInt('maxLinesPerJob', options.maxLinesPerJob);
  }

  /** Starts consuming QUEUES.logs. Memoised. */
  start(): Promise<void> {
    this.starting ??= (async () => {
      this.sub = await this.bus.consume(QUEUES.logs, (envelope) => this.onMessage(envelope), { prefetch: this.prefetch });
      this.log.info({ prefetch: this.prefetch }, 'log-ingest started');
    })();
    return this.starting;
  }

  /**
   * Keeps consuming until the queue has been quiet for quietMs (at most
   * drainMs: in one process the runners flush their last lines just before),
   * then stops. A batch still being retried then goes back to the queue.
   * Idempotent.
   */
  stop(): Promise<void> {
    this.stopped ??= (async () => {
      await this.starting?.catch(() => undefined);
      const deadline = this.clock.now() + this.drainMs;
      while (this.sub && this.clock.now() < deadline && (this.inFlight > 0 || this.clock.now() - this.lastActivity < this.quietMs)) {
        await this.clock.sleep(Math.min(50, Math.max(1, this.quietMs)));
      }
      this.stopping.abort();
      await this.sub?.cancel();
      this.log.info(this.metrics(), 'log-ingest stopped');
    })();
    return this.stopped;
  }

  metrics(): LogIngesterMetrics {
    return { ...this.counts, inFlight: this.inFlight };
  }

  private async onMessage(envelope: Envelope): Promise<void> {
    if (envelope.type !== MESSAGE_TYPES.logBatch) {
      this.counts.malformed += 1;
      this.log.warn({ type: envelope.type, envelopeId: envelope.id }, 'dropped a message of an unexpected type from the logs queue');
      return;
    }
    let read = readLogBatch(envelope.body);
    if (typeof read === 'string') {
      this.counts.malformed += 1;
      this.log.error({ envelopeId: envelope.id, problem: read }, 'dropped a malformed log.batch message');
      return;
    }
    const cap = this.maxLinesPerJob;
    if (cap !== undefined && read.lines.some((l) => l.sequence_num > cap)) {
      const kept = read.lines.filter((l) => l.sequence_num <= cap);
      this.log.warn({ jobId: read.job_id, attempt: read.attempt, dropped: read.lines.length - kept.length }, 'dropped log lines past the per-job cap; counted only');
      let printed = read.line_count ?? 0;
      for (const l of read.lines) printed = Math.max(printed, l.sequence_num + 1);
      read = { ...read, lines: kept, line_count: printed };
    }
    this.inFlight += 1;
    this.lastActivity = this.clock.now();
    try {
      // One attempt's batches are stored and broadcast one after the other, in
      // arrival order: what a reader finds stored is a prefix of the attempt
      // (no gap a live tail could skip), and live lines come in order.
      await this.inOrder(`${read.job_id}:${read.attempt}`, async () => this.finish(read, await this.applyPatiently(read)));
    } finally {
      this.inFlight -= 1;
      this.lastActivity = this.clock.now();
    }
  }

  /** Runs fn after the fns of every earlier batch of the same attempt have settled. */
  private async inOrder(key: string, fn: () => Promise<void>): Promise<void> {
    const previous = this.chains.get(key);
    const run = previous ? previous.then(fn) : fn();
    const tail = run.catch(() => undefined);
    this.chains.set(key, tail);
    try {
      await run;
    } finally {
      if (this.chains.get(key) === tail) this.chains.delete(key);
    }
  }

  private async finish(batch: LogBatchMessage, applied: number | undefined): Promise<void> {
    if (applied === undefined) {
      this.counts.orphaned += 1;
      this.log.info({ jobId: batch.job_id, attempt: batch.attempt, lines: batch.lines.length }, 'dropped log lines of a job that no longer exists');
      return;
    }
    this.counts.batches += 1;
    this.counts.stored += applied;
    if (batch.retain) this.counts.duplicates += batch.lines.length - applied;
    if (batch.retain && batch.lines.length > 0) await this.broadcast(batch);
  }

  /**
   * Writes the batch's lines (when retained) and raises the attempt's count,
   * in one transaction. Returns the lines newly stored, or undefined when the
   * job is gone (its workflow was deleted): nothing is written then.
   */
  private async apply(batch: LogBatchMessage): Promise<number | undefined> {
    let last = -1;
    for (const line of batch.lines) if (line.sequence_num > last) last = line.sequence_num;
    const count = Math.max(batch.line_count ?? 0, last + 1);
    return this.store.transaction(async (tx) => {
      const owner = await tx.logs.jobOwner(batch.job_id);
      if (!owner) return undefined;
      if (owner.workflowId !== batch.workflow_id) {
        this.log.warn({ jobId: batch.job_id, claimed: batch.workflow_id, actual: owner.workflowId }, 'a log batch names the wrong workflow; using the stored one');
      }
      const stored = batch.retain && batch.lines.length > 0 ? await tx.logs.insertBatch(batch.job_id, batch.attempt, batch.lines) : 0;
      if (count > 0) await tx.logs.recordCount({ jobId: batch.job_id, attempt: batch.attempt, workflowId: owner.workflowId, userId: owner.userId, lines: count });
      return stored;
    });
  }

  /**
   * Like scheduler's applyPatiently: a failing store is retried with backoff.
   * Connection-level failures (the database restarting) are retried until
   * stop(); others for maxRetryMs, then the message is handed back to the bus.
   */
  private async applyPatiently(batch: LogBatchMessage): Promise<number | undefined> {
    let delay = 100;
    for (let elapsed = 0; ; elapsed += delay, delay = Math.min(delay * 2, 5_000)) {
      try {
        return await this.apply(batch);
      } catch (err) {
        if (this.stopping.signal.aborted) throw err;
        if (elapsed >= this.maxRetryMs && !isConnectionError(err)) throw err;
        this.counts.retries += 1;
        this.log.warn({ err, jobId: batch.job_id, attempt: batch.attempt, retryInMs: delay }, 'could not store log lines; retrying');
        await this.clock.sleep(delay, this.stopping.signal);
        if (this.stopping.signal.aborted) throw err;
      }
    }
  }

  /** Best effort: live tails fill gaps from the store. */
  private async broadcast(batch: LogBatchMessage): Promise<void> {
    const live: LiveLogsMessage = { job_id: batch.job_id, workflow_id: batch.workflow_id, attempt: batch.attempt, lines: batch.lines };
    try {
      await this.bus.broadcast(TOPICS.liveLogs, MESSAGE_TYPES.liveLogs, live);
    } catch (err) {
      this.counts.liveFailures += 1;
      this.log.warn({ err, jobId: batch.job_id, attempt: batch.attempt }, 'could not broadcast log lines for live tails');
    }
  }
}

/**
 * Checks a log.batch body (the envelope proves who sent it, not its shape)
 * and normalises it: NUL characters, which PostgreSQL cannot store, become
 * U+FFFD, as stored. Returns the problem as a string when unusable.
 */
export function readLogBatch(body: unknown): LogBatchMessage | string {
  if (!isRecord(body)) return 'the body is not an object';
  const { job_id, workflow_id, attempt, retain, lines, line_count, columns } = body;
  if (!isUuid(job_id)) return 'job_id must be a UUID';
  if (!isUuid(workflow_id)) return 'workflow_id must be a UUID';
  if (!Number.isSafeInteger(attempt) || (attempt as number) < 1) return 'attempt must be a positive integer';
  if (typeof retain !== 'boolean') return 'retain must be a boolean';
  if (!Array.isArray(lines)) return 'lines must be an array';
  if (line_count !== undefined && (!Number.isSafeInteger(line_count) || (line_count as number) < 0)) return 'line_count must be a non-negative integer';
  let out: LogLineMessage[];
  if (columns !== undefined) {
    if (lines.length > 0) return 'a batch carries either lines or columns';
    const unpacked = readColumns(columns);
    if (typeof unpacked === 'string') return unpacked;
    out = unpacked;
  } else {
    const read = readLines(lines);
    if (typeof read === 'string') return read;
    out = read;
  }
  return {
    job_id,
    workflow_id,
    attempt: attempt as number,
    retain,
    lines: out,
    ...(line_count === undefined ? {} : { line_count: line_count as number }),
  };
}

const MAX_SEQUENCE = 2_147_483_647;

function withoutNul(message: string): string {
  return message.includes('\u0000') ? message.replaceAll('\u0000', '\ufffd') : message;
}

function readColumns(columns: unknown): LogLineMessage[] | string {
  if (!isRecord(columns)) return 'columns must be an object';
  const { first, streams, messages, timestamps } = columns;
  if (!Array.isArray(messages) || !Array.isArray(timestamps) || typeof streams !== 'string') return 'columns must hold streams, messages and timestamps';
  const n = messages.length;
  if (timestamps.length !== n || streams.length !== n) return 'columns must all have one entry per line';
  if (!Number.isSafeInteger(first) || (first as number) < 0 || (first as number) + n - 1 > MAX_SEQUENCE) {
    return 'columns.first must be an integer from 0 to 2^31-1';
  }
  const out = new Array<LogLineMessage>(n);
  for (let i = 0; i < n; i++) {
    const message: unknown = messages[i];
    const timestamp: unknown = timestamps[i];
    const s = streams.charCodeAt(i);
    if (typeof message !== 'string') return `columns.messages[${i}] must be a string`;
    if (!Number.isSafeInteger(timestamp)) return `columns.timestamps[${i}] must be an integer`;
    if (s !== 0x6f && s !== 0x65) return `columns.streams[${i}] must be o or e`;
    out[i] = { sequence_num: (first as number) + i, stream: s === 0x65 ? 'stderr' : 'stdout', message: withoutNul(message), timestamp: timestamp as number };
  }
  return out;
}

function readLines(lines: unknown[]): LogLineMessage[] | string {
  const out: LogLineMessage[] = new Array<LogLineMessage>(lines.length);
  for (let i = 0; i < lines.length; i++) {
    const l: unknown = lines[i];
    if (!isRecord(l)) return `lines[${i}] is not an object`;
    const { sequence_num, stream, message, timestamp } = l;
    if (!Number.isSafeInteger(sequence_num) || (sequence_num as number) < 0 || (sequence_num as number) > MAX_SEQUENCE) {
      return `lines[${i}].sequence_num must be an integer from 0 to 2^31-1`;
    }
    if (stream !== 'stdout' && stream !== 'stderr') return `lines[${i}].stream must be stdout or stderr`;
    if (typeof message !== 'string') return `lines[${i}].message must be a string`;
    if (!Number.isSafeInteger(timestamp)) return `lines[${i}].timestamp must be an integer`;
    out[i] = { sequence_num: sequence_num as number, stream, message: withoutNul(message), timestamp: timestamp as number };
  }
  return out;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function positiveInt(name: string, value: number): number {
  if (!Number.isSafeInteger(value) || value < 1) throw new RangeError(`${name} must be a positive integer, got ${value}`);
  return value;
}

function nonNegativeInt(name: string, value: number): number {
  if (!Number.isSafeInteger(value) || value < 0) throw new RangeError(`${name} must be a non-negative integer, got ${value}`);
  return value;
}
