import type { Kysely } from 'kysely';
import type { Database } from '../schema.js';
import { slot, type ReadRunner } from '../compiled-read.js';

export interface Session {
  id: string;
  userId: string;
  createdAt: number;
  expiresAt: number;
}

/**
 * An active session as a signed-in request reads it. It brings its user's
 * workflow list version (kept by triggers, migration 0007) in the same statement: the
 * busiest page then needs no read of its own to reuse a rendered page, and a
 * PostgreSQL round trip costs more than the join.
 */
export interface ActiveSession extends Session {
  workflowListVersion: number;
}

export class SessionsRepo {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly runner: ReadRunner,
  ) {}

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

  /** The session if it exists, is not revoked and has not expired at `now`. Every signed-in request asks: a compiled read. */
  async findActive(id: string, now: number): Promise<ActiveSession | undefined> {
    const read = this.runner.reads.get('sessions.findActive', (db) =>
      db
        .selectFrom('sessions as s')
        .leftJoin('workflow_list_versions as v', 'v.user_id', 's.user_id')
        .select(['s.user_id', 's.created_at', 's.expires_at', 'v.version'])
        .where('s.id', '=', slot<string>('id'))
        .where('s.revoked_at', 'is', null)
        .where('s.expires_at', '>', slot<number>('now')),
    );
    const [row] = (await this.runner.rows(read, { id, now })) as [userId: string, createdAt: number, expiresAt: number, version: number | null][];
    return row && { id, userId: row[0], createdAt: row[1], expiresAt: row[2], workflowListVersion: row[3] ?? 0 };
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
