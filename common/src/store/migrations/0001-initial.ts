import type { Kysely } from 'kysely';
import type { DialectHelpers } from '../dialect.js';

export async function up(db: Kysely<any>, d: DialectHelpers): Promise<void> {
  await db.schema
    .createTable('users')
    .addColumn('id', d.uuidType, (c) => c.primaryKey())
    .addColumn('email', 'text', (c) => c.notNull().unique())
    .addColumn('password_hash', 'text', (c) => c.notNull())
    .addColumn('notification_preference', 'text', (c) => c.notNull().defaultTo('ALL'))
    .addColumn('created_at', d.bigintType, (c) => c.notNull())
    .addColumn('updated_at', d.bigintType, (c) => c.notNull())
    .execute();

  await db.schema
    .createTable('sessions')
    .addColumn('id', d.uuidType, (c) => c.primaryKey())
    .addColumn('user_id', d.uuidType, (c) => c.notNull().references('users.id').onDelete('cascade'))
    .addColumn('created_at', d.bigintType, (c) => c.notNull())
    .addColumn('expires_at', d.bigintType, (c) => c.notNull())
    .addColumn('revoked_at', d.bigintType)
    .execute();
  await db.schema.createIndex('sessions_user_idx').on('sessions').column('user_id').execute();
  await db.schema.createIndex('sessions_expires_idx').on('sessions').column('expires_at').execute();

  await db.schema
    .createTable('workflows')
    .addColumn('id', d.uuidType, (c) => c.primaryKey())
    .addColumn('user_id', d.uuidType, (c) => c.notNull().references('users.id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('name_folded', 'text', (c) => c.notNull())
    .addColumn('payload', 'text', (c) => c.notNull())
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('build_status', 'text', (c) => c.notNull())
    .addColumn('interval_minutes', 'integer', (c) => c.notNull())
    .addColumn('consecutive_job_failures_count', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('max_consecutive_job_failures_allowed', 'integer', (c) => c.notNull())
    .addColumn('log_retention', 'integer', (c) => c.notNull())
    .addColumn('generation', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('created_at', d.bigintType, (c) => c.notNull())
    .addColumn('updated_at', d.bigintType, (c) => c.notNull())
    .addColumn('terminated_at', d.bigintType)
    .addColumn('build_completed_at', d.bigintType)
    .execute();
  // The list endpoint pages newest first within one user's active or terminated set.
  await db.schema
    .createIndex('workflows_user_created_idx')
    .on('workflows')
    .columns(['user_id', 'created_at desc', 'id desc'])
    .execute();

  await db.schema
    .createTable('idempotency_keys')
    .addColumn('user_id', d.uuidType, (c) => c.notNull().references('users.id').onDelete('cascade'))
    .addColumn('key', 'text', (c) => c.notNull())
    .addColumn('fingerprint', 'text', (c) => c.notNull())
    .addColumn('response_status', 'integer')
    .addColumn('response_body', 'text')
    .addColumn('created_at', d.bigintType, (c) => c.notNull())
    .addColumn('expires_at', d.bigintType, (c) => c.notNull())
    .addPrimaryKeyConstraint('idempotency_keys_pk', ['user_id', 'key'])
    .execute();
  await db.schema.createIndex('idempotency_keys_expires_idx').on('idempotency_keys').column('expires_at').execute();

}
