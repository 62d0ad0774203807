import { sql, type Kysely } from 'kysely';
import type { DialectHelpers } from '../dialect.js';

/**
 * Issue 26: honest builds, an alert policy apart from termination, incidents
 * (docs/adr/0016-incidents.md).
 *
 *  - `workflows.build_error_code` / `build_error_message`: why the current
 *    generation's build failed (null unless it did);
 *  - `workflows.alert_after_failures` (N) and `recover_after_successes` (M):
 *    the workflow goes down after N consecutive failed runs and comes up
 *    again after M consecutive completed ones (both default 1, as before);
 *  - `workflows.alert_down`: 1 while the workflow is down by that policy. Rows
 *    from before are down when their latest finished run (CANCELED ones passed
 *    over) failed, the reading the notifier used until now;
 *  - `incidents`: one row a down period, at most one open a workflow;
 *  - `workflow_rollups`: per workflow and UTC hour, its finished runs, failures
 *    and a histogram of response times, kept as results arrive, so reliability
 *    reports survive the retention of raw jobs.
 */
export async function up(db: Kysely<any>, d: DialectHelpers): Promise<void> {
  await db.schema.alterTable('workflows').addColumn('build_error_code', 'text').execute();
  await db.schema.alterTable('workflows').addColumn('build_error_message', 'text').execute();
  await db.schema.alterTable('workflows').addColumn('alert_after_failures', 'integer', (c) => c.notNull().defaultTo(1)).execute();
  await db.schema.alterTable('workflows').addColumn('recover_after_successes', 'integer', (c) => c.notNull().defaultTo(1)).execute();
  await db.schema.alterTable('workflows').addColumn('alert_down', 'integer', (c) => c.notNull().defaultTo(0)).execute();
  await sql`update workflows set alert_down = 1 where (
      select j.status from jobs j where j.workflow_id = workflows.id and j.status in ('COMPLETED', 'FAILED')
      order by j.scheduled_at desc, j.id desc limit 1) = 'FAILED'`.execute(db);

  await db.schema
    .createTable('incidents')
    .addColumn('id', d.uuidType, (c) => c.primaryKey())
    .addColumn('user_id', d.uuidType, (c) => c.notNull().references('users.id').onDelete('cascade'))
    .addColumn('workflow_id', d.uuidType, (c) => c.notNull().references('workflows.id').onDelete('cascade'))
    // The failed job that opened it: a job ends once, so it opens at most one incident.
    .addColumn('opened_by_job_id', d.uuidType, (c) => c.notNull().unique())
    .addColumn('started_at', d.bigintType, (c) => c.notNull())
    .addColumn('opened_at', d.bigintType, (c) => c.notNull())
    .addColumn('closed_at', d.bigintType)
    .addColumn('resolution', 'text')
    .addColumn('first_failure_job_id', d.uuidType, (c) => c.notNull())
    .addColumn('first_failure_code', 'text')
    .addColumn('first_failure_message', 'text')
    .addColumn('failed_runs', 'integer', (c) => c.notNull())
    .addColumn('acknowledged_by', 'text')
    .addColumn('acknowledged_at', d.bigintType)
    .addColumn('snoozed_until', d.bigintType)
    .addColumn('updated_at', d.bigintType, (c) => c.notNull())
    .execute();
  await db.schema.createIndex('incidents_user_idx').on('incidents').columns(['user_id', 'started_at desc', 'id desc']).execute();
  await db.schema.createIndex('incidents_workflow_idx').on('incidents').columns(['workflow_id', 'started_at desc', 'id desc']).execute();
  await db.schema.createIndex('incidents_open_idx').on('incidents').column('workflow_id').unique().where(sql.ref('closed_at'), 'is', null).execute();

  await db.schema
    .createTable('workflow_rollups')
    .addColumn('workflow_id', d.uuidType, (c) => c.notNull().references('workflows.id').onDelete('cascade'))
    .addColumn('hour_at', d.bigintType, (c) => c.notNull())
    .addColumn('user_id', d.uuidType, (c) => c.notNull())
    .addColumn('runs', 'integer', (c) => c.notNull())
    .addColumn('failures', 'integer', (c) => c.notNull())
    .addColumn('histogram', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('workflow_rollups_pk', ['workflow_id', 'hour_at'])
    .execute();
  await db.schema.createIndex('workflow_rollups_user_idx').on('workflow_rollups').columns(['user_id', 'hour_at']).execute();
}
