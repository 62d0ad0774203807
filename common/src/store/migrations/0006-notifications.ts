import { sql, type Kysely } from 'kysely';
import type { DialectHelpers } from '../dialect.js';

/**
 * Domain events and what the notifier makes of them (docs/notifications.md):
 *  - domain_events: the outbox. A state change writes its event here in its
 *    own transaction; the relay publishes due rows and the notifier deletes a
 *    row once applied. `id` is the event's deterministic identity.
 *  - applied_events: the notifier's dedupe record, written in the transaction
 *    that applies an event, so an event counts once however often it arrives.
 *  - notifications: one per (user, event identity), under a unique key.
 *  - workflow_stats: analytics counters per workflow; no foreign key, so the
 *    history outlives a deleted workflow.
 */
export async function up(db: Kysely<any>, d: DialectHelpers): Promise<void> {
  await db.schema
    .createTable('domain_events')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('user_id', d.uuidType, (c) => c.notNull())
    .addColumn('workflow_id', d.uuidType, (c) => c.notNull())
    .addColumn('data', 'text', (c) => c.notNull())
    .addColumn('occurred_at', d.bigintType, (c) => c.notNull())
    // when the relay should (re)publish it: now at insert, a claim's expiry while
    // one relay publishes it, the envelope's expiry once published
    .addColumn('next_attempt_at', d.bigintType, (c) => c.notNull())
    .addColumn('published_at', d.bigintType)
    .execute();
  await db.schema.createIndex('domain_events_due_idx').on('domain_events').columns(['next_attempt_at', 'id']).execute();

  await db.schema
    .createTable('applied_events')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('applied_at', d.bigintType, (c) => c.notNull())
    .execute();
  await db.schema.createIndex('applied_events_applied_idx').on('applied_events').column('applied_at').execute();

  await db.schema
    .createTable('notifications')
    .addColumn('id', d.uuidType, (c) => c.primaryKey())
    .addColumn('user_id', d.uuidType, (c) => c.notNull().references('users.id').onDelete('cascade'))
    // the notifications of a workflow go with it
    .addColumn('workflow_id', d.uuidType, (c) => c.notNull().references('workflows.id').onDelete('cascade'))
    // user + event identity: a replayed event inserts nothing
    .addColumn('dedupe_key', 'text', (c) => c.notNull().unique())
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('payload', 'text', (c) => c.notNull())
    .addColumn('read_at', d.bigintType)
    .addColumn('created_at', d.bigintType, (c) => c.notNull())
    .addColumn('updated_at', d.bigintType, (c) => c.notNull())
    .execute();
  await db.schema.createIndex('notifications_user_idx').on('notifications').columns(['user_id', 'created_at desc', 'id desc']).execute();
  await db.schema.createIndex('notifications_workflow_idx').on('notifications').column('workflow_id').execute();

  await db.schema
    .createTable('workflow_stats')
    .addColumn('workflow_id', d.uuidType, (c) => c.primaryKey())
    .addColumn('user_id', d.uuidType, (c) => c.notNull())
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('total_jobs', d.bigintType, (c) => c.notNull().defaultTo(0))
    .addColumn('total_duration_s', d.bigintType, (c) => c.notNull().defaultTo(0))
    .addColumn('deleted_at', d.bigintType)
    .execute();
  await db.schema.createIndex('workflow_stats_user_idx').on('workflow_stats').column('user_id').execute();
  // total_joblogs is summed from job_log_counts per user
  await db.schema.createIndex('job_log_counts_user_idx').on('job_log_counts').column('user_id').execute();

  // Workflows and terminal jobs from before this migration never had events: count them once here.
  await sql`
    insert into workflow_stats (workflow_id, user_id, kind, total_jobs, total_duration_s)
    select w.id, w.user_id, w.kind,
      (select count(*) from jobs j where j.workflow_id = w.id and j.status in ('COMPLETED', 'FAILED', 'CANCELED')),
      (select coalesce(sum(case when j.completed_at > j.started_at then (j.completed_at - j.started_at) / 1000 else 0 end), 0)
         from jobs j where j.workflow_id = w.id and j.status in ('COMPLETED', 'FAILED', 'CANCELED') and j.started_at is not null)
    from workflows w`.execute(db);
}
