import { performance } from 'node:perf_hooks';
import {
  isOrlojError,
  MESSAGE_TYPES,
  notFound,
  OrlojError,
  TOPICS,
  type Clock,
  type Envelope,
  type Job,
  type LiveLogsMessage,
  type Logger,
  type SignedBus,
  type Store,
  type Subscription,
} from '@orloj/common';
import { presentLogEntry, type LogLine } from './present.js';
import { problemOf } from './problem.js';
import type { SseStream } from './sse.js';

export interface LiveTailSettings {
  /** How often a tail reads the store for new lines while no bus feeds it. */
  pollMs: number;
  /** The same while the bus feeds it: only a safety net for missed broadcasts. */
  busPollMs: number;
  /** How often a tail reads its job's status (to send `end`). */
  statusMs: number;
  /** Comment lines that keep proxies and clients from timing the stream out. */
  keepAliveMs: number;
  /** Concurrent streams per client address; 0 = unlimited. */
  maxStreamsPerClient: number;
  /** Rows per store query. */
  batchSize: number;
  /**
   * How long a tail waits for a missing sequence_num (stored out of order by
   * concurrent log-ingest consumers) before it moves past it.
   */
  holeGraceMs: number;
  /** Lines a tail holds from the bus while the client is slow; beyond it, they are read from the store later. */
  maxPending: number;
}

export const DEFAULT_LIVE_TAIL: LiveTailSettings = {
  pollMs: 250,
  busPollMs: 2_000,
  statusMs: 1_000,
  keepAliveMs: 15_000,
  maxStreamsPerClient: 5,
  batchSize: 1_000,
  holeGraceMs: 2_000,
  maxPending: 10_000,
};

const TERMINAL: ReadonlySet<Job['status']> = new Set(['COMPLETED', 'FAILED', 'CANCELED']);
/** After this many status checks that found the job terminal, `end` is sent even if lines still trickle in. */
const MAX_FINISH_CHECKS = 30;

/**
 * The live tails of one api process: the per-client stream limit, and the
 * bus subscription (TOPICS.liveLogs, opened with the first tail) that fans
 * lines out to the tails of their job.
 */
export class LiveTailHub {
  readonly settings: LiveTailSettings;
  private readonly byJob = new Map<string, Set<LiveTail>>();
  private readonly perClient = new Map<string, number>();
  private subscribing: Promise<void> | undefined;
  private subscription: Subscription | undefined;
  private stopped = false;

  constructor(
    private readonly o: {
      store: Store;
      clock: Clock;
      logger: Logger;
      bus?: SignedBus | undefined;
      settings?: Partial<LiveTailSettings> | undefined;
    },
  ) {
    this.settings = { ...DEFAULT_LIVE_TAIL, ...o.settings };
  }

  /** Whether broadcasts currently reach this process. */
  get live(): boolean {
    return this.subscription !== undefined;
  }

  /** Takes a stream slot for the client; undefined when it has the maximum open already. Call the result once to give it back. */
  acquire(client: string): (() => void) | undefined {
    const max = this.settings.maxStreamsPerClient;
    const open = this.perClient.get(client) ?? 0;
    if (max > 0 && open >= max) return undefined;
    this.perClient.set(client, open + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const n = (this.perClient.get(client) ?? 1) - 1;
      if (n <= 0) this.perClient.delete(client);
      else this.perClient.set(client, n);
    };
  }

  /** Starts a tail: subscribed to broadcasts first, then it replays from the store. */
  async open(options: { sse: SseStream; jobId: string; workflowId: string; attempt: number; after: number }): Promise<LiveTail> {
    const tail = new LiveTail(this, { ...options, store: this.o.store, clock: this.o.clock, logger: this.o.logger });
    await this.subscribe();
    if (this.stopped || !options.sse.isOpen) {
      tail.close();
      return tail;
    }
    let set = this.byJob.get(options.jobId);
    if (!set) this.byJob.set(options.jobId, (set = new Set()));
    set.add(tail);
    tail.start();
    return tail;
  }

  detach(tail: LiveTail): void {
    const set = this.byJob.get(tail.jobId);
    if (!set) return;
    set.delete(tail);
    if (set.size === 0) this.byJob.delete(tail.jobId);
  }

  private subscribe(): Promise<void> {
    const bus = this.o.bus;
    if (!bus || this.stopped) return Promise.resolve();
    this.subscribing ??= bus
      .subscribe(TOPICS.liveLogs, (envelope) => this.onBroadcast(envelope))
      .then((s) => {
        if (this.stopped) void s.cancel();
        else this.subscription = s;
      })
      .catch((err: unknown) => {
        // Tails poll the store meanwhile; the next tail tries again.
        this.o.logger.warn({ err }, 'live tails: could not subscribe to live log broadcasts; polling the store');
        this.subscribing = undefined;
      });
    return this.subscribing;
  }

