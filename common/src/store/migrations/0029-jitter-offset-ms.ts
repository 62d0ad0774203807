import { sql, type Kysely } from 'kysely';
import type { DialectHelpers } from '../dialect.js';

/**
 * A workflow's jitter offset to the millisecond, stored (issue 25): each
 * workflow's slots move later by `jitter_offset_ms`, fixed when its
 * `jitter_seconds` is chosen (domain/jitter.ts). Before, the offset was a
 * whole number of seconds derived from the id at every pass, so 100,000
 * workflows on one cron time met in 60 bursts a minute; to the millisecond
 * they spread as interval workflows do.
 *
 * The offset is stored, not derived, so that the workflows jittered before
 * keep their slots exactly: moving a slot later by under a second at the
 * upgrade would run the slot just before it a second time (the pass at the
 * old next_due_at finds the moved slot of the previous period not yet run).
 * This migration writes those workflows' whole-second offsets as they were.
 */
export async function up(db: Kysely<any>, d: DialectHelpers): Promise<void> {
  await db.schema
    .alterTable('workflows')
    .addColumn('jitter_offset_ms', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
  const jittered: { id: string; jitter_seconds: number }[] = await db
    .selectFrom('workflows')
    .select(['id', 'jitter_seconds'])
    .where('jitter_seconds', '>', 0)
    .execute();
  for (let i = 0; i < jittered.length; i += BATCH) {
    const rows = jittered.slice(i, i + BATCH).map((w) => [w.id, wholeSecondsOffsetMs(w.id, w.jitter_seconds)]);
    const batch = d.rowsOf('batch', { id: 'id', jitter_offset_ms: 'int' }, rows);
    await sql`update workflows set jitter_offset_ms = batch.jitter_offset_ms from ${batch} where workflows.id = batch.id`.execute(db);
  }
}

const BATCH = 1_000;

/** The offset as every build before this migration derived it (frozen here: a released migration does not change). */
function wholeSecondsOffsetMs(workflowId: string, jitterSeconds: number): number {
  // FNV-1a, 32 bits
  let h = 0x811c9dc5;
  for (let i = 0; i < workflowId.length; i++) {
    h ^= workflowId.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return (h % (jitterSeconds + 1)) * 1000;
}
