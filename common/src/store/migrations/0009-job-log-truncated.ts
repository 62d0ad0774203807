import type { Kysely } from 'kysely';
import type { DialectHelpers } from '../dialect.js';

/**
 * Whether a job's log reached the operator's per-job cap (JOB_LOG_MAX_LINES /
 * JOB_LOG_MAX_MB): the runner then stored one marker line and dropped the rest,
 * still counting it (docs/security.md). Existing jobs were never capped.
 */
// 0/1, like workflows.log_retention, in both engines.
export async function up(db: Kysely<any>, _d: DialectHelpers): Promise<void> {
  await db.schema
    .alterTable('jobs')
    .addColumn('log_truncated', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
}
