import type { Kysely } from 'kysely';
import type { Database } from '../schema.js';
import { slot, type ReadRunner } from '../compiled-read.js';

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
  constructor(
    private readonly db: Kysely<Database>,
    private readonly runner: ReadRunner,
  ) {}

  /** Every create and change of the api claims a key: its statements are compiled once (compiled-read.ts). */
  async claim(userId: string, key: string, fingerprint: string, now: number, ttlMs: number): Promise<IdempotencyClaim> {
    const { reads } = this.runner;
    const args = { userId, key, fingerprint, now, expiresAt: now + ttlMs };
    const mine = { user_id: slot<string>('userId'), key: slot<string>('key') };
    const expired = reads.get('idempotency.deleteExpired', (db) =>
      db.deleteFrom('idempotency_keys').where('user_id', '=', mine.user_id).where('key', '=', mine.key).where('expires_at', '<=', slot<number>('now')),
    );
    await this.runner.execute(expired, args);
    const insert = reads.get('idempotency.claim', (db) =>
      db
        .insertInto('idempotency_keys')
        .values({
          ...mine,
          fingerprint: slot<string>('fingerprint'),
          response_status: null,
          response_body: null,
          created_at: slot<number>('now'),
          expires_at: slot<number>('expiresAt'),
        })
        .onConflict((oc) => oc.columns(['user_id', 'key']).doNothing()),
    );
    if (Number((await this.runner.execute(insert, args)).numAffectedRows ?? 0) === 1) return { outcome: 'claimed' };

    const read = reads.get('idempotency.read', (db) =>
      db.selectFrom('idempotency_keys').select(['fingerprint', 'response_status', 'response_body']).where('user_id', '=', mine.user_id).where('key', '=', mine.key),
    );
    const [row] = (await this.runner.execute(read, args)).rows;
    if (!row) throw new Error('idempotency: a key that conflicted on insert is gone');
    const existing = row as { fingerprint: string; response_status: number | null; response_body: string | null };
    if (existing.fingerprint !== fingerprint) return { outcome: 'conflict' };
    if (existing.response_status === null) {
      // Only reachable if a claim was committed without its response, which the
      // callers never do; treat it as a conflict rather than run the change twice.
      return { outcome: 'conflict' };
    }
    return { outcome: 'replay', status: existing.response_status, body: existing.response_body };
  }

  async complete(userId: string, key: string, status: number, body: string | null): Promise<void> {
    const update = this.runner.reads.get('idempotency.complete', (db) =>
      db
        .updateTable('idempotency_keys')
        .set({ response_status: slot<number>('status'), response_body: slot<string | null>('body') })
        .where('user_id', '=', slot<string>('userId'))
        .where('key', '=', slot<string>('key')),
    );
    await this.runner.execute(update, { userId, key, status, body });
  }

  async purgeExpired(now: number): Promise<number> {
    const result = await this.db.deleteFrom('idempotency_keys').where('expires_at', '<=', now).executeTakeFirst();
    return Number(result.numDeletedRows);
  }
}
