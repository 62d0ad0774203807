import { sql, type Kysely } from 'kysely';
import type { DialectHelpers } from '../dialect.js';

/**
 * The ids of QUEUED jobs (handed out, not started), for the hand-out's check
 * at every leader pass of which of the jobs it handed out are still waiting
 * (JobQueueRepo.queuedAmong): a seek per id in this index alone, which holds
 * only the jobs on their way to the runners. Through the primary key each id
 * also read its job's row for the status: with a few thousand jobs waiting
 * (a saturated pass) that read was the leader's dearest statement, 7 ms a
 * pass (docs/benchmarks.md, issue 25).
 */
export async function up(db: Kysely<any>, _d: DialectHelpers): Promise<void> {
  await db.schema
    .createIndex('jobs_queued_idx')
    .on('jobs')
    .column('id')
    .where(sql.ref('status'), '=', sql.lit('QUEUED'))
    .execute();
}
