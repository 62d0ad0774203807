import type { Kysely } from 'kysely';

/**
 * A workflow's run policy (issue 25, ADR 0020, domain/run-policy.ts): what
 * happens to a slot that comes while the previous run still goes
 * (`overlap_policy`), to the slots missed while orloj was down
 * (`catch_up_policy`), and whether a run follows the build at once
 * (`first_run`). Each column's default is the behaviour before it, so every
 * existing workflow runs as it did.
 *
 * The list's version triggers need no change: only a PUT sets these, and a
 * PUT always moves `updated_at`, a column they watch.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .alterTable('workflows')
    .addColumn('overlap_policy', 'text', (c) => c.notNull().defaultTo('run_after'))
    .execute();
  await db.schema
    .alterTable('workflows')
    .addColumn('catch_up_policy', 'text', (c) => c.notNull().defaultTo('latest'))
    .execute();
  await db.schema
    .alterTable('workflows')
    .addColumn('first_run', 'text', (c) => c.notNull().defaultTo('at_first_slot'))
    .execute();
}
