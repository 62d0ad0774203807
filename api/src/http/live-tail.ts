import { performance } from 'node:perf_hooks';
import { isOrlojError, notFound, OrlojError, type Clock } from '@orloj/common/core';
import type { Job } from '@orloj/common/domain';
import type { Logger } from '@orloj/common/logging';
import { MESSAGE_TYPES, TOPICS, type LiveLogsMessage } from '@orloj/common/messages';
import type { Envelope, SignedBus } from '@orloj/common/envelope';
import type { Subscription } from '@orloj/common/bus';
import type { LogLine, Store } from '@orloj/common/store';
import { presentLogEntry } from './present.js';
import { problemOf } from './problem.js';
import { sseFrame, type SseStream } from './sse.js';

export interface LiveTailSettings {
  /** How often a tail reads the store for new lines while no bus feeds it. */
  pollMs: number;
  /**
   * While the bus feeds the tails, how often the store is checked for lines
   * the broadcasts missed: one read of the attempt's line count for all the
   * job's tails here, and a store read by those tails it shows behind.
   */
  busPollMs: number;
  /** How often the job's status is read (once for all its tails in this process) to send `end`. */
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
/** A tail sends the lines it has ready in writes of about this many bytes at most. */
const WRITE_BYTES = 64 * 1024;

/**
 * The tails of one job in this process, and what they share: one timer of
 * each kind, and one read of the job's status per statusMs for all of them.
 */
interface JobTails {
  readonly tails: Set<LiveTail>;
  readonly timers: NodeJS.Timeout[];
  statusBusy: boolean;
  /** A tail opened while a status read was under way: read again after it. */
  statusAgain: boolean;
  /** performance.now() of the last safety-net check (line counts), while broadcasts flow. */
  countedAt: number;
  countBusy: boolean;
  /** The line count of each attempt followed, as that check read it. */
  counted: Map<number, number>;
}

/**
 * The live tails of one api process: the per-client stream limit, the bus
 * subscription (TOPICS.liveLogs, opened with the first tail) that fans lines
 * out to the tails of their job, and per job the work its tails share — one
 * status read per statusMs, one timer of each kind, and each broadcast
 * line's `log` event serialised once (`frame`) however many tails send it.
 */
export class LiveTailHub {
  readonly settings: LiveTailSettings;
  private readonly byJob = new Map<string, JobTails>();
  /**
   * The `log` event of a line, as long as the line object lives (broadcast
   * lines are shared by every tail of the job): serialised and encoded once,
   * the same bytes written to every stream.
   */
  private readonly frames = new WeakMap<LogLine, Buffer>();
  private readonly counts = { frames: 0, statusReads: 0, countReads: 0, lineReads: 0 };
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

  /**
   * Since start: `frames`, `log` events serialised; store reads of a job's
   * status (`statusReads`), of an attempt's line count (`countReads`), and of
   * lines by a tail (`lineReads`).
   */
  metrics(): { jobs: number; tails: number; frames: number; statusReads: number; countReads: number; lineReads: number } {
    let tails = 0;
    for (const job of this.byJob.values()) tails += job.tails.size;
    return { jobs: this.byJob.size, tails, ...this.counts };
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
    let job = this.byJob.get(options.jobId);
    if (!job) this.byJob.set(options.jobId, (job = this.watch(options.jobId)));
    job.tails.add(tail);
    tail.start();
    void this.checkStatus(options.jobId);
    return tail;
  }

  detach(tail: LiveTail): void {
    const job = this.byJob.get(tail.jobId);
    if (!job) return;
    job.tails.delete(tail);
    if (job.tails.size === 0) {
      for (const t of job.timers) clearInterval(t);
      this.byJob.delete(tail.jobId);
    }
  }

  /** Counts a tail's read of lines from the store. */
  linesRead(): void {
    this.counts.lineReads += 1;
  }

  /** The `log` event of a line, serialised once per line object. */
  frame(line: LogLine): Buffer {
    let frame = this.frames.get(line);
    if (frame === undefined) {
      this.frames.set(line, (frame = Buffer.from(sseFrame('log', presentLogEntry(line), String(line.sequenceNum)), 'utf8')));
      this.counts.frames += 1;
    }
    return frame;
  }

