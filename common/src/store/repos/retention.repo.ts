import { sql, type Kysely } from 'kysely';
import type { Database } from '../schema.js';
import { TERMINAL_JOB_STATUSES } from '../../domain/job.js';

/** A position in the walk over ended jobs: (completed_at, id). */
export interface EndedJobPosition {
  completedAt: number;
  id: string;
}

/**
 * The retention sweep's statements (docs/operations.md, "Retention"). Each
 * touches at most `limit` rows, so no statement holds a lock for long. Only
 * ended jobs are ever deleted, and never one of the newest `keep` jobs of its
 * workflow (the first page of its job list). Analytics do not read these
 * rows: job totals are counters (workflow_stats) and log totals are summed
 * from job_log_counts, which the sweep leaves alone.
 */
export class RetentionRepo {
  constructor(private readonly db: Kysely<Database>) {}

  /** Jobs that ended before `before`, oldest first, after `after` (the walk's last position). */
  async endedBefore(before: number, after: EndedJobPosition | undefined, limit: number): Promise<EndedJobPosition[]> {
    let q = this.db
      .selectFrom('jobs')
      .select(['id', 'completed_at'])
      .where('completed_at', 'is not', null)
      .where('completed_at', '<', before);
    if (after) q = q.where(sql<boolean>`(completed_at, id) > (${after.completedAt}, ${after.id})`);
    const rows = await q.orderBy('completed_at').orderBy('id').limit(limit).execute();
    return rows.map((r) => ({ completedAt: r.completed_at!, id: r.id }));
  }

  /**
   * Of `ids`, the jobs the sweep may prune: ended, and not among the newest
   * `keep` of their workflow in the job list's order (scheduled_at, id). The
   * count of newer jobs stops at `keep`, walking the list's index from the
   * newest, so it costs `keep` index entries per job whatever the table size.
   */
  async prunable(ids: readonly string[], keep: number): Promise<string[]> {
    if (ids.length === 0) return [];
    let q = this.db.selectFrom('jobs as j').select('j.id').where('j.id', 'in', ids).where('j.status', 'in', TERMINAL_JOB_STATUSES);
    if (keep > 0) {
      q = q.where(
        // The order by makes both engines walk the list's index from the newest and stop
        // at `keep` (PostgreSQL otherwise gathered every newer job in a bitmap first).
        sql<number>`(select count(*) from (select 1 from jobs k where k.workflow_id = j.workflow_id
          and (k.scheduled_at > j.scheduled_at or (k.scheduled_at = j.scheduled_at and k.id > j.id))
          order by k.scheduled_at desc, k.id desc limit ${keep}) newer)`,
        '>=',
        keep,
      );
    }
    return (await q.execute()).map((r) => r.id);
  }

  /** Deletes up to `limit` log lines of the jobs `ids`; returns how many. */
  async deleteLogLines(ids: readonly string[], limit: number): Promise<number> {
    if (ids.length === 0) return 0;
    const r = await this.db
      .deleteFrom('job_logs')
      .where((eb) =>
        eb(
          eb.refTuple('job_id', 'attempt', 'sequence_num'),
          'in',
          eb
            .selectFrom('job_logs')
            .select(['job_id', 'attempt', 'sequence_num'])
            .where('job_id', 'in', ids)
            // In key order: the primary key's index, never a scan of the table that a
            // bare LIMIT led PostgreSQL to (it expected to find the rows early).
            .orderBy('job_id')
            .orderBy('attempt')
            .orderBy('sequence_num')
            .limit(limit)
            .$asTuple('job_id', 'attempt', 'sequence_num'),
        ),
      )
      .executeTakeFirst();
    return Number(r.numDeletedRows);
  }

  /**
   * Deletes up to `limit` log search blocks (docs/adr/0007) of the jobs `ids`;
   * returns how many. Their lines go first: a block over deleted lines only
   * ever skips rows that are not there.
   */
  async deleteLogBlocks(ids: readonly string[], limit: number): Promise<number> {
    if (ids.length === 0) return 0;
    const r = await this.db
      .deleteFrom('job_log_blocks')
      .where((eb) =>
        eb(
          eb.refTuple('job_id', 'attempt', 'block_num'),
          'in',
          eb
            .selectFrom('job_log_blocks')
            .select(['job_id', 'attempt', 'block_num'])
            .where('job_id', 'in', ids)
            .orderBy('job_id')
            .orderBy('attempt')
            .orderBy('block_num')
            .limit(limit)
            .$asTuple('job_id', 'attempt', 'block_num'),
        ),
      )
      .executeTakeFirst();
    return Number(r.numDeletedRows);
  }

  /** Deletes the ended jobs `ids` (their log lines should be gone already, in bounded batches). */
  async deleteJobs(ids: readonly string[]): Promise<number> {
    if (ids.length === 0) return 0;
    const r = await this.db.deleteFrom('jobs').where('id', 'in', ids).where('status', 'in', TERMINAL_JOB_STATUSES).executeTakeFirst();
    return Number(r.numDeletedRows);
  }

  /** Deletes up to `limit` of the oldest notifications created before `before`; returns how many. */
  async deleteNotifications(before: number, limit: number): Promise<number> {
    const r = await this.db
      .deleteFrom('notifications')
      .where('id', 'in', (eb) =>
        eb.selectFrom('notifications').select('id').where('created_at', '<', before).orderBy('created_at').orderBy('id').limit(limit),
      )
      .executeTakeFirst();
    return Number(r.numDeletedRows);
  }
}
