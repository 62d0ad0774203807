import type { Kysely } from 'kysely';
import type { DialectHelpers } from '../dialect.js';

/**
 * What a HEARTBEAT job's request did (common/src/domain/check.ts): its
 * response's status code, its response time and, when it failed, why. All
 * null for CONTAINER jobs, for jobs that never ran a request, and for jobs
 * finished before this migration.
 */
export async function up(db: Kysely<any>, _d: DialectHelpers): Promise<void> {
  await db.schema.alterTable('jobs').addColumn('check_status_code', 'integer').execute();
  await db.schema.alterTable('jobs').addColumn('check_response_ms', 'integer').execute();
  await db.schema.alterTable('jobs').addColumn('check_failure', 'text').execute();
}
