import { CompiledQuery, type Kysely } from 'kysely';
import type { Database } from '../schema.js';
import type { DialectHelpers } from '../dialect.js';
import { indexLogBlocks } from '../log-blocks.js';

/** One captured line as log-ingest writes it. */
export interface LogLineInput {
  sequence_num: number;
  stream: 'stdout' | 'stderr';
  message: string;
  /** ms since the epoch */
  timestamp: number;
}

export interface JobOwner {
  workflowId: string;
  userId: string;
}

const COLUMNS = ['job_id', 'attempt', 'sequence_num', 'stream', 'message', 'timestamp'] as const;

/** NUL cannot be stored in PostgreSQL text; both engines store U+FFFD instead. */
function withoutNul(message: string): string {
  return message.includes('\u0000') ? message.replaceAll('\u0000', '\ufffd') : message;
}

/**
 * SQLite: rows per INSERT statement, largest first. A batch is cut into chunks of
 * these sizes only, so the statement texts repeat and SQLite's statement cache
 * keeps them prepared (any row count is a sum of them). 1 024 rows × 6 columns
 * stays below SQLite's limit of 32 766 parameters.
 */
const CHUNK_SIZES = [1024, 256, 64, 16, 4, 1] as const;

/**
 * The write side of job logs (log-ingest). The read side (list, search,
 * download) belongs to the api. Every method runs in the caller's
 * transaction: log-ingest writes a batch's lines and its count together.
 */
/** INSERT texts by dialect and row count (a Store is built per transaction; the texts outlive it). */
const STATEMENTS = new Map<string, string>();

export class LogsRepo {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly dialect: DialectHelpers,
  ) {
    for (const size of CHUNK_SIZES) {
      if (size * COLUMNS.length > dialect.maxParameters) throw new RangeError(`a chunk of ${size} rows exceeds the parameter limit`);
    }
  }

  /**
   * The job's workflow and owner, or undefined when the job no longer exists
   * (its workflow was deleted). In PostgreSQL the row is locked against
   * deletion (FOR KEY SHARE) until the transaction ends, so the lines written
   * next cannot fail their foreign key; SQLite's single writer gives the same.
   */
  async jobOwner(jobId: string): Promise<JobOwner | undefined> {
    let q = this.db.selectFrom('jobs').select(['workflow_id', 'user_id']).where('id', '=', jobId);
    if (this.dialect.rowLocks) q = q.forKeyShare();
    const row = await q.executeTakeFirst();
    return row && { workflowId: row.workflow_id, userId: row.user_id };
  }

  /**
   * Stores lines of one job attempt. Idempotent: a line whose (job, attempt,
   * sequence_num) is already stored is skipped (ON CONFLICT DO NOTHING), so a
   * redelivered batch writes nothing twice. NUL characters, which PostgreSQL
   * text cannot hold, become U+FFFD on both engines. Returns the number of
   * lines newly stored.
   */
  async insertBatch(jobId: string, attempt: number, lines: readonly LogLineInput[]): Promise<number> {
    const inserted = await this.insertLines(jobId, attempt, lines);
    // The search skip index (log-blocks.ts), in the same transaction. A batch
    // stored before (nothing new) was indexed with it then.
    if (inserted > 0) await indexLogBlocks(this.db, this.dialect, jobId, attempt, lines);
    return inserted;
  }

  private async insertLines(jobId: string, attempt: number, lines: readonly LogLineInput[]): Promise<number> {
    if (lines.length === 0) return 0;
    if (this.dialect.name === 'postgres') return this.insertUnnest(jobId, attempt, lines);
    let inserted = 0;
    let offset = 0;
    for (const size of CHUNK_SIZES) {
      while (lines.length - offset >= size) {
        const params: unknown[] = new Array<unknown>(size * COLUMNS.length);
        for (let i = 0, p = 0; i < size; i++) {
          const line = lines[offset + i]!;
          params[p++] = jobId;
          params[p++] = attempt;
          params[p++] = line.sequence_num;
          params[p++] = line.stream;
          params[p++] = withoutNul(line.message);
          params[p++] = line.timestamp;
        }
        const result = await this.db.executeQuery(CompiledQuery.raw(this.insertStatement(size), params));
        inserted += Number(result.numAffectedRows ?? 0n);
        offset += size;
      }
    }
    return inserted;
  }

  /**
   * PostgreSQL: the whole batch in one statement of four arrays, unpacked by
   * unnest(). No parameter limit, nothing large to parse; ~1.4× the rate of
   * multi-row VALUES (docs/adr/0003).
   */
  private async insertUnnest(jobId: string, attempt: number, lines: readonly LogLineInput[]): Promise<number> {
    const n = lines.length;
    const seqs = new Array<number>(n);
    const streams = new Array<string>(n);
    const messages = new Array<string>(n);
    const timestamps = new Array<number>(n);
    for (let i = 0; i < n; i++) {
      const line = lines[i]!;
      seqs[i] = line.sequence_num;
      streams[i] = line.stream;
      messages[i] = withoutNul(line.message);
      timestamps[i] = line.timestamp;
    }
    const result = await this.db.executeQuery(
      CompiledQuery.raw(
        `insert into job_logs (job_id, attempt, sequence_num, stream, message, "timestamp")
         select $1::uuid, $2::integer, s, t, m, ts from unnest($3::integer[], $4::text[], $5::text[], $6::bigint[]) as u(s, t, m, ts)
         on conflict do nothing`,
        [jobId, attempt, seqs, streams, messages, timestamps],
      ),
    );
    return Number(result.numAffectedRows ?? 0n);
  }

  /**
   * Raises the attempt's line count to `lines` (the highest sequence_num seen
   * + 1), creating the row if needed. Monotonic and idempotent: a
   * redelivered or late batch never lowers or doubles it.
   */
  async recordCount(c: { jobId: string; attempt: number; workflowId: string; userId: string; lines: number }): Promise<void> {
    await this.db
      .insertInto('job_log_counts')
      .values({ job_id: c.jobId, attempt: c.attempt, workflow_id: c.workflowId, user_id: c.userId, lines: c.lines })
      .onConflict((oc) =>
        oc
          .columns(['job_id', 'attempt'])
          .doUpdateSet({ lines: (eb) => eb.ref('excluded.lines') })
          .whereRef('job_log_counts.lines', '<', 'excluded.lines'),
      )
      .execute();
  }

  /** The counted lines of one job attempt (0 when none were counted). */
  async count(jobId: string, attempt: number): Promise<number> {
    const row = await this.db
      .selectFrom('job_log_counts')
      .select('lines')
      .where('job_id', '=', jobId)
      .where('attempt', '=', attempt)
      .executeTakeFirst();
    return row?.lines ?? 0;
  }

  private insertStatement(rows: number): string {
    const key = `${this.dialect.name}:${rows}`;
    let text = STATEMENTS.get(key);
    if (text === undefined) {
      const pg = this.dialect.name === 'postgres';
      const tuples: string[] = [];
      for (let i = 0, p = 1; i < rows; i++) {
        const ps: string[] = [];
        for (let c = 0; c < COLUMNS.length; c++) ps.push(pg ? `$${p++}` : '?');
        tuples.push(`(${ps.join(',')})`);
      }
      text = `insert into job_logs (${COLUMNS.map((c) => `"${c}"`).join(', ')}) values ${tuples.join(',')} on conflict do nothing`;
      STATEMENTS.set(key, text);
    }
    return text;
  }
}
