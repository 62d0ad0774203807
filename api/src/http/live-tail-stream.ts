import { performance } from 'node:perf_hooks';
import { isOrlojError, notFound, OrlojError, type Clock } from '@orloj/common/core';
import type { Job } from '@orloj/common/domain';
import type { Logger } from '@orloj/common/logging';
import type { LogLine, Store } from '@orloj/common/store';
import { problemOf } from './problem.js';
import type { SseStream } from './sse.js';
import type { LiveTailHub } from './live-tail.js';
import type { LiveTailSettings } from './live-tail-settings.js';

const TERMINAL: ReadonlySet<Job['status']> = new Set(['COMPLETED', 'FAILED', 'CANCELED']);
/** After this many status checks that found the job terminal, `end` is sent even if lines still trickle in. */
const MAX_FINISH_CHECKS = 30;
/** A tail sends the lines it has ready in writes of about this many bytes at most. */
const WRITE_BYTES = 64 * 1024;

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

  /** No more events: the stream ended, or `end` was sent and it is held open (holdTimers). */
  private closed = false;
  private holdTimers: NodeJS.Timeout[] = [];

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

  /** Ends the stream (no event), held after `end` or not. Idempotent. */
  close(): void {
    for (const timer of this.holdTimers.splice(0)) clearTimeout(timer);
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
    if (event === 'end') this.hold();
    else this.close();
  }

  /**
   * After `end`, the stream stays open, with keep-alive comments, until the
   * client closes it, for holdAfterEndMs at most. A stream the server ends is
   * an error to EventSource and its polyfills (a toast in the reference
   * project's dashboard, which closes its EventSource once it sees the job
   * finished, not on `end`); a client that closes on `end` sees no difference.
   * The tail leaves its job's timers and status reads; the hub keeps it only
   * to end it on stop().
   */
  private hold(): void {
    this.closed = true;
    this.pending.clear();
    this.hub.detach(this);
    if (!this.o.sse.isOpen || !this.hub.hold(this)) {
      this.close();
      return;
    }
    const s = this.settings;
    this.holdTimers.push(
      setTimeout(() => this.close(), s.holdAfterEndMs),
      setInterval(() => this.keepAlive(), s.keepAliveMs),
    );
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
