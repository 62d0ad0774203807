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
 *   to `prefetch` batches). Batches of one attempt that queue up while an
 *   earlier one is written are merged into one transaction (at most
 *   `maxMergeLines` lines), so a fast container is not held to one store
 *   round trip per batch; each is still broadcast as it came, in order,
 *   while the next write runs.
 */
import { nonNegativeInt, positiveInt, retry, retryPolicies, type Clock, type RetryPolicy } from '@orloj/common/core';
import type { Logger } from '@orloj/common/logging';
import { MESSAGE_TYPES, packLines, QUEUES, TOPICS, type LiveLogsMessage, type LogBatchMessage } from '@orloj/common/messages';
import type { SignedBus } from '@orloj/common/envelope';
import type { Subscription } from '@orloj/common/bus';
import type { Store } from '@orloj/common/store';

/** Batches handled at once (the consumer's prefetch). */
const PREFETCH = 16;
/** Most lines written in one transaction when batches of one attempt queue up and are merged. */
const MAX_MERGE_LINES = 50_000;
/** On stop, consume until no batch arrived for this long (QUIET_MS), and at most DRAIN_MS. */
const QUIET_MS = 250;
const DRAIN_MS = 5_000;

export interface LogIngesterOptions {
  store: Store;
  /** Verifies as any role; signs live broadcasts as role 'log-ingest'. */
  bus: SignedBus;
  logger: Logger;
  clock: Clock;
  /** Batches handled at once (the consumer's prefetch); PREFETCH unless set. */
  prefetch?: number;
  /**
   * How long (clock ms) a batch that fails with a non-connection error is
   * retried before it is handed back to the bus (redelivered, dead-lettered
   * after the delivery limit). Connection errors are retried until stop().
   * retryPolicies.storeWrite's giveUpAfterMs unless set.
   */
  maxRetryMs?: number;
  /**
   * Most lines written in one transaction when batches of one attempt queue
   * up behind the one being written (they are then merged); MAX_MERGE_LINES unless set.
   */
  maxMergeLines?: number;
  /** On stop: keep consuming until no batch arrived for quietMs (QUIET_MS unless set) … */
  quietMs?: number;
  /** … but for no longer than this (clock ms; DRAIN_MS unless set). */
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

/** One received batch waiting for its attempt's turn. */
interface Queued {
  batch: LogBatchMessage;
  resolve: () => void;
  reject: (err: unknown) => void;
}

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
  private readonly maxMergeLines: number;

