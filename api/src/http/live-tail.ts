import { performance } from 'node:perf_hooks';
import type { Clock } from '@orloj/common/core';
import type { Job } from '@orloj/common/domain';
import type { Logger } from '@orloj/common/logging';
import { MESSAGE_TYPES, TOPICS, type LiveLogsMessage } from '@orloj/common/messages';
import type { SignedBus } from '@orloj/common/envelope';
import type { Subscription } from '@orloj/common/bus';
import type { LogLine, Store } from '@orloj/common/store';
import { presentLogEntry } from './present.js';
import { sseFrame, type SseStream } from './sse.js';
import { DEFAULT_LIVE_TAIL, type LiveTailSettings } from './live-tail-settings.js';
import { LiveTail } from './live-tail-stream.js';

export { DEFAULT_LIVE_TAIL, type LiveTailSettings } from './live-tail-settings.js';

/*
 * Live log tails, in three files: this one fans bus broadcasts and the
 * shared timers and status reads out to the tails of each job
 * (LiveTailHub); live-tail-stream.ts is one client's tail (replay from the
 * store, ordering, writing SSE frames); live-tail-settings.ts their settings.
 */

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

const atLimit = (open: Map<string, number>, key: string, max: number) => max > 0 && (open.get(key) ?? 0) >= max;
const take = (open: Map<string, number>, key: string) => open.set(key, (open.get(key) ?? 0) + 1);
function give(open: Map<string, number>, key: string): void {
  const n = (open.get(key) ?? 1) - 1;
  if (n <= 0) open.delete(key);
  else open.set(key, n);
}

/**
 * The live tails of one api process: the per-client and per-user stream limits, the bus
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
  private readonly perUser = new Map<string, number>();
  /** Tails that sent `end` and hold their stream open for the client to close it. */
  private readonly held = new Set<LiveTail>();
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
  metrics(): { jobs: number; tails: number; held: number; frames: number; statusReads: number; countReads: number; lineReads: number } {
    let tails = 0;
    for (const job of this.byJob.values()) tails += job.tails.size;
    return { jobs: this.byJob.size, tails, held: this.held.size, ...this.counts };
  }

  /** Whether broadcasts currently reach this process. */
  get live(): boolean {
    return this.subscription !== undefined;
  }

  /**
   * Takes a stream slot for the client address and the user; the limit
   * reached ('client' or 'user') when either has its maximum open already.
   * Call the release function once to give the slots back.
   */
  acquire(client: string, userId: string): (() => void) | 'client' | 'user' {
    if (atLimit(this.perClient, client, this.settings.maxStreamsPerClient)) return 'client';
    if (atLimit(this.perUser, userId, this.settings.maxStreamsPerUser)) return 'user';
    take(this.perClient, client);
    take(this.perUser, userId);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      give(this.perClient, client);
      give(this.perUser, userId);
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

  /** Takes a tail out of its job's (and out of the held ones). Idempotent. */
  detach(tail: LiveTail): void {
    this.held.delete(tail);
    const job = this.byJob.get(tail.jobId);
    if (!job || !job.tails.delete(tail)) return;
    if (job.tails.size === 0) {
      for (const t of job.timers) clearInterval(t);
      this.byJob.delete(tail.jobId);
    }
  }

  /** Keeps a tail that sent `end` until it closes, so stop() can end it; false once stopped. */
  hold(tail: LiveTail): boolean {
    if (this.stopped) return false;
    this.held.add(tail);
    return true;
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
      .subscribe(TOPICS.liveLogs, (envelope) => this.onBroadcast(envelope.body), { accept: [MESSAGE_TYPES.liveLogs] })
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

  /** `body`: decoded by decodeLiveLogs (lines a tail cannot use are left out; the tail fills a gap from the store). */
  private onBroadcast(body: LiveLogsMessage): void {
    const job = this.byJob.get(body.job_id);
    if (!job) return;
    const lines: LogLine[] = body.lines.map((l) => ({ jobId: body.job_id, attempt: body.attempt, sequenceNum: l.sequence_num, stream: l.stream, message: l.message, timestamp: l.timestamp }));
    for (const tail of job.tails) tail.onLive(body.attempt, lines);
  }

  /** Ends every open stream (without `end`: clients reconnect with Last-Event-ID; held ones after theirs) and leaves the topic. Idempotent. */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const job of [...this.byJob.values()]) for (const tail of [...job.tails]) tail.close();
    for (const tail of [...this.held]) tail.close();
    await this.subscribing;
    const s = this.subscription;
    this.subscription = undefined;
    await s?.cancel().catch((err: unknown) => this.o.logger.warn({ err }, 'live tails: unsubscribing failed'));
  }
}
