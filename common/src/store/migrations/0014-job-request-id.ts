import type { Kysely } from 'kysely';
import type { DialectHelpers } from '../dialect.js';

/**
 * The api request that created a MANUAL job (its X-Request-Id), so the
 * scheduler's hand-out and the runner's lines for the job carry the same
 * `reqId` as the api's access log line (docs/operations.md, "Request logs").
 * Null for due jobs and for jobs created before this migration.
 */
export async function up(db: Kysely<any>, _d: DialectHelpers): Promise<void> {
  await db.schema.alterTable('jobs').addColumn('request_id', 'text').execute();
}
