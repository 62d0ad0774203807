import { sql, type Kysely } from 'kysely';

/**
 * Indexes the retention sweep walks (docs/operations.md, "Retention"): ended
 * jobs by when they ended, notifications by when they were created. Without
 * them each batch of the sweep would scan the whole table.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createIndex('jobs_completed_idx')
    .on('jobs')
    .columns(['completed_at', 'id'])
    .where(sql.ref('completed_at'), 'is not', null)
    .execute();
  await db.schema.createIndex('notifications_created_idx').on('notifications').columns(['created_at', 'id']).execute();
}
