import { foldCase, type DialectHelpers } from '../dialect.js';
import type { ExpressionBuilder } from 'kysely';
import { slot, type CompiledRead, type ReadOptions, type ReadRunner } from '../compiled-read.js';
import type { Database } from '../schema.js';
import { BLOCK_LINES, needleProbes } from '../log-blocks.js';

/**
 * The read side of job logs: pages for list and search (newest first), and
 * ascending batches for downloads and live tails. The write side (log-ingest)
 * owns the inserts.
 */
export type LogStream = 'stdout' | 'stderr';

export interface LogLine {
  jobId: string;
  attempt: number;
  sequenceNum: number;
  stream: LogStream;
  message: string;
  /** ms since the epoch */
  timestamp: number;
}

export interface LogFilter {
  jobId: string;
  /** The attempt whose lines are read (a job shows the lines of its current attempt). */
  attempt: number;
  stream?: LogStream;
  /** Case-insensitive literal substring of the message (from `matcher()`). */
  match?: LogMatcher;
}

// ---- case-insensitive matching ----------------------------------------------
//
// Search filters in SQL (dialect.containsFolded) and highlights in JS, both
// under the one fold of dialect.foldCase, so a returned line always carries a
// highlight and every highlight is a match. foldCase keeps the UTF-16 length
// of a string, so a position found in the folded message is the same position
// in the original.

/**
 * `s` folded; guaranteed to have the length of `s`. foldCase keeps lengths for
 * every character Unicode has today; should a future version add one whose
 * lower case differs in length, that character alone is left unfolded here.
 */
function foldSameLength(s: string): string {
  const folded = foldCase(s);
  if (folded.length === s.length) return folded;
  let out = '';
  for (const ch of s) {
    const f = foldCase(ch);
    out += f.length === ch.length ? f : ch;
  }
  return out;
}

/**
 * A compiled search needle: the SQL filter, and the same test and its
 * highlights in JS.
 */
export class LogMatcher {
  /** The needle folded. */
  readonly folded: string;

  /** The skip index's probes for the needle (log-blocks.ts); undefined when it is too short to skip anything. */
  readonly probes: readonly number[] | undefined;

  constructor(readonly needle: string) {
    if (needle.length === 0) throw new RangeError('a search needle must not be empty');
    this.folded = foldCase(needle);
    this.probes = needleProbes(this.folded);
  }

  /** Whether the message contains the needle (what the SQL filter answers). */
  test(message: string): boolean {
    return foldSameLength(message).includes(this.folded);
  }

  /**
   * The message with `start` inserted immediately before and `end` after every
   * match: non-overlapping, leftmost first (as String.replaceAll finds them),
   * so "aa" in "aaa" is marked once, around the first two characters.
   */
  highlight(message: string, start: string, end: string): string {
    const folded = foldSameLength(message);
    const width = this.folded.length;
    let out = '';
    let from = 0;
    for (let at = folded.indexOf(this.folded); at !== -1; at = folded.indexOf(this.folded, at + width)) {
      out += message.slice(from, at) + start + message.slice(at, at + width) + end;
      from = at + width;
    }
    return from === 0 ? message : out + message.slice(from);
  }
}

// ---- queries -----------------------------------------------------------------

/**
 * The current attempt of the job `jobId`, found only when the job is
 * `userId`'s, in `workflowId`, and its workflow keeps logs: the access check
 * of ownedPage, in the statement that reads the rows.
 */
const ownedAttempt = (eb: ExpressionBuilder<Database, any>) =>
  eb
    .selectFrom('jobs as j')
    .innerJoin('workflows as w', 'w.id', 'j.workflow_id')
    .select('j.attempts')
    .where('j.id', '=', slot<string>('jobId'))
    .where('j.workflow_id', '=', slot<string>('workflowId'))
    .where('j.user_id', '=', slot<string>('userId'))
    .where('w.user_id', '=', slot<string>('userId'))
    .where('w.log_retention', '=', 1);

/** Reads of lines and of the skip index run off the event loop (compiled-read.ts, ReadOptions). */
const HEAVY: ReadOptions = { heavy: true };

/** The columns of a LogLine read, in the order of LineRow (the job comes from the filter). */
const LINE_COLUMNS = ['sequence_num', 'stream', 'message', 'timestamp', 'attempt'] as const;
type LineRow = [sequenceNum: number, stream: LogStream, message: string, timestamp: number, attempt: number];

export class LogQueriesRepo {
  constructor(
    private readonly dialect: DialectHelpers,
    private readonly runner: ReadRunner,
  ) {}

