import type { Insertable, Kysely } from 'kysely';
import type { Database } from '../schema.js';
import type { DialectHelpers } from '../dialect.js';
import type { KeysetPosition } from '../../core/cursor.js';
import { slot, type ReadRunner } from '../compiled-read.js';

/** The contract's kinds (api-decisions.md); nothing else is ever stored or listed. */
export const NOTIFICATION_KINDS = ['WEB_INFO', 'WEB_SUCCESS', 'WEB_ALERT', 'WEB_ERROR'] as const;
export type NotificationKind = (typeof NOTIFICATION_KINDS)[number];

/**
 * A notification that says the workflow's state changed (docs/notifications.md,
 * "State changes"): the failure that turned it down, the completion that
 * brought it back, its automatic termination, a failed build. Stored beside
 * the kind (and in the payload as `state_change`) so the api can filter on it.
 */
export const NOTIFICATION_STATE_CHANGES = ['down', 'recovered', 'terminated', 'build_failed'] as const;
export type NotificationStateChange = (typeof NOTIFICATION_STATE_CHANGES)[number];

export interface Notification {
  id: string;
  userId: string;
  workflowId: string;
  /** user + event identity; unique */
  dedupeKey: string;
  kind: NotificationKind;
  /** null (or absent, on insert) for every notification that is not a state change */
  stateChange?: NotificationStateChange | null;
  /** JSON object text, returned as stored */
  payload: string;
  readAt: number | null;
  createdAt: number;
  updatedAt: number;
}

/** Each column of a notification's row and the field of Notification it holds. */
const ROW_FIELDS: readonly (readonly [string, keyof Notification])[] = [
  ['id', 'id'],
  ['user_id', 'userId'],
  ['workflow_id', 'workflowId'],
  ['dedupe_key', 'dedupeKey'],
  ['kind', 'kind'],
  ['state_change', 'stateChange'],
  ['payload', 'payload'],
  ['read_at', 'readAt'],
  ['created_at', 'createdAt'],
  ['updated_at', 'updatedAt'],
];

export class NotificationsRepo {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly dialect: DialectHelpers,
    private readonly runner: ReadRunner,
  ) {}

  /** Inserts the notification unless one with its dedupe key exists; true when inserted. */
  async insert(n: Notification): Promise<boolean> {
    return (await this.insertMany([n])) === 1;
  }

  /** insert() for many notifications, one statement per 500: how many were inserted. */
  async insertMany(ns: readonly Notification[]): Promise<number> {
    if (ns.length === 0) return 0;
    type Row = Insertable<Database['notifications']>;
    const insert = (rows: Row | Row[], db: Kysely<Database>) =>
      db.insertInto('notifications').values(rows).onConflict((oc) => oc.column('dedupe_key').doNothing()).returning('id');
    const slots = Object.fromEntries(ROW_FIELDS.map(([column, field]) => [column, slot(field)])) as unknown as Row;
    // SQLite in a transaction (the notifier's batches): one statement prepared once, run for each.
    const held = this.runner.eachRow(this.runner.reads.get('notifications.insert', (db) => insert(slots, db)), ns, (n) => ({ ...n, stateChange: n.stateChange ?? null }));
    if (held) return held.reduce((sum, rows) => sum + rows.length, 0);
    let inserted = 0;
    for (let i = 0; i < ns.length; i += 500) {
      const rows = await insert(
        ns.slice(i, i + 500).map((n) => Object.fromEntries(ROW_FIELDS.map(([column, field]) => [column, field === 'stateChange' ? (n.stateChange ?? null) : n[field]])) as unknown as Row),
        this.db,
      ).execute();
      inserted += rows.length;
    }
    return inserted;
  }

  /** Newest first by (created_at, id). */
  async list(f: {
    userId: string;
    unreadOnly: boolean;
    /** Only these kinds (all when absent). */
    kinds?: readonly NotificationKind[] | undefined;
    /** true: only state changes; false: only the others; absent: both. */
    stateChange?: boolean | undefined;
    after?: KeysetPosition | undefined;
    limit: number;
  }): Promise<Notification[]> {
    let q = this.db.selectFrom('notifications').selectAll().where('user_id', '=', f.userId);
    if (f.unreadOnly) q = q.where('read_at', 'is', null);
    if (f.kinds) q = q.where('kind', 'in', f.kinds);
    if (f.stateChange !== undefined) q = q.where('state_change', f.stateChange ? 'is not' : 'is', null);
    if (f.after) {
      const { k, id } = f.after;
      q = q.where((eb) => eb.or([eb('created_at', '<', k), eb.and([eb('created_at', '=', k), eb('id', '<', id)])]));
    }
    const rows = await q.orderBy('created_at', 'desc').orderBy('id', 'desc').limit(f.limit).execute();
    return rows.map((r) => ({
      id: r.id,
      userId: r.user_id,
      workflowId: r.workflow_id,
      dedupeKey: r.dedupe_key,
      kind: r.kind as NotificationKind,
      stateChange: r.state_change as NotificationStateChange | null,
      payload: r.payload,
      readAt: r.read_at,
      createdAt: r.created_at,
      updatedAt: r.updated_at,
    }));
  }

  /**
   * Marks the user's notifications read, all or none: returns false, changing
   * nothing, when any id is missing or another user's. Already-read ones keep
   * their first read_at. Run it in a transaction (the rows are locked first).
   */
  async markRead(userId: string, ids: readonly string[], now: number): Promise<boolean> {
    // Locked in one order (by id): two overlapping requests that each locked rows in the order
    // their scan found them could wait on each other, and PostgreSQL broke the deadlock with a 500.
    let q = this.db.selectFrom('notifications').select('id').where('user_id', '=', userId).where('id', 'in', ids).orderBy('id');
    if (this.dialect.rowLocks) q = q.forUpdate();
    const found = await q.execute();
    if (found.length !== ids.length) return false;
    await this.db
      .updateTable('notifications')
      .set({ read_at: now, updated_at: now })
      .where('user_id', '=', userId)
      .where('id', 'in', ids)
      .where('read_at', 'is', null)
      .execute();
    return true;
  }
}