  /** The shared timers of a job's tails (started with its first tail, stopped with its last). */
  private watch(jobId: string): JobTails {
    const s = this.settings;
    return {
      tails: new Set(),
      statusBusy: false,
      statusAgain: false,
      countedAt: performance.now(),
      countBusy: false,
      counted: new Map(),
      timers: [
        setInterval(() => void this.poll(jobId), s.pollMs),
        setInterval(() => void this.checkStatus(jobId), s.statusMs),
        setInterval(() => {
          for (const tail of this.byJob.get(jobId)?.tails ?? []) tail.keepAlive();
        }, s.keepAliveMs),
      ],
    };
  }

  /**
   * Without broadcasts, every tail reads the store every pollMs. With them,
   * the store is only a safety net for missed broadcasts: every busPollMs,
   * one read of the line count of each attempt the job's tails follow (log-
   * ingest raises it in the transaction that stores the lines, so no stored
   * line is above it), and a store read by the tails still behind the count
   * of the previous check — lines stored a whole busPollMs ago that no
   * broadcast brought. (Behind the count just read is normal: the broadcast
   * of the lines just stored may still be on its way.)
   */
  private async poll(jobId: string): Promise<void> {
    const job = this.byJob.get(jobId);
    if (!job) return;
    if (!this.live) {
      for (const tail of job.tails) tail.poll();
      return;
    }
    if (job.countBusy || performance.now() - job.countedAt < this.settings.busPollMs) return;
    job.countBusy = true;
    job.countedAt = performance.now();
    try {
      const counts = new Map<number, number>();
      for (const tail of job.tails) counts.set(tail.attempt, 0);
      try {
        for (const attempt of counts.keys()) counts.set(attempt, await this.o.store.logs.count(jobId, attempt));
      } catch (err) {
        this.o.logger.warn({ err, jobId }, 'live tails: could not read the line count; reading the store for every tail');
        for (const tail of job.tails) tail.poll();
        return;
      }
      this.counts.countReads += counts.size;
      for (const tail of job.tails) tail.pollIfBehind(job.counted);
      job.counted = counts;
    } finally {
      job.countBusy = false;
    }
  }

  /** Reads the job once for all its tails here; a read asked for while one runs follows it. */
  private async checkStatus(jobId: string): Promise<void> {
    const job = this.byJob.get(jobId);
    if (!job) return;
    if (job.statusBusy) {
      job.statusAgain = true;
      return;
    }
    job.statusBusy = true;
    try {
      do {
        job.statusAgain = false;
        let found: Job | undefined;
        this.counts.statusReads += 1;
        try {
          found = await this.o.store.jobs.findById(jobId);
        } catch (err) {
          for (const tail of [...job.tails]) tail.fail(err);
          continue;
        }
        for (const tail of [...job.tails]) tail.onStatus(found);
      } while (job.statusAgain && job.tails.size > 0 && !this.stopped);
    } finally {
      job.statusBusy = false;
    }
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
    const job = this.byJob.get(body.job_id);
    if (!job) return;
    const lines: LogLine[] = [];
    for (const l of body.lines) {
      if (typeof l?.sequence_num !== 'number' || typeof l.message !== 'string' || typeof l.timestamp !== 'number') continue;
      if (l.stream !== 'stdout' && l.stream !== 'stderr') continue;
      lines.push({ jobId: body.job_id, attempt: body.attempt, sequenceNum: l.sequence_num, stream: l.stream, message: l.message, timestamp: l.timestamp });
    }
    for (const tail of job.tails) tail.onLive(body.attempt, lines);
  }

  /** Ends every open stream (without `end`: clients reconnect with Last-Event-ID) and leaves the topic. Idempotent. */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const job of [...this.byJob.values()]) for (const tail of [...job.tails]) tail.close();
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
  /** The attempt followed (the job's latest; a retry moves it). */
  private followed: number;
  /** The highest sequence_num sent (or the client's Last-Event-ID). */
  private last: number;
  private readonly pending = new Map<number, LogLine>();
  private holeSince: number | undefined;
  private holeRefilled = false;
  /** Bumped when the job moves to another attempt: reads started before it are stale. */
  private epoch = 0;
  private sent = 0;

  private pumping = false;
  private wantPump = false;
  private wantRefill = false;
  private wantFinish = false;

  private terminal: Job | undefined;
  private finishChecks = 0;
  private sentAtFinishCheck = 0;

