import { sql, type Kysely } from 'kysely';
import type { DialectHelpers } from '../dialect.js';

/**
 * Each user's PENDING jobs in the fair hand-out's order (manual runs first,
 * then the oldest), so that a pass of the hand-out finds the users with
 * pending work by skipping from one user to the next along this index and
 * reads each one's first few jobs by a seek, instead of ranking every
 * PENDING job (JobQueueRepo.dispatchable; docs/adr/0014, addendum). A burst of
 * due slots larger than the runners' room left ~97,000 jobs PENDING, and a
 * pass that read all of them never drained them (docs/benchmarks.md, issue 25).
 */
export async function up(db: Kysely<any>, _d: DialectHelpers): Promise<void> {
  await db.schema
    .createIndex('jobs_pending_user_idx')
    .on('jobs')
    .columns(['user_id', 'trigger desc', 'scheduled_at', 'id'])
    .where(sql.ref('status'), '=', sql.lit('PENDING'))
    .execute();
}