  private onBroadcast(envelope: Envelope): void {
    if (envelope.type !== MESSAGE_TYPES.liveLogs) return;
    const body = envelope.body as Partial<LiveLogsMessage> | null;
    if (!body || typeof body.job_id !== 'string' || typeof body.attempt !== 'number' || !Array.isArray(body.lines)) return;
    const tails = this.byJob.get(body.job_id);
    if (!tails) return;
    const lines: LogLine[] = [];
    for (const l of body.lines) {
      if (typeof l?.sequence_num !== 'number' || typeof l.message !== 'string' || typeof l.timestamp !== 'number') continue;
      if (l.stream !== 'stdout' && l.stream !== 'stderr') continue;
      lines.push({ jobId: body.job_id, attempt: body.attempt, sequenceNum: l.sequence_num, stream: l.stream, message: l.message, timestamp: l.timestamp });
    }
    for (const tail of tails) tail.onLive(body.attempt, lines);
  }

  /** Ends every open stream (without `end`: clients reconnect with Last-Event-ID) and leaves the topic. Idempotent. */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const set of [...this.byJob.values()]) for (const tail of [...set]) tail.close();
    await this.subscribing;
    const s = this.subscription;
    this.subscription = undefined;
    await s?.cancel().catch((err: unknown) => this.o.logger.warn({ err }, 'live tails: unsubscribing failed'));
  }
}

/**
 * One client's tail of one job attempt. Lines reach it from two sources —
 * store reads (the replay after `after`, periodic polls, gap fills) and bus
 * broadcasts — and meet in `pending`, keyed by sequence_num; they leave it
 * strictly in order, each once, so the client sees no gap and no duplicate
 * whichever source was first. A missing sequence_num holds the lines after it
 * back for up to holeGraceMs (a concurrent ingest may still commit it).
 */
export class LiveTail {
  readonly jobId: string;
  private readonly workflowId: string;
  private attempt: number;
  /** The highest sequence_num sent (or the client's Last-Event-ID). */
  private last: number;
  private readonly pending = new Map<number, LogLine>();
  private holeSince: number | undefined;
  private holeRefilled = false;
  /** Bumped when the job moves to another attempt: reads started before it are stale. */
  private epoch = 0;
  private sent = 0;
  private lastPollAt = 0;

  private pumping = false;
  private wantPump = false;
  private wantRefill = false;
  private wantFinish = false;

  private terminal: Job | undefined;
  private finishChecks = 0;
  private sentAtFinishCheck = 0;
  private statusBusy = false;

  private closed = false;
  private readonly timers: NodeJS.Timeout[] = [];

  constructor(
    private readonly hub: LiveTailHub,
    private readonly o: {
      sse: SseStream;
      jobId: string;
      workflowId: string;
      attempt: number;
      after: number;
      store: Store;
      clock: Clock;
      logger: Logger;
    },
  ) {
    this.jobId = o.jobId;
    this.workflowId = o.workflowId;
    this.attempt = o.attempt;
    this.last = o.after;
    void o.sse.closed.then(() => this.close());
  }

  private get settings(): LiveTailSettings {
    return this.hub.settings;
  }

  start(): void {
    if (this.closed) return;
    this.o.sse.event('connected', { id: this.jobId, workflow_id: this.workflowId });
    const s = this.settings;
    this.timers.push(
      setInterval(() => {
        // With broadcasts flowing the store is only a safety net.
        if (this.hub.live && performance.now() - this.lastPollAt < s.busPollMs) return;
        this.kick(true);
      }, s.pollMs),
      setInterval(() => void this.checkStatus(), s.statusMs),
      setInterval(() => this.o.sse.comment('keep-alive'), s.keepAliveMs),
    );
    this.kick(true);
    void this.checkStatus();
  }

  onLive(attempt: number, lines: readonly LogLine[]): void {
    if (this.closed || attempt !== this.attempt) return;
    let added = false;
    for (const line of lines) {
      if (line.sequenceNum <= this.last || this.pending.has(line.sequenceNum)) continue;
      // Past the bound, the store supplies them later.
      if (this.pending.size >= this.settings.maxPending) break;
      this.pending.set(line.sequenceNum, line);
      added = true;
    }
    if (added) this.kick(false);
  }

