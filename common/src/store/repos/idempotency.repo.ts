import type { Kysely } from 'kysely';
import type { Database } from '../schema.js';

export type IdempotencyClaim =
  | { outcome: 'claimed' }
  | { outcome: 'replay'; status: number; body: string | null }
  | { outcome: 'conflict' };

/**
 * The idempotency ledger. A key is claimed inside the same transaction as the
 * change it guards, so the record exists exactly when the change does.
 *
 * Concurrency: the claim is an INSERT … ON CONFLICT DO NOTHING. In PostgreSQL a
 * concurrent claim of the same key waits for the first transaction to finish
 * and then sees its committed record; in SQLite transactions are serialised by
 * the single writer. Either way the second request replays the first one.
 */
export class IdempotencyRepo {
  constructor(private readonly db: Kysely<Database>) {}

  async claim(userId: string, key: string, fingerprint: string, now: number, ttlMs: number): Promise<IdempotencyClaim> {
    await this.db
      .deleteFrom('idempotency_keys')
      .where('user_id', '=', userId)
      .where('key', '=', key)
      .where('expires_at', '<=', now)
      .execute();
    const inserted = await this.db
      .insertInto('idempotency_keys')
      .values({
        user_id: userId,
        key,
        fingerprint,
        response_status: null,
        response_body: null,
        created_at: now,
        expires_at: now + ttlMs,
      })
      .onConflict((oc) => oc.columns(['user_id', 'key']).doNothing())
      .executeTakeFirst();
    if (Number(inserted.numInsertedOrUpdatedRows ?? 0) === 1) return { outcome: 'claimed' };

    const existing = await this.db
      .selectFrom('idempotency_keys')
      .select(['fingerprint', 'response_status', 'response_body'])
      .where('user_id', '=', userId)
      .where('key', '=', key)
      .executeTakeFirstOrThrow();
    if (existing.fingerprint !== fingerprint) return { outcome: 'conflict' };
    if (existing.response_status === null) {
      // Only reachable if a claim was committed without its response, which the
      // callers never do; treat it as a conflict rather than run the change twice.
      return { outcome: 'conflict' };
    }
    return { outcome: 'replay', status: existing.response_status, body: existing.response_body };
  }

  async complete(userId: string, key: string, status: number, body: string | null): Promise<void> {
    await this.db
      .updateTable('idempotency_keys')
      .set({ response_status: status, response_body: body })
      .where('user_id', '=', userId)
      .where('key', '=', key)
      .execute();
  }

  async purgeExpired(now: number): Promise<number> {
    const result = await this.db.deleteFrom('idempotency_keys').where('expires_at', '<=', now).executeTakeFirst();
    return Number(result.numDeletedRows);
  }
}
