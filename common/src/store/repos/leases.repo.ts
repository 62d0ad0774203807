import type { Kysely } from 'kysely';
import type { Database } from '../schema.js';

export interface Lease {
  name: string;
  holder: string;
  /** Increases every time the lease changes hands; writes by an old holder can be refused by it. */
  fencingToken: number;
  expiresAt: number;
}

/**
 * Named leases in the store: leader election that works the same on both
 * engines. Acquiring is a conditional write (free, expired, or already ours),
 * so at most one holder wins at a time.
 */
export class LeasesRepo {
  constructor(private readonly db: Kysely<Database>) {}

  /** Takes or renews the lease; returns it when `holder` holds it afterwards. */
  async acquire(name: string, holder: string, now: number, ttlMs: number): Promise<Lease | undefined> {
    await this.db
      .insertInto('leases')
      .values({ name, holder, fencing_token: 1, expires_at: now + ttlMs })
      .onConflict((oc) => oc.column('name').doNothing())
      .execute();
    // Renew if ours; take over (bumping the fencing token) if expired.
    await this.db
      .updateTable('leases')
      .set((eb) => ({
        expires_at: now + ttlMs,
        fencing_token: eb.case().when('holder', '=', holder).then(eb.ref('fencing_token')).else(eb('fencing_token', '+', 1)).end(),
        holder,
      }))
      .where('name', '=', name)
      .where((eb) => eb.or([eb('holder', '=', holder), eb('expires_at', '<=', now)]))
      .execute();
    const row = await this.db.selectFrom('leases').selectAll().where('name', '=', name).executeTakeFirst();
    if (!row || row.holder !== holder) return undefined;
    return { name, holder, fencingToken: row.fencing_token, expiresAt: row.expires_at };
  }

  /** Gives the lease up early (clean shutdown), so another replica takes over at once. */
  async release(name: string, holder: string): Promise<void> {
    await this.db.updateTable('leases').set({ expires_at: 0 }).where('name', '=', name).where('holder', '=', holder).execute();
  }

  /** Whether `holder` still holds the lease with this fencing token at `now`. */
  async holds(name: string, holder: string, fencingToken: number, now: number): Promise<boolean> {
    const row = await this.db
      .selectFrom('leases')
      .select('name')
      .where('name', '=', name)
      .where('holder', '=', holder)
      .where('fencing_token', '=', fencingToken)
      .where('expires_at', '>', now)
      .executeTakeFirst();
    return row !== undefined;
  }
}
