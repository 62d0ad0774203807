import type { Kysely } from 'kysely';
import type { Downtime } from '../../domain/slot-fates.js';
import type { Database } from '../schema.js';

/** The period of uptime a heartbeat extended or began, and the downtime before it when it began one. */
export interface UptimeBeat {
  /** When the current period began. */
  upSince: number;
  /** Only when this beat began the period after a gap: the downtime it closed. */
  downtime?: Downtime;
}

/**
 * When orloj ran (migration 0022): one row per period the scheduler leader
 * ran without a gap longer than the tolerance. The leader beats once a tick,
 * one UPDATE of one row; the gaps between rows are orloj's downtime, which the
 * slot fates and the history strip show (issue 26, docs/adr/0021).
 */
export class UptimeRepo {
  constructor(private readonly db: Kysely<Database>) {}

  /**
   * Extends the newest period to `now` when it was last seen no longer than
   * `gapMs` ago, else begins a new one at `now`. Two leaders beating at once
   * (a handover) both extend the same row, or the second's insert of the
   * same instant is a no-op.
   */
  async beat(now: number, gapMs: number): Promise<UptimeBeat> {
    const newest = await this.db.selectFrom('orloj_uptime').selectAll().orderBy('started_at', 'desc').limit(1).executeTakeFirst();
    if (newest && Number(newest.last_seen_at) >= now - gapMs) {
      await this.db
        .updateTable('orloj_uptime')
        .set({ last_seen_at: now })
        .where('started_at', '=', newest.started_at)
        .where('last_seen_at', '<', now)
        .execute();
      return { upSince: Number(newest.started_at) };
    }
    await this.db
      .insertInto('orloj_uptime')
      .values({ started_at: now, last_seen_at: now })
      .onConflict((oc) => oc.column('started_at').doNothing())
      .execute();
    return newest ? { upSince: now, downtime: { from: Number(newest.last_seen_at), to: now } } : { upSince: now };
  }

  /**
   * The times orloj was down that reach into [from, to), oldest first: the
   * gaps between consecutive periods. Before the first period there is no
   * record (orloj had not run yet, or ran before this record existed).
   */
  async downtime(from: number, to: number): Promise<Downtime[]> {
    // The periods that end in or after the range, and the one before them, bound the gaps that touch it.
    const before = await this.db.selectFrom('orloj_uptime').selectAll().where('last_seen_at', '<', from).orderBy('started_at', 'desc').limit(1).execute();
    const within = await this.db
      .selectFrom('orloj_uptime')
      .selectAll()
      .where('last_seen_at', '>=', from)
      .where('started_at', '<', to)
      .orderBy('started_at')
      .execute();
    const after = await this.db.selectFrom('orloj_uptime').selectAll().where('started_at', '>=', to).orderBy('started_at').limit(1).execute();
    const periods = [...before, ...within, ...after].map((r) => ({ start: Number(r.started_at), end: Number(r.last_seen_at) }));
    const out: Downtime[] = [];
    for (let i = 1; i < periods.length; i++) {
      const gap = { from: periods[i - 1]!.end, to: periods[i]!.start };
      if (gap.from < to && gap.to > from) out.push(gap);
    }
    return out;
  }
}