  /** Ends the stream (no event). Idempotent. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    for (const t of this.timers) clearInterval(t);
    this.pending.clear();
    this.hub.detach(this);
    this.o.sse.end();
  }

  private finish(event: 'end' | 'error', data: unknown): void {
    if (this.closed) return;
    this.o.sse.event(event, data);
    this.close();
  }

  private fail(err: unknown): void {
    if (this.closed) return;
    let error: OrlojError;
    if (isOrlojError(err)) error = err;
    else {
      this.o.logger.error({ err, jobId: this.jobId }, 'live tail failed');
      error = new OrlojError('service_unavailable', 'The log stream was interrupted; reconnect to resume.', { kind: 'operational' });
    }
    this.finish('error', problemOf(error));
  }

  private kick(refill: boolean): void {
    this.wantPump = true;
    if (refill) this.wantRefill = true;
    if (!this.pumping) void this.pump();
  }

  /** The one place lines are sent: rounds run one at a time. */
  private async pump(): Promise<void> {
    this.pumping = true;
    try {
      while (this.wantPump && !this.closed) {
        this.wantPump = false;
        const refill = this.wantRefill;
        this.wantRefill = false;
        const finish = refill && this.wantFinish;
        if (finish) this.wantFinish = false;
        let hole: boolean;
        if (refill) {
          hole = await this.refill();
          this.holeRefilled = hole;
        } else {
          hole = await this.drain(false);
          // A gap in what the bus brought: look in the store once at once, later at the poll.
          if (hole && !this.holeRefilled) {
            this.holeRefilled = true;
            this.wantPump = this.wantRefill = true;
          }
        }
        if (finish) await this.finishCheck();
      }
    } catch (err) {
      this.fail(err);
    } finally {
      this.pumping = false;
    }
  }

  /** Reads the store after the last line sent, sending as it goes; true when a gap remains. */
  private async refill(): Promise<boolean> {
    this.lastPollAt = performance.now();
    for (;;) {
      const epoch = this.epoch;
      const rows = await this.o.store.logQueries.after({ jobId: this.jobId, attempt: this.attempt, after: this.last, limit: this.settings.batchSize });
      if (this.closed || epoch !== this.epoch) return false;
      for (const row of rows) if (row.sequenceNum > this.last) this.pending.set(row.sequenceNum, row);
      const hole = await this.drain(false);
      if (hole || rows.length < this.settings.batchSize) return hole;
    }
  }

  /** Sends pending lines in order while they are consecutive; true when a gap holds the rest back. */
  private async drain(skipHoles: boolean): Promise<boolean> {
    while (!this.closed) {
      const next = this.pending.get(this.last + 1);
      if (next) {
        this.pending.delete(next.sequenceNum);
        this.last = next.sequenceNum;
        this.sent++;
        if (!this.o.sse.event('log', presentLogEntry(next), String(next.sequenceNum))) await this.o.sse.drained();
        continue;
      }
      if (this.pending.size === 0) {
        this.holeSince = undefined;
        return false;
      }
      const now = performance.now();
      this.holeSince ??= now;
      if (!skipHoles && now - this.holeSince < this.settings.holeGraceMs) return true;
      this.o.logger.warn({ jobId: this.jobId, attempt: this.attempt, after: this.last }, 'live tail: skipping sequence numbers that never arrived');
      this.last = Math.min(...this.pending.keys()) - 1;
      this.holeSince = undefined;
    }
    return false;
  }

  private async checkStatus(): Promise<void> {
    if (this.statusBusy || this.closed) return;
    this.statusBusy = true;
    try {
      const job = await this.o.store.jobs.findById(this.jobId);
      if (this.closed) return;
      if (!job) {
        this.fail(notFound('The job'));
        return;
      }
      if (job.attempts !== this.attempt) {
        // A retry on another runner: its lines are numbered from 0 again.
        this.epoch++;
        this.attempt = job.attempts;
        this.last = -1;
        this.pending.clear();
        this.holeSince = undefined;
        this.terminal = undefined;
        this.finishChecks = 0;
        this.kick(true);
      }
      if (TERMINAL.has(job.status)) {
        this.terminal = job;
        this.wantFinish = true;
        this.kick(true);
      }
    } catch (err) {
      this.fail(err);
    } finally {
      this.statusBusy = false;
    }
  }

  /**
   * After a store read, with the job terminal: `end` once the lines have
   * settled — nothing new arrived since the previous check (log-ingest may
   * still be writing the last batches when the job finishes), or the job
   * finished longer ago than a status interval.
   */
  private async finishCheck(): Promise<void> {
    const job = this.terminal;
    if (!job || this.closed) return;
    const quiet = this.finishChecks > 0 && this.sent === this.sentAtFinishCheck;
    const settledLongAgo = job.completedAt !== null && this.o.clock.now() - job.completedAt >= this.settings.statusMs;
    this.finishChecks++;
    this.sentAtFinishCheck = this.sent;
    if (!quiet && !settledLongAgo && this.finishChecks < MAX_FINISH_CHECKS) return;
    // Whatever is still held back behind a gap goes out now.
    await this.drain(true);
    this.finish('end', { id: this.jobId, workflow_id: this.workflowId, status: job.status });
  }
}
