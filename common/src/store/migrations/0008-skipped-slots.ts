import type { Kysely } from 'kysely';
import type { DialectHelpers } from '../dialect.js';

/**
 * Due slots a workflow did not run at their time (its previous job still ran,
 * the runners were behind, or orloj was down; only the most recent missed slot
 * runs): how many since the workflow was created, and when the last was
 * skipped. Shown to the owner in the single-workflow read (docs/api.md).
 * Scheduler bookkeeping, not a listed column: the list-version triggers of
 * 0007 leave it alone.
 */
export async function up(db: Kysely<any>, d: DialectHelpers): Promise<void> {
  await db.schema
    .alterTable('workflows')
    .addColumn('skipped_slots', d.bigintType, (c) => c.notNull().defaultTo(0))
    .execute();
  await db.schema.alterTable('workflows').addColumn('last_slot_skipped_at', d.bigintType).execute();
}