  /** Compiles a search needle (not empty). */
  matcher(needle: string): LogMatcher {
    return new LogMatcher(needle);
  }

  /**
   * The newest lines (below `before` when given) of the job's current attempt,
   * for its owner, with the access check in the same statement: the attempt
   * comes from a subquery that finds the job only when it is `owner`'s, in
   * `owner.workflowId`, and its workflow keeps logs. One statement where check
   * then page took two (two round trips on PostgreSQL), and the page cannot
   * belong to an attempt other than the one checked. Undefined when there is
   * no line to show, whether the page is empty or the job is not the owner's:
   * JobsRepo.logAccess tells them apart.
   */
  async ownedPage(
    owner: { userId: string; workflowId: string },
    f: Omit<LogFilter, 'attempt'> & { before?: number; limit: number },
  ): Promise<{ attempt: number; lines: LogLine[] } | undefined> {
    if (f.match?.probes) {
      const page = await this.skippingPage(owner, f, f.match.probes);
      if (page !== 'scan') return page;
    }
    const read = this.linesRead(f, { order: 'desc', bounded: f.before !== undefined, attempt: 'owner' });
    const lines = await this.lines(read, f, { ...owner, bound: f.before });
    return lines.length ? { attempt: lines[0]!.attempt, lines } : undefined;
  }

  /**
   * ownedPage for a search, with the skip index (docs/adr/0007): walks the
   * attempt's blocks newest first, a few filters per statement (the same
   * access check in it), and runs the plain search only on the stretches of
   * sequence numbers between blocks whose filters rule the needle out, until
   * the page is full. Rows of a skipped block cannot match, so the page is
   * the one the plain scan returns. Chunks grow (8, 64, 512 … filters), so a
   * term found near the end reads a handful of filters and a rare one a few
   * statements. 'scan' when the attempt has no blocks, or it changed between
   * the statements.
   */
  private async skippingPage(
    owner: { userId: string; workflowId: string },
    f: Omit<LogFilter, 'attempt'> & { before?: number; limit: number },
    probes: readonly number[],
  ): Promise<{ attempt: number; lines: LogLine[] } | undefined | 'scan'> {
    const probesParam = this.dialect.probesParam(probes);
    const lines: LogLine[] = [];
    let attempt: number | undefined;
    let upper = f.before; // exclusive: everything at and above it is done
    // Scans [from, upper) with the plain statement; false when its rows are another attempt's.
    const scanDown = async (from: number): Promise<boolean> => {
      if (upper !== undefined && upper <= from) return true;
      const read = this.linesRead(f, { order: 'desc', bounded: upper !== undefined, attempt: 'owner', floor: true });
      const got = await this.lines(read, { ...f, limit: f.limit - lines.length }, { ...owner, bound: upper, floor: from });
      if (got.some((line) => line.attempt !== attempt)) return false;
      lines.push(...got);
      upper = from;
      return true;
    };
    let below = f.before === undefined ? undefined : Math.floor(f.before / BLOCK_LINES) + 1;
    for (let chunk = 8; ; chunk = Math.min(chunk * 8, 4096)) {
      const blocks = (await this.runner.rows(
        this.blocksRead(below !== undefined),
        { jobId: f.jobId, ...owner, probes: probesParam, below, limit: chunk },
        HEAVY,
      )) as [attempt: number, blockNum: number, seqFrom: number, seqTo: number, lacks: unknown][];
      if (blocks.length === 0 && attempt === undefined) return 'scan';
      for (const [a, blockNum, seqFrom, seqTo, lacks] of blocks) {
        attempt ??= Number(a);
        if (Number(a) !== attempt) return 'scan';
        below = Number(blockNum);
        // Blocks never overlap (a block's range lies within its BLOCK_LINES), so
        // block order is sequence order.
        if (lacks === true || lacks === 1) {
          if (!(await scanDown(Number(seqTo) + 1))) return 'scan';
          if (lines.length >= f.limit) return { attempt, lines };
          upper = upper === undefined ? Number(seqFrom) : Math.min(upper, Number(seqFrom));
        }
      }
      if (blocks.length < chunk) break;
      // The candidates at the chunk's end, before reading more filters.
      if (!(await scanDown(Number(blocks[blocks.length - 1]![2])))) return 'scan';
      if (lines.length >= f.limit) return { attempt: attempt!, lines };
    }
    if (!(await scanDown(0))) return 'scan';
    return lines.length ? { attempt: attempt!, lines } : undefined;
  }

