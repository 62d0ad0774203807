import { sql, type Kysely } from 'kysely';
import type { DialectHelpers } from '../dialect.js';

/** The histogram's buckets as of this migration (ROLLUP_BOUNDS_MS's 26 bounds, and the rest). */
const BUCKETS = 27;

/**
 * Issue 26, the rollup write within 5 % of a run's CPU: a `workflow_rollups`
 * row's histogram moves from JSON text to one integer column a bucket
 * (`bucket_0` … `bucket_26`), so that a run lands in its hour's row with one
 * UPDATE that adds to its bucket in SQL (repos/rollups.repo.ts), with no read
 * of the row and no JSON parse and stringify. Rows from before are converted
 * in place by the database; a shorter JSON array fills the rest with 0.
 */
export async function up(db: Kysely<any>, d: DialectHelpers): Promise<void> {
  const buckets = Array.from({ length: BUCKETS }, (_, i) => i);
  for (const i of buckets) await db.schema.alterTable('workflow_rollups').addColumn(`bucket_${i}`, 'integer', (c) => c.notNull().defaultTo(0)).execute();
  const element = (i: number) =>
    d.name === 'postgres' ? sql`coalesce((histogram::json ->> ${sql.lit(i)})::integer, 0)` : sql`coalesce(json_extract(histogram, ${sql.lit(`$[${i}]`)}), 0)`;
  await db
    .updateTable('workflow_rollups')
    .set(Object.fromEntries(buckets.map((i) => [`bucket_${i}`, element(i)])))
    .execute();
  await db.schema.alterTable('workflow_rollups').dropColumn('histogram').execute();
}
