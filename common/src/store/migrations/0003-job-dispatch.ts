import type { Kysely } from 'kysely';
import type { DialectHelpers } from '../dialect.js';

/**
 * When the job's current attempt was confirmed on the bus. A QUEUED job
 * without it after a short grace was never handed out (the leader died
 * between the state change and the publish) and is handed out again.
 */
export async function up(db: Kysely<any>, d: DialectHelpers): Promise<void> {
  await db.schema.alterTable('jobs').addColumn('dispatched_at', d.bigintType).execute();
}
