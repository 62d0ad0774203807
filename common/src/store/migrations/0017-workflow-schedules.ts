import { sql, type Kysely } from 'kysely';
import type { DialectHelpers } from '../dialect.js';

/**
 * Schedules people use (issue 25, ADR 0015): a workflow may run on a cron
 * expression read in an IANA time zone instead of every `interval_minutes`,
 * with a per-workflow jitter, and may be paused (epoch ms, ADR 0002) apart
 * from being terminated.
 *
 * The list shows the four columns, so the list-version triggers of 0007 are
 * made again with them added to the columns they watch.
 */
// The list's columns (0007's, and this migration's four) spelled out: a released migration must not change when the repository does.
const LISTED_COLUMNS = [
  'name',
  'payload',
  'kind',
  'build_status',
  'interval_minutes',
  'consecutive_job_failures_count',
  'max_consecutive_job_failures_allowed',
  'log_retention',
  'created_at',
  'updated_at',
  'terminated_at',
  'cron',
  'timezone',
  'jitter_seconds',
  'paused_at',
] as const;

export async function up(db: Kysely<any>, d: DialectHelpers): Promise<void> {
  await db.schema.alterTable('workflows').addColumn('cron', 'text').execute();
  await db.schema
    .alterTable('workflows')
    .addColumn('timezone', 'text', (c) => c.notNull().defaultTo('UTC'))
    .execute();
  await db.schema
    .alterTable('workflows')
    .addColumn('jitter_seconds', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
  await db.schema.alterTable('workflows').addColumn('paused_at', d.bigintType).execute();

  const columns = sql.raw(LISTED_COLUMNS.join(', '));
  if (d.name === 'postgres') {
    const changed = sql.raw(LISTED_COLUMNS.map((c) => `old.${c} is distinct from new.${c}`).join(' or '));
    await sql`drop trigger workflows_list_version_columns on workflows`.execute(db);
    await sql`
      create trigger workflows_list_version_columns after update of ${columns} on workflows
      for each row when (${changed}) execute function orloj_bump_workflow_list_version()`.execute(db);
    return;
  }
  const changedSqlite = sql.raw(LISTED_COLUMNS.map((c) => `old.${c} is not new.${c}`).join(' or '));
  await sql`drop trigger workflows_list_version_update`.execute(db);
  await sql`
    create trigger workflows_list_version_update after update of ${columns} on workflows
    when ${changedSqlite} begin
      insert into workflow_list_versions (user_id, version) values (new.user_id, 1)
      on conflict (user_id) do update set version = version + 1;
    end`.execute(db);
}
