import { sql, type Kysely } from 'kysely';
import type { DialectHelpers } from '../dialect.js';

/**
 * Issue 26, "attention at any size": `workflows.attention`, how much a
 * workflow needs its owner's eyes, as a small rank the list sorts, filters and
 * counts by over all of a user's workflows (domain/attention.ts):
 *
 *   0 down       its build failed or was canceled, it is down by its alert policy (`alert_down`),
 *                or the failure limit terminated it (until its owner acts on it)
 *   1 degraded   its latest run(s) failed but not (yet) enough to be down by the policy
 *   2 building   its build is queued or running
 *   3 healthy    everything else that is active (up, pending; late is a matter of time, read by `health`)
 *   4 terminated by its owner
 *
 * A generated column over the columns the lifecycle already keeps where
 * results are applied (`alert_down`, `consecutive_job_failures_count`,
 * `build_status`, `terminated_at`), so it cannot drift from them and costs no
 * extra write: stored in PostgreSQL, virtual (computed on read, indexed) in
 * SQLite, which cannot add a stored one to an existing table. The index
 * serves `sort=attention`, the `attention` filter and the counts.
 *
 * `alert_down` joins the columns whose change moves the user's list version
 * (migration 0007): a recovery after M > 1 completed runs changes nothing else
 * the list shows, and a kept page must not go on showing the workflow down.
 */
export const ATTENTION_SQL = `case
  when terminated_at is not null and consecutive_job_failures_count >= max_consecutive_job_failures_allowed then 0
  when terminated_at is not null then 4
  when build_status in ('FAILED', 'CANCELED') or alert_down = 1 then 0
  when consecutive_job_failures_count > 0 then 1
  when build_status in ('QUEUED', 'STARTED') then 2
  else 3 end`;

export async function up(db: Kysely<any>, d: DialectHelpers): Promise<void> {
  await db.schema
    .alterTable('workflows')
    .addColumn('attention', 'integer', (c) => {
      const generated = c.generatedAlwaysAs(sql.raw(ATTENTION_SQL));
      return d.name === 'postgres' ? generated.stored() : generated;
    })
    .execute();
  await db.schema.createIndex('workflows_attention_idx').on('workflows').columns(['user_id', 'attention', 'created_at desc', 'id desc']).execute();
  await bumpOnAlertDown(db, d);
}

/** The list version moves when `alert_down` changes (see the note above; the function and bump of migration 0007). */
async function bumpOnAlertDown(db: Kysely<any>, d: DialectHelpers): Promise<void> {
  if (d.name === 'postgres') {
    await sql`
      create trigger workflows_list_version_alert_down after update of alert_down on workflows
      for each row when (old.alert_down is distinct from new.alert_down) execute function orloj_bump_workflow_list_version()`.execute(db);
    return;
  }
  await sql`
    create trigger workflows_list_version_alert_down after update of alert_down on workflows
    when old.alert_down is not new.alert_down begin
      insert into workflow_list_versions (user_id, version) values (new.user_id, 1)
      on conflict (user_id) do update set version = version + 1;
    end`.execute(db);
}
