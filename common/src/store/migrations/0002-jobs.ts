import { sql, type Kysely } from 'kysely';
import type { DialectHelpers } from '../dialect.js';

export async function up(db: Kysely<any>, d: DialectHelpers): Promise<void> {
  // The schedule: the next due slot, and a token that tells a build's result
  // from a stale one (it changes whenever a build is (re)started).
  await db.schema.alterTable('workflows').addColumn('next_due_at', d.bigintType).execute();
  await db.schema.alterTable('workflows').addColumn('build_token', 'integer', (c) => c.notNull().defaultTo(0)).execute();
  await db.schema.alterTable('workflows').addColumn('build_requested_at', d.bigintType).execute();
  await db.schema.createIndex('workflows_due_idx').on('workflows').columns(['next_due_at']).execute();
  await db.schema.createIndex('workflows_build_idx').on('workflows').columns(['build_status']).execute();

  await db.schema
    .createTable('jobs')
    .addColumn('id', d.uuidType, (c) => c.primaryKey())
    .addColumn('workflow_id', d.uuidType, (c) => c.notNull().references('workflows.id').onDelete('cascade'))
    .addColumn('user_id', d.uuidType, (c) => c.notNull())
    .addColumn('generation', 'integer', (c) => c.notNull())
    .addColumn('trigger', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    // AUTOMATIC: the due slot; MANUAL: the request time. Unique per workflow for AUTOMATIC.
    .addColumn('slot_at', d.bigintType, (c) => c.notNull())
    .addColumn('scheduled_at', d.bigintType, (c) => c.notNull())
    .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('queued_at', d.bigintType)
    .addColumn('runner_id', 'text')
    .addColumn('lease_expires_at', d.bigintType)
    // when the scheduler last asked runners to stop this job (re-sent until it ends)
    .addColumn('stop_requested_at', d.bigintType)
    .addColumn('container_id', 'text')
    .addColumn('started_at', d.bigintType)
    .addColumn('completed_at', d.bigintType)
    .addColumn('status_reason_code', 'text')
    .addColumn('status_reason_message', 'text')
    .addColumn('created_at', d.bigintType, (c) => c.notNull())
    .addColumn('updated_at', d.bigintType, (c) => c.notNull())
    .execute();
  // Exactly one automatic job per (workflow, due slot), enforced by the database.
  await db.schema
    .createIndex('jobs_automatic_slot_uq')
    .on('jobs')
    .columns(['workflow_id', 'slot_at'])
    .unique()
    .where(sql.ref('trigger'), '=', sql.lit('AUTOMATIC'))
    .execute();
  // Runs of one workflow never overlap: at most one QUEUED or RUNNING job per workflow.
  await db.schema
    .createIndex('jobs_one_active_uq')
    .on('jobs')
    .column('workflow_id')
    .unique()
    .where(sql.ref('status'), 'in', [sql.lit('QUEUED'), sql.lit('RUNNING')])
    .execute();
  await db.schema.createIndex('jobs_workflow_list_idx').on('jobs').columns(['workflow_id', 'scheduled_at desc', 'id desc']).execute();
  await db.schema.createIndex('jobs_status_idx').on('jobs').columns(['status', 'workflow_id']).execute();

  await db.schema
    .createTable('leases')
    .addColumn('name', 'text', (c) => c.primaryKey())
    .addColumn('holder', 'text', (c) => c.notNull())
    .addColumn('fencing_token', 'integer', (c) => c.notNull())
    .addColumn('expires_at', d.bigintType, (c) => c.notNull())
    .execute();
}