  private readonly counts = { batches: 0, stored: 0, duplicates: 0, orphaned: 0, malformed: 0, retries: 0, liveFailures: 0 };
  /** Batches of each attempt waiting behind the one being written (an entry exists while the attempt is being written). */
  private readonly queues = new Map<string, Queued[]>();
  private inFlight = 0;
  /** The last live broadcast of each attempt (they go out in order, behind the writes). */
  private readonly live = new Map<string, Promise<void>>();
  /** Live broadcasts queued or being sent. */
  private broadcasting = 0;
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
    this.prefetch = positiveInt('prefetch', options.prefetch ?? PREFETCH);
    this.retryPolicy = { ...retryPolicies.storeWrite, giveUpAfterMs: nonNegativeInt('maxRetryMs', options.maxRetryMs ?? retryPolicies.storeWrite.giveUpAfterMs!) };
    this.quietMs = nonNegativeInt('quietMs', options.quietMs ?? QUIET_MS);
    this.drainMs = nonNegativeInt('drainMs', options.drainMs ?? DRAIN_MS);
    this.maxLinesPerJob = options.maxLinesPerJob === undefined ? undefined : positiveInt('maxLinesPerJob', options.maxLinesPerJob);
    this.maxMergeLines = positiveInt('maxMergeLines', options.maxMergeLines ?? MAX_MERGE_LINES);
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
      while (this.sub && this.clock.now() < deadline && (this.inFlight > 0 || this.broadcasting > 0 || this.clock.now() - this.lastActivity < this.quietMs)) {
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
      await this.inOrder(`${read.job_id}:${read.attempt}`, read);
    } finally {
      this.inFlight -= 1;
      this.lastActivity = this.clock.now();
    }
  }

  /**
   * Queues the batch behind its attempt's earlier ones and settles once it is
   * stored (and broadcast). Batches that queued up while the attempt was
   * being written go together in one transaction: a fast
   * container's lines arrive faster than one transaction a batch can take
   * them (the fixed cost of a round trip to the store and one to the broker),
   * and merging keeps the order, the prefix property and idempotence.
   */
  private inOrder(key: string, batch: LogBatchMessage): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const queue = this.queues.get(key);
      if (queue) {
        queue.push({ batch, resolve, reject });
        return;
      }
      this.queues.set(key, [{ batch, resolve, reject }]);
      void this.drain(key);
    });
  }

  /** Writes the attempt's queued batches, the earliest first, merging what waits together. */
  private async drain(key: string): Promise<void> {
    const queue = this.queues.get(key)!;
    while (queue.length > 0) {
      const group = this.takeGroup(queue);
      try {
        if (group.length === 1) {
          this.finish([group[0]!.batch], await this.applyPatiently(group[0]!.batch));
        } else {
          await this.applyGroup(group.map((q) => q.batch));
        }
        for (const q of group) q.resolve();
      } catch (err) {
        for (const q of group) q.reject(err);
      }
    }
    this.queues.delete(key);
  }

  /** Takes the first queued batch and those after it that can share its transaction. */
  private takeGroup(queue: Queued[]): Queued[] {
    const first = queue[0]!.batch;
    let lines = first.lines.length;
    let n = 1;
    while (n < queue.length) {
      const next = queue[n]!.batch;
      if (next.retain !== first.retain || next.workflow_id !== first.workflow_id || lines + next.lines.length > this.maxMergeLines) break;
      lines += next.lines.length;
      n++;
    }
    return queue.splice(0, n);
  }

  /**
   * Several batches of one attempt in one transaction. When
   * that fails for good, each is tried alone, so a batch that cannot be stored
   * fails (and goes back to the bus) by itself, as without merging.
   */
  private async applyGroup(batches: LogBatchMessage[]): Promise<void> {
    const first = batches[0]!;
    const merged: LogBatchMessage = {
      job_id: first.job_id,
      workflow_id: first.workflow_id,
      attempt: first.attempt,
      retain: first.retain,
      lines: batches.flatMap((b) => b.lines),
      line_count: Math.max(...batches.map((b) => b.line_count ?? 0)),
    };
    let applied: number | undefined;
    try {
      applied = await this.applyPatiently(merged);
    } catch (err) {
      if (this.stopping.signal.aborted) throw err;
      for (const b of batches) this.finish([b], await this.applyPatiently(b));
      return;
    }
    this.finish(batches, applied, merged);
  }

  /** Counts the applied batches (stored together: `merged` when more than one) and queues their live broadcasts. */
  private finish(batches: LogBatchMessage[], applied: number | undefined, merged: LogBatchMessage = batches[0]!): void {
    if (applied === undefined) {
      this.counts.orphaned += batches.length;
      this.log.info({ jobId: merged.job_id, attempt: merged.attempt, lines: merged.lines.length }, 'dropped log lines of a job that no longer exists');
      return;
    }
    this.counts.batches += batches.length;
    this.counts.stored += applied;
    if (merged.retain) this.counts.duplicates += merged.lines.length - applied;
    this.broadcastInOrder(batches);
  }

  /**
   * Broadcasts the stored batches for live tails, after the attempt's earlier
   * broadcasts, without holding up the next write: one live message per batch
   * as received (live tails see the same messages whether or not batches were
   * merged). Best effort, like broadcast(); stop() waits for them.
   */
  private broadcastInOrder(batches: LogBatchMessage[]): void {
    const todo = batches.filter((b) => b.retain && b.lines.length > 0);
    if (todo.length === 0) return;
    const key = `${todo[0]!.job_id}:${todo[0]!.attempt}`;
    this.broadcasting += 1;
    const sent: Promise<void> = (this.live.get(key) ?? Promise.resolve())
      .then(async () => {
        for (const b of todo) await this.broadcast(b);
      })
      .finally(() => {
        this.broadcasting -= 1;
        this.lastActivity = this.clock.now();
        if (this.live.get(key) === sent) this.live.delete(key);
      });
    this.live.set(key, sent);
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
    // Packed by column, as runners send them: a third of the cost to seal, encode and verify.
    const columns = packLines(batch.lines);
    const head = { job_id: batch.job_id, workflow_id: batch.workflow_id, attempt: batch.attempt };
    const live: LiveLogsMessage = columns ? { ...head, lines: [], columns } : { ...head, lines: batch.lines };
    try {
      await this.bus.broadcast(TOPICS.liveLogs, MESSAGE_TYPES.liveLogs, live);
    } catch (err) {
      this.counts.liveFailures += 1;
      this.log.warn({ err, jobId: batch.job_id, attempt: batch.attempt }, 'could not broadcast log lines for live tails');
    }
  }
}

