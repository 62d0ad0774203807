import { sql, type Kysely } from 'kysely';
import type { DialectHelpers } from '../dialect.js';

/**
 * The skip index of log search (docs/adr/0007): per job attempt, one row per
 * block of BLOCK_LINES sequence numbers, holding a bloom filter of the folded
 * trigrams of exactly the stored lines `seq_from … seq_to`. Search skips a
 * block whose filter lacks one of the needle's trigrams and scans every other
 * line as before. Jobs logged before this migration have no rows and are
 * scanned as before (no backfill).
 */
export async function up(db: Kysely<any>, d: DialectHelpers): Promise<void> {
  await db.schema
    .createTable('job_log_blocks')
    .addColumn('job_id', d.uuidType, (c) => c.notNull().references('jobs.id').onDelete('cascade'))
    .addColumn('attempt', 'integer', (c) => c.notNull())
    .addColumn('block_num', 'integer', (c) => c.notNull())
    .addColumn('seq_from', 'integer', (c) => c.notNull())
    .addColumn('seq_to', 'integer', (c) => c.notNull())
    .addColumn('bloom', d.name === 'postgres' ? 'bytea' : 'blob', (c) => c.notNull())
    .addPrimaryKeyConstraint('job_log_blocks_pk', ['job_id', 'attempt', 'block_num'])
    .execute();
  // Kept in the row, uncompressed: search reads a few bytes of every filter of
  // an attempt, and get_byte() would decompress or fetch a TOASTed value whole
  // for every probe.
  if (d.name === 'postgres') await sql`alter table job_log_blocks alter column bloom set storage plain`.execute(db);
}
