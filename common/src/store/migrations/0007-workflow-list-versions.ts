import { sql, type Kysely } from 'kysely';
import type { DialectHelpers } from '../dialect.js';

/**
 * A version per user that moves whenever anything the workflow list shows or
 * filters on changes, so the api can keep rendered pages and check them with
 * one key lookup (docs/api.md, "Caching of workflow lists").
 *
 * Triggers keep it, in the transaction of the change, so no writer (api,
 * scheduler, any replica) can forget it: a workflow inserted or deleted, or an
 * update that really changes a listed column. The scheduler's own bookkeeping
 * (next_due_at, build_token, …) leaves it alone. No foreign key: a version row
 * outliving its user is harmless, and a cascade from users would have the
 * trigger insert a row for the user being deleted.
 */
// The list's columns (WorkflowsRepo's SUMMARY_COLUMNS) spelled out, not imported: a
// released migration must not change when the repository does.
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
] as const;

export async function up(db: Kysely<any>, d: DialectHelpers): Promise<void> {
  await db.schema
    .createTable('workflow_list_versions')
    .addColumn('user_id', d.uuidType, (c) => c.primaryKey())
    .addColumn('version', d.bigintType, (c) => c.notNull())
    .execute();

  const columns = sql.raw(LISTED_COLUMNS.join(', '));
  const changed = sql.raw(LISTED_COLUMNS.map((c) => `old.${c} is distinct from new.${c}`).join(' or '));
  if (d.name === 'postgres') {
    await sql`
      create function orloj_bump_workflow_list_version() returns trigger language plpgsql as $$
      begin
        insert into workflow_list_versions as v (user_id, version)
          values (case when tg_op = 'DELETE' then old.user_id else new.user_id end, 1)
          on conflict (user_id) do update set version = v.version + 1;
        return null;
      end $$`.execute(db);
    await sql`
      create trigger workflows_list_version_rows after insert or delete on workflows
      for each row execute function orloj_bump_workflow_list_version()`.execute(db);
    await sql`
      create trigger workflows_list_version_columns after update of ${columns} on workflows
      for each row when (${changed}) execute function orloj_bump_workflow_list_version()`.execute(db);
    return;
  }
  // SQLite spells "is distinct from" as "is not".
  const changedSqlite = sql.raw(LISTED_COLUMNS.map((c) => `old.${c} is not new.${c}`).join(' or '));
  const bump = (row: 'new' | 'old') =>
    sql.raw(`insert into workflow_list_versions (user_id, version) values (${row}.user_id, 1)
      on conflict (user_id) do update set version = version + 1;`);
  await sql`create trigger workflows_list_version_insert after insert on workflows begin ${bump('new')} end`.execute(db);
  await sql`create trigger workflows_list_version_delete after delete on workflows begin ${bump('old')} end`.execute(db);
  await sql`
    create trigger workflows_list_version_update after update of ${columns} on workflows
    when ${changedSqlite} begin ${bump('new')} end`.execute(db);
}
