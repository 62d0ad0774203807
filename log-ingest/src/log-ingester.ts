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
import {
  MESSAGE_TYPES,
  QUEUES,
  retry,
  retryPolicies,
  TOPICS,
  type Clock,
  type LiveLogsMessage,
  type LogBatchMessage,
  type Logger,
  type RetryPolicy,
  type SignedBus,
  type Store,
  type Subscription,
} from '@orloj/common';

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
  private readonly retryPolicy: RetryPolicy;
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
    this.retryPolicy = { ...retryPolicies.storeWrite, giveUpAfterMs: nonNegativeInt('maxRetryMs', options.maxRetryMs ?? 60_000) };
    this.quietMs = nonNegativeInt('quietMs', options.quietMs ?? 250);
    this.drainMs = nonNegativeInt('drainMs', options.drainMs ?? 5_000);
    this.maxLinesPerJob = options.maxLinesPerJob === undefined ? undefined : positiveInt('maxLinesPerJob', options.maxLinesPerJob);
  }

  /** Starts consuming QUEUES.logs. Memoised. */
  start(): Promise<void> {
    this.starting ??= (async () => {
      // The bus refuses (and logs) a message of another type or a body decodeLogBatch cannot read; this counts them.
      this.sub = await this.bus.consume(QUEUES.logs, (envelope) => this.onMessage(envelope.body), {
        prefetch: this.prefetch,
        accept: [MESSAGE_TYPES.logBatch],
        onMalformed: () => void (this.counts.malformed += 1),
      });
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

  private async onMessage(batch: LogBatchMessage): Promise<void> {
    let read = batch;
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
   * A failing store is retried with backoff (retryPolicies.storeWrite):
   * connection-level failures (the database restarting) until stop(); others
   * for maxRetryMs, then the message is handed back to the bus.
   */
  private async applyPatiently(batch: LogBatchMessage): Promise<number | undefined> {
    return retry(() => this.apply(batch), {
      policy: this.retryPolicy,
      clock: this.clock,
      signal: this.stopping.signal,
      onRetry: (err, retryInMs) => {
        this.counts.retries += 1;
        this.log.warn({ err, jobId: batch.job_id, attempt: batch.attempt, retryInMs }, 'could not store log lines; retrying');
      },
    });
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


function positiveInt(name: string, value: number): number {
  if (!Number.isSafeInteger(value) || value < 1) throw new RangeError(`${name} must be a positive integer, got ${value}`);
  return value;
}

function nonNegativeInt(name: string, value: number): number {
  if (!Number.isSafeInteger(value) || value < 0) throw new RangeError(`${name} must be a non-negative integer, got ${value}`);
  return value;
}
