import { sql, type Kysely, type Selectable } from 'kysely';
import type { DialectHelpers } from '../dialect.js';
import type { Database, UsersTable } from '../schema.js';
import { slot, type ReadRunner } from '../compiled-read.js';

export interface User {
  id: string;
  email: string;
  passwordHash: string;
  notificationPreference: 'ALL' | 'NONE';
  createdAt: number;
  updatedAt: number;
}

function toUser(r: Selectable<UsersTable>): User {
  return {
    id: r.id,
    email: r.email,
    passwordHash: r.password_hash,
    notificationPreference: r.notification_preference,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  };
}

export class UsersRepo {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly dialect: DialectHelpers,
    private readonly runner: ReadRunner,
  ) {}

  /** Whether any account exists (the first one of an installation may always be created). */
  async any(): Promise<boolean> {
    return (await this.db.selectFrom('users').select('id').limit(1).executeTakeFirst()) !== undefined;
  }

  /**
   * Keeps other transactions from adding users until this one ends, so that
   * "no account exists yet" stays true until its insert (two concurrent first
   * registrations on a closed installation: one wins). SQLite's writer lock
   * already serializes write transactions; PostgreSQL needs a table lock that
   * conflicts with itself and with inserts.
   */
  async lockAgainstNewUsers(): Promise<void> {
    if (this.dialect.rowLocks) await sql`lock table users in share row exclusive mode`.execute(this.db);
  }

  /** Inserts the user; returns false when the email is taken. */
  async insert(user: User): Promise<boolean> {
    const result = await this.db
      .insertInto('users')
      .values({
        id: user.id,
        email: user.email,
        password_hash: user.passwordHash,
        notification_preference: user.notificationPreference,
        created_at: user.createdAt,
        updated_at: user.updatedAt,
      })
      .onConflict((oc) => oc.column('email').doNothing())
      .executeTakeFirst();
    return Number(result.numInsertedOrUpdatedRows ?? 0) === 1;
  }

  async findByEmail(email: string): Promise<User | undefined> {
    const row = await this.db.selectFrom('users').selectAll().where('email', '=', email).executeTakeFirst();
    return row && toUser(row);
  }

  async findById(id: string): Promise<User | undefined> {
    const row = await this.db.selectFrom('users').selectAll().where('id', '=', id).executeTakeFirst();
    return row && toUser(row);
  }

  /**
   * How many workflows the user has, terminated ones included: the count kept
   * beside the user (issue 32), so the cap check of each create reads one row
   * however many workflows the user already has.
   */
  async workflowCount(id: string): Promise<number> {
    // Compiled once, as the two below: every create runs all three.
    const read = this.runner.reads.get('users.workflowCount', (db) => db.selectFrom('users').select('workflow_count').where('id', '=', slot<string>('id')));
    const [row] = (await this.runner.execute(read, { id })).rows;
    return Number(row?.workflow_count ?? 0);
  }

  /** Moves the kept count (workflowCount) by one; lifecycle.ts does it in the transaction that inserts or deletes the workflow. */
  async countWorkflow(id: string, delta: 1 | -1): Promise<void> {
    const update = this.runner.reads.get('users.countWorkflow', (db) =>
      db
        .updateTable('users')
        .set((eb) => ({ workflow_count: eb('workflow_count', '+', slot<number>('delta')) }))
        .where('id', '=', slot<string>('id')),
    );
    await this.runner.execute(update, { id, delta });
  }

  /**
   * Locks the user's row until the transaction ends (a no-op update, so it works
   * in both dialects): serializes a user's own checks such as the workflow cap.
   */
  async lock(id: string): Promise<void> {
    const update = this.runner.reads.get('users.lock', (db) =>
      db.updateTable('users').set((eb) => ({ updated_at: eb.ref('updated_at') })).where('id', '=', slot<string>('id')),
    );
    await this.runner.execute(update, { id });
  }

  async setNotificationPreference(id: string, preference: 'ALL' | 'NONE', now: number): Promise<void> {
    await this.db
      .updateTable('users')
      .set({ notification_preference: preference, updated_at: now })
      .where('id', '=', id)
      .execute();
  }
}
