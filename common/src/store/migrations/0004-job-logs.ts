import type { Kysely } from 'kysely';
import type { DialectHelpers } from '../dialect.js';

/**
 * Captured log lines of CONTAINER jobs whose workflow retains logs, and the
 * line count of every job attempt (retained or not) for analytics.
 * One sequence per job attempt, shared by stdout and stderr.
 */
export async function up(db: Kysely<any>, d: DialectHelpers): Promise<void> {
  await db.schema
    .createTable('job_logs')
    .addColumn('job_id', d.uuidType, (c) => c.notNull().references('jobs.id').onDelete('cascade'))
    .addColumn('attempt', 'integer', (c) => c.notNull())
    .addColumn('sequence_num', 'integer', (c) => c.notNull())
    .addColumn('stream', 'text', (c) => c.notNull())
    .addColumn('message', 'text', (c) => c.notNull())
    .addColumn('timestamp', d.bigintType, (c) => c.notNull())
    // redelivered batches write nothing twice: the key is the event id's parts
    .addPrimaryKeyConstraint('job_logs_pk', ['job_id', 'attempt', 'sequence_num'])
    .execute();

  await db.schema
    .createTable('job_log_counts')
    .addColumn('job_id', d.uuidType, (c) => c.notNull())
    .addColumn('attempt', 'integer', (c) => c.notNull())
    .addColumn('workflow_id', d.uuidType, (c) => c.notNull())
    .addColumn('user_id', d.uuidType, (c) => c.notNull())
    // lines seen = highest sequence_num + 1: idempotent under redelivery
    .addColumn('lines', d.bigintType, (c) => c.notNull().defaultTo(0))
    .addPrimaryKeyConstraint('job_log_counts_pk', ['job_id', 'attempt'])
    .execute();
  await db.schema.createIndex('job_log_counts_workflow_idx').on('job_log_counts').column('workflow_id').execute();
}