  /**
   * `limit` blocks of the owner's current attempt, newest first (below block
   * `below` when bounded), each with whether its filter lacks a probe.
   */
  private blocksRead(bounded: boolean): CompiledRead {
    return this.runner.reads.get(`logs.blocks:${bounded ? 'bound' : ''}`, (db) => {
      let q = db
        .selectFrom('job_log_blocks')
        .select(['attempt', 'block_num', 'seq_from', 'seq_to'])
        .select(({ ref }) => this.dialect.bloomLacks(ref('bloom'), slot<unknown>('probes')).as('lacks'))
        .where('job_id', '=', slot<string>('jobId'))
        .where('attempt', '=', ownedAttempt);
      if (bounded) q = q.where('block_num', '<', slot<number>('below'));
      return q.orderBy('block_num', 'desc').limit(slot<number>('limit'));
    });
  }

  /** Oldest first: the lines of the attempt with sequence_num above `after` (all when absent). */
  after(f: LogFilter & { after?: number; limit: number }): Promise<LogLine[]> {
    const read = this.linesRead(f, { order: 'asc', bounded: f.after !== undefined, attempt: 'given' });
    return this.lines(read, f, { attempt: f.attempt, bound: f.after });
  }

  /**
   * How many lines of the attempt are stored: its newest sequence_num + 1 (0
   * when none). Stored lines are a prefix without gaps (docs/logs.md), so this
   * is also the count; one index probe (the primary key's last entry).
   */
  async stored(f: { jobId: string; attempt: number }): Promise<number> {
    const read = this.linesRead({ jobId: f.jobId }, { order: 'desc', bounded: false, attempt: 'given' });
    // One index probe: on the event loop, where it costs less than a message to a reader thread.
    const [newest] = await this.lines(read, { jobId: f.jobId, limit: 1 }, { attempt: f.attempt }, {});
    return newest ? newest.sequenceNum + 1 : 0;
  }

  /**
   * The statement after() (`given` attempt) or ownedPage() (the `owner`'s
   * current attempt) runs for a filter of this shape: compiled once per shape,
   * so list, search and live tails skip building SQL per call.
   */
  linesRead(
    f: Omit<LogFilter, 'attempt'>,
    shape: { order: 'asc' | 'desc'; bounded: boolean; attempt: 'given' | 'owner'; floor?: boolean },
  ): CompiledRead {
    const key = `logs.lines:${shape.order}:${shape.attempt}:${f.stream ? 'stream' : ''}:${f.match ? 'match' : ''}:${shape.bounded ? 'bound' : ''}:${shape.floor ? 'floor' : ''}`;
    return this.runner.reads.get(key, (db) => {
      let q = db.selectFrom('job_logs').select(LINE_COLUMNS).where('job_id', '=', slot<string>('jobId'));
      q = shape.attempt === 'given' ? q.where('attempt', '=', slot<number>('attempt')) : q.where('attempt', '=', ownedAttempt);
      if (f.stream) q = q.where('stream', '=', slot<LogStream>('stream'));
      if (f.match) q = q.where(({ ref }) => this.dialect.containsFolded(ref('message'), slot<string>('folded')));
      if (shape.bounded) q = q.where('sequence_num', shape.order === 'desc' ? '<' : '>', slot<number>('bound'));
      // The lowest sequence_num of a stretch between skipped blocks (skippingPage).
      if (shape.floor) q = q.where('sequence_num', '>=', slot<number>('floor'));
      return q.orderBy('sequence_num', shape.order).limit(slot<number>('limit'));
    });
  }

  /** Lines of a read; heavy unless told (a scan of a search may run over every line of a log). */
  private async lines(read: CompiledRead, f: Omit<LogFilter, 'attempt'> & { limit: number }, args: Record<string, unknown>, options: ReadOptions = HEAVY): Promise<LogLine[]> {
    const { jobId } = f;
    const rows = (await this.runner.rows(read, { jobId, stream: f.stream, folded: f.match?.folded, limit: f.limit, ...args }, options)) as LineRow[];
    return rows.map(([sequenceNum, stream, message, timestamp, attempt]) => ({ jobId, attempt, sequenceNum, stream, message, timestamp }));
  }

  /**
   * Every matching line, oldest first, in batches of at most `batchSize`: one
   * keyset query per batch, so memory stays bounded by a batch whatever the
   * log's size, and no transaction is held open between batches.
   */
  async *scan(f: LogFilter, batchSize = 1000): AsyncGenerator<LogLine[]> {
    let after: number | undefined;
    for (;;) {
      const batch = await this.after({ ...f, ...(after !== undefined ? { after } : {}), limit: batchSize });
      if (batch.length > 0) yield batch;
      if (batch.length < batchSize) return;
      after = batch[batch.length - 1]!.sequenceNum;
    }
  }
}
