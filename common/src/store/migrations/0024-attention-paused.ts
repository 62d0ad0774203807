import { sql, type Kysely } from 'kysely';
import type { DialectHelpers } from '../dialect.js';
// 0019's rule (a released migration: it never changes) ranks what is neither terminated nor paused.
import { ATTENTION_SQL as ACTIVE_ATTENTION_SQL } from './0019-workflow-attention.js';

/**
 * A paused workflow is its own attention state (domain/attention.ts): until
 * now the list's `attention` (migration 0019) ranked it by its last runs, so
 * "paused" could only be picked out of the pages a client had loaded. The
 * ranks, as of this migration:
 *
 *   0 down        as in 0019 (the failure limit's termination included)
 *   1 degraded    as in 0019
 *   2 building    as in 0019
 *   3 healthy     as in 0019
 *   4 paused      `paused_at` set, not terminated: it runs nothing on its own, whatever its last runs said
 *   5 terminated  by its owner
 *
 * A generated column's expression cannot be changed in place on either
 * engine: the column and its index are made again (PostgreSQL computes the
 * stored values as it adds it; SQLite's is virtual, computed on read).
 */
export const ATTENTION_SQL = `case
  when terminated_at is not null and consecutive_job_failures_count >= max_consecutive_job_failures_allowed then 0
  when terminated_at is not null then 5
  when paused_at is not null then 4
  else (${ACTIVE_ATTENTION_SQL}) end`;

export async function up(db: Kysely<any>, d: DialectHelpers): Promise<void> {
  // SQLite drops no indexed column; PostgreSQL would drop the index with it.
  await sql`drop index workflows_attention_idx`.execute(db);
  await sql`alter table workflows drop column attention`.execute(db);
  const storage = sql.raw(d.name === 'postgres' ? 'stored' : 'virtual');
  await sql`alter table workflows add column attention integer generated always as (${sql.raw(ATTENTION_SQL)}) ${storage}`.execute(db);
  await sql`create index workflows_attention_idx on workflows (user_id, attention, created_at desc, id desc)`.execute(db);
}
