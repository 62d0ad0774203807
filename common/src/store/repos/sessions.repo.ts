import type { Kysely } from 'kysely';
import type { Database } from '../schema.js';

export interface Session {
  id: string;
  userId: string;
  createdAt: number;
  expiresAt: number;
}

export class SessionsRepo {
  constructor(private readonly db: Kysely<Database>) {}

  async insert(session: Session): Promise<void> {
    await this.db
      .insertInto('sessions')
      .values({
        id: session.id,
        user_id: session.userId,
        created_at: session.createdAt,
        expires_at: session.expiresAt,
        revoked_at: null,
      })
      .execute();
  }

  /** The session if it exists, is not revoked and has not expired at `now`. */
  async findActive(id: string, now: number): Promise<Session | undefined> {
    const row = await this.db
      .selectFrom('sessions')
      .select(['id', 'user_id', 'created_at', 'expires_at'])
      .where('id', '=', id)
      .where('revoked_at', 'is', null)
      .where('expires_at', '>', now)
      .executeTakeFirst();
    return row && { id: row.id, userId: row.user_id, createdAt: row.created_at, expiresAt: row.expires_at };
  }

  async revoke(id: string, now: number): Promise<void> {
    await this.db
      .updateTable('sessions')
      .set({ revoked_at: now })
      .where('id', '=', id)
      .where('revoked_at', 'is', null)
      .execute();
  }

  /** Deletes sessions that expired or were revoked before `before`. */
  async purge(before: number): Promise<number> {
    const result = await this.db
      .deleteFrom('sessions')
      .where((eb) => eb.or([eb('expires_at', '<', before), eb('revoked_at', '<', before)]))
      .executeTakeFirst();
    return Number(result.numDeletedRows);
  }
}
