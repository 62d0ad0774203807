import { sql, type Kysely } from 'kysely';
import type { DialectHelpers } from '../dialect.js';

/**
 * Issue 25: maintenance windows and snooze
 * (docs/adr/0019-maintenance-windows.md, domain/maintenance-window.ts).
 *
 * `maintenance_windows`: one row a window of a user, over one workflow
 * (`workflow_id`, going with it when it is deleted) or over those whose name
 * contains `workflow_query`; one-off (`starts_at`, `ends_at`) or recurring
 * (`cron`, `time_zone`, `duration_minutes`). `snooze` = 1 marks a workflow's
 * snooze, at most one a workflow (the partial unique index), so snoozing again
 * replaces it. The user index serves the windows of the owners of a batch of
 * workflows, read on each due pass and each failure.
 */
export async function up(db: Kysely<any>, d: DialectHelpers): Promise<void> {
  await db.schema
    .createTable('maintenance_windows')
    .addColumn('id', d.uuidType, (c) => c.primaryKey())
    .addColumn('user_id', d.uuidType, (c) => c.notNull().references('users.id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('mode', 'text', (c) => c.notNull())
    .addColumn('snooze', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('workflow_id', d.uuidType, (c) => c.references('workflows.id').onDelete('cascade'))
    .addColumn('workflow_query', 'text')
    .addColumn('starts_at', d.bigintType)
    .addColumn('ends_at', d.bigintType)
    .addColumn('cron', 'text')
    .addColumn('time_zone', 'text')
    .addColumn('duration_minutes', 'integer')
    .addColumn('created_at', d.bigintType, (c) => c.notNull())
    .addColumn('updated_at', d.bigintType, (c) => c.notNull())
    .execute();
  await db.schema.createIndex('maintenance_windows_user_idx').on('maintenance_windows').columns(['user_id', 'created_at desc', 'id desc']).execute();
  await db.schema.createIndex('maintenance_windows_snooze_idx').on('maintenance_windows').column('workflow_id').unique().where(sql.ref('snooze'), '=', 1).execute();
}