  private closed = false;

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
    this.followed = o.attempt;
    this.last = o.after;
    void o.sse.closed.then(() => this.close());
  }

  get attempt(): number {
    return this.followed;
  }

  private get settings(): LiveTailSettings {
    return this.hub.settings;
  }

  /** Sends `connected` and starts the replay; the hub checks the job's status and runs the timers. */
  start(): void {
    if (this.closed) return;
    this.o.sse.event('connected', { id: this.jobId, workflow_id: this.workflowId });
    this.kick(true);
  }

  /** Reads the store for lines after the last one sent. */
  poll(): void {
    if (!this.closed) this.kick(true);
  }

  /** Reads the store when it holds lines this tail has not sent (`counts`: line count by attempt). */
  pollIfBehind(counts: ReadonlyMap<number, number>): void {
    if ((counts.get(this.followed) ?? 0) - 1 > this.last) this.poll();
  }

  keepAlive(): void {
    this.o.sse.comment('keep-alive');
  }

  onLive(attempt: number, lines: readonly LogLine[]): void {
    if (this.closed || attempt !== this.followed) return;
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
    this.pending.clear();
    this.hub.detach(this);
    this.o.sse.end();
  }

  private finish(event: 'end' | 'error', data: unknown): void {
    if (this.closed) return;
    // `end` carries the last line's id (0 without lines): a client that reconnects
    // anyway sends it back, and the route answers 204 (nothing left) instead of a replay.
    this.o.sse.event(event, data, event === 'end' ? String(Math.max(this.last, 0)) : undefined);
    this.close();
  }

  /** Sends `error` (a problem document) and ends the stream. */
  fail(err: unknown): void {
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
    for (;;) {
      const epoch = this.epoch;
      this.hub.linesRead();
      const rows = await this.o.store.logQueries.after({ jobId: this.jobId, attempt: this.followed, after: this.last, limit: this.settings.batchSize });
      if (this.closed || epoch !== this.epoch) return false;
      for (const row of rows) if (row.sequenceNum > this.last) this.pending.set(row.sequenceNum, row);
      const hole = await this.drain(false);
      if (hole || rows.length < this.settings.batchSize) return hole;
    }
  }

  /**
   * Sends pending lines in order while they are consecutive, those ready
   * together in one write (of at most about WRITE_BYTES); true when a gap
   * holds the rest back.
   */
  private async drain(skipHoles: boolean): Promise<boolean> {
    const out: Buffer[] = [];
    let bytes = 0;
    let hole = false;
    while (!this.closed) {
      const next = this.pending.get(this.last + 1);
      if (next) {
        this.pending.delete(next.sequenceNum);
        this.last = next.sequenceNum;
        this.sent++;
        const frame = this.hub.frame(next);
        out.push(frame);
        bytes += frame.length;
        if (bytes >= WRITE_BYTES) {
          await this.send(out, bytes);
          bytes = 0;
        }
        continue;
      }
      if (this.pending.size === 0) {
        this.holeSince = undefined;
        break;
      }
      const now = performance.now();
      this.holeSince ??= now;
      if (!skipHoles && now - this.holeSince < this.settings.holeGraceMs) {
        hole = true;
        break;
      }
      this.o.logger.warn({ jobId: this.jobId, attempt: this.followed, after: this.last }, 'live tail: skipping sequence numbers that never arrived');
      this.last = Math.min(...this.pending.keys()) - 1;
      this.holeSince = undefined;
    }
    await this.send(out, bytes);
    return hole;
  }

  /** Writes the frames (and empties the array), waiting while the client is slow. */
  private async send(frames: Buffer[], bytes: number): Promise<void> {
    if (frames.length === 0) return;
    const data = frames.length === 1 ? frames[0]! : Buffer.concat(frames, bytes);
    frames.length = 0;
    if (!this.o.sse.send(data)) await this.o.sse.drained();
  }

  /** The job as the hub read it (undefined: it no longer exists). */
  onStatus(job: Job | undefined): void {
    if (this.closed) return;
    if (!job) {
      this.fail(notFound('The job'));
      return;
    }
    if (job.attempts !== this.followed) {
      // A retry on another runner: its lines are numbered from 0 again.
      this.epoch++;
      this.followed = job.attempts;
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
