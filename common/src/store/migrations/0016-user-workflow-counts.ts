import { sql, type Kysely } from 'kysely';
import type { DialectHelpers } from '../dialect.js';

/**
 * Each user's number of workflows, kept beside the user (issue 32): the cap
 * check of `POST /workflows` read it by counting every workflow the user had,
 * so creating got slower as a user's workflows grew. From here on the
 * lifecycle's create and delete keep it in their transaction (lifecycle.ts);
 * rows from before are counted once here.
 */
export async function up(db: Kysely<any>, _d: DialectHelpers): Promise<void> {
  await db.schema
    .alterTable('users')
    .addColumn('workflow_count', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
  await sql`update users set workflow_count = (select count(*) from workflows w where w.user_id = users.id)`.execute(db);
}
