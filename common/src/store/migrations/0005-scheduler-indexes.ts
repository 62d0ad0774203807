import { sql, type Kysely } from 'kysely';

/**
 * Indexes that give the leader's queries one obvious plan, whatever the
 * planner statistics say (SQLite samples them; a sample of a column with
 * three values can make "build_status = 'COMPLETED'" look selective). The
 * index on build_status alone drew the due-slot scan onto it: every built
 * workflow read and sorted per pass (40 ms at 100,000 workflows) instead of a
 * walk along next_due_at. Builds waiting or running and pending jobs are few,
 * so partial indexes cover exactly them.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.dropIndex('workflows_build_idx').execute();
  await db.schema
    .createIndex('workflows_build_queued_idx')
    .on('workflows')
    .column('updated_at')
    .where(sql.ref('build_status'), '=', sql.lit('QUEUED'))
    .execute();
  await db.schema
    .createIndex('workflows_build_started_idx')
    .on('workflows')
    .column('build_requested_at')
    .where(sql.ref('build_status'), '=', sql.lit('STARTED'))
    .execute();
  await db.schema
    .createIndex('jobs_pending_idx')
    .on('jobs')
    .columns(['scheduled_at', 'id'])
    .where(sql.ref('status'), '=', sql.lit('PENDING'))
    .execute();
}
