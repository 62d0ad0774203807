import { type Expression, type Kysely, type RawBuilder, type SqlBool } from 'kysely';
import { foldCase, type DialectHelpers } from '../dialect.js';
import type { Database, JobLogsTable, Selectable } from '../schema.js';

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

  constructor(readonly needle: string) {
    if (needle.length === 0) throw new RangeError('a search needle must not be empty');
    this.folded = foldCase(needle);
  }

  /** Whether the message contains the needle (what the SQL filter answers). */
  test(message: string): boolean {
    return foldSameLength(message).includes(this.folded);
  }

  /**
   * The message with `token` inserted immediately before and after every
   * match: non-overlapping, leftmost first (as String.replaceAll finds them),
   * so "aa" in "aaa" is marked once, around the first two characters.
   */
  highlight(message: string, token: string): string {
    const folded = foldSameLength(message);
    const width = this.folded.length;
    let out = '';
    let from = 0;
    for (let at = folded.indexOf(this.folded); at !== -1; at = folded.indexOf(this.folded, at + width)) {
      out += message.slice(from, at) + token + message.slice(at, at + width) + token;
      from = at + width;
    }
    return from === 0 ? message : out + message.slice(from);
  }

  /** The test in SQL, for `haystack`. */
  sql(haystack: Expression<string>, dialect: DialectHelpers): RawBuilder<SqlBool> {
    return dialect.containsFolded(haystack, this.needle);
  }
}

// ---- queries -----------------------------------------------------------------

export function toLogLine(r: Selectable<JobLogsTable>): LogLine {
  return {
    jobId: r.job_id,
    attempt: r.attempt,
    sequenceNum: r.sequence_num,
    stream: r.stream,
    message: r.message,
    timestamp: r.timestamp,
  };
}

export class LogQueriesRepo {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly dialect: DialectHelpers,
  ) {}

  /** Compiles a search needle (not empty). */
  matcher(needle: string): LogMatcher {
    return new LogMatcher(needle);
  }

  private filtered(f: LogFilter) {
    let q = this.db.selectFrom('job_logs').selectAll().where('job_id', '=', f.jobId).where('attempt', '=', f.attempt);
    if (f.stream) q = q.where('stream', '=', f.stream);
    const match = f.match;
    if (match) q = q.where(({ ref }) => match.sql(ref('message'), this.dialect));
    return q;
  }

  /** Newest first: the lines with sequence_num below `before` (all when absent). */
  async page(f: LogFilter & { before?: number; limit: number }): Promise<LogLine[]> {
    let q = this.filtered(f);
    if (f.before !== undefined) q = q.where('sequence_num', '<', f.before);
    const rows = await q.orderBy('sequence_num', 'desc').limit(f.limit).execute();
    return rows.map(toLogLine);
  }

  /** Oldest first: the lines with sequence_num above `after` (all when absent). */
  async after(f: LogFilter & { after?: number; limit: number }): Promise<LogLine[]> {
    let q = this.filtered(f);
    if (f.after !== undefined) q = q.where('sequence_num', '>', f.after);
    const rows = await q.orderBy('sequence_num', 'asc').limit(f.limit).execute();
    return rows.map(toLogLine);
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
