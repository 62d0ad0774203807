import type { Kysely } from 'kysely';
import type { DialectHelpers } from '../dialect.js';

/**
 * Issue 26, "honest runs".
 *
 * `job_attempts`: the attempts of a job that ended without ending the job (a
 * SYSTEM failure retried on another runner): which runner ran it, when, and
 * why it was given up. The job's row keeps its current (or last) attempt as
 * before, so the common case — one attempt — writes nothing here; a row is
 * written only on the retry path, in the transaction that moves the job on.
 * Removed with its job.
 *
 * `orloj_uptime`: the periods the scheduler leader ran, one row per period
 * (`started_at`, `last_seen_at`). The leader moves `last_seen_at` on each
 * tick; a tick that finds the newest period older than the gap tolerance
 * starts a new one, so the space between two rows is a time orloj was down.
 * One short row per restart; ticks update one row in place.
 */
export async function up(db: Kysely<any>, d: DialectHelpers): Promise<void> {
  await db.schema
    .createTable('job_attempts')
    .addColumn('job_id', d.uuidType, (c) => c.notNull().references('jobs.id').onDelete('cascade'))
    .addColumn('attempt', 'integer', (c) => c.notNull())
    .addColumn('runner_id', 'text')
    .addColumn('started_at', d.bigintType)
    .addColumn('ended_at', d.bigintType, (c) => c.notNull())
    .addColumn('end_code', 'text', (c) => c.notNull())
    .addColumn('end_message', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('job_attempts_pk', ['job_id', 'attempt'])
    .execute();

  await db.schema
    .createTable('orloj_uptime')
    .addColumn('started_at', d.bigintType, (c) => c.primaryKey())
    .addColumn('last_seen_at', d.bigintType, (c) => c.notNull())
    .execute();
}
