/**
 * The `maintenance_windows` table's SQL (migration 0020): a user's
 * maintenance windows and the workflows' snoozes
 * (domain/maintenance-window.ts, docs/adr/0019-maintenance-windows.md).
 */
import { sql, type Kysely } from 'kysely';
import type { Database, MaintenanceWindowsTable, Selectable } from '../schema.js';
import type { KeysetPosition } from '../../core/cursor.js';
import type { MaintenanceWindow, WindowMode, WindowTarget, WindowTiming } from '../../domain/maintenance-window.js';

/** What its owner chooses of a window: name, mode, target and timing. */
export type WindowDefinition = Pick<MaintenanceWindow, 'name' | 'mode'> & WindowTarget & WindowTiming;

function toWindow(r: Selectable<MaintenanceWindowsTable>): MaintenanceWindow {
  const target: WindowTarget = r.workflow_id !== null ? { workflowId: r.workflow_id } : { workflowQuery: r.workflow_query ?? '' };
  const timing: WindowTiming =
    r.cron !== null ? { cron: r.cron, timeZone: r.time_zone ?? 'UTC', durationMinutes: r.duration_minutes ?? 0 } : { startsAt: Number(r.starts_at), endsAt: Number(r.ends_at) };
  return {
    id: r.id,
    userId: r.user_id,
    name: r.name,
    mode: r.mode as WindowMode,
    snooze: r.snooze === 1,
    createdAt: Number(r.created_at),
    updatedAt: Number(r.updated_at),
    ...target,
    ...timing,
  };
}

/** The columns of a definition; the unused target and timing columns null. */
function columns(d: WindowDefinition) {
  return {
    name: d.name,
    mode: d.mode,
    workflow_id: d.workflowId ?? null,
    workflow_query: d.workflowQuery ?? null,
    starts_at: d.startsAt ?? null,
    ends_at: d.cron === undefined ? d.endsAt : null,
    cron: d.cron ?? null,
    time_zone: d.cron !== undefined ? d.timeZone : null,
    duration_minutes: d.cron !== undefined ? d.durationMinutes : null,
  };
}

export class MaintenanceWindowsRepo {
  constructor(private readonly db: Kysely<Database>) {}

  async insert(id: string, userId: string, d: WindowDefinition, now: number): Promise<MaintenanceWindow> {
    await this.db
      .insertInto('maintenance_windows')
      .values({ id, user_id: userId, ...columns(d), created_at: now, updated_at: now })
      .execute();
    return (await this.findForUser(userId, id))!;
  }

  /** Replaces the window's definition; undefined when not the user's (a snooze is not edited here). */
  async update(userId: string, id: string, d: WindowDefinition, now: number): Promise<MaintenanceWindow | undefined> {
    await this.db
      .updateTable('maintenance_windows')
      .set({ ...columns(d), updated_at: now })
      .where('id', '=', id)
      .where('user_id', '=', userId)
      .where('snooze', '=', 0)
      .execute();
    return this.findForUser(userId, id);
  }

  async delete(userId: string, id: string): Promise<boolean> {
    const r = await this.db.deleteFrom('maintenance_windows').where('id', '=', id).where('user_id', '=', userId).executeTakeFirst();
    return Number(r.numDeletedRows) > 0;
  }

  async findForUser(userId: string, id: string): Promise<MaintenanceWindow | undefined> {
    const row = await this.db.selectFrom('maintenance_windows').selectAll().where('id', '=', id).where('user_id', '=', userId).executeTakeFirst();
    return row && toWindow(row);
  }

  /** The user's windows (snoozes left out), newest first (created_at, id), at most `limit`. */
  async list(userId: string, limit: number, after?: KeysetPosition): Promise<MaintenanceWindow[]> {
    let q = this.db.selectFrom('maintenance_windows').selectAll().where('user_id', '=', userId).where('snooze', '=', 0);
    if (after) q = q.where((eb) => eb.or([eb('created_at', '<', after.k), eb.and([eb('created_at', '=', after.k), eb('id', '<', after.id)])]));
    const rows = await q.orderBy('created_at', 'desc').orderBy('id', 'desc').limit(limit).execute();
    return rows.map(toWindow);
  }

  /** How many windows the user keeps (snoozes left out): the bound WINDOWS_PER_USER_MAX counts these. */
  async count(userId: string): Promise<number> {
    const r = await this.db.selectFrom('maintenance_windows').select((eb) => eb.fn.countAll<number>().as('n')).where('user_id', '=', userId).where('snooze', '=', 0).executeTakeFirstOrThrow();
    return Number(r.n);
  }

  /**
   * The windows and snoozes of these users that may still apply at or after
   * `now` (one-off ones not yet over, and every recurring one): what the
   * scheduler and the lifecycle judge a batch of workflows by.
   */
  async inForce(userIds: readonly string[], now: number): Promise<MaintenanceWindow[]> {
    const users = [...new Set(userIds)];
    if (users.length === 0) return [];
    const rows = await this.db
      .selectFrom('maintenance_windows')
      .selectAll()
      .where('user_id', 'in', users)
      .where((eb) => eb.or([eb('ends_at', 'is', null), eb('ends_at', '>', now)]))
      .execute();
    return rows.map(toWindow);
  }

  /**
   * Deletes up to `limit` one-off windows and snoozes that ended before
   * `before` (retention: they no longer mute or skip anything, and the jobs
   * whose skipped slots they explained are gone too); returns how many.
   */
  async deleteEndedBefore(before: number, limit: number): Promise<number> {
    const r = await this.db
      .deleteFrom('maintenance_windows')
      .where('id', 'in', (eb) => eb.selectFrom('maintenance_windows').select('id').where('ends_at', '<', before).orderBy('ends_at').orderBy('id').limit(limit))
      .executeTakeFirst();
    return Number(r.numDeletedRows);
  }

  /** The workflow's snooze: a mute window from `now` to `until`, replacing an earlier one. */
  async snooze(id: string, userId: string, workflowId: string, until: number, now: number): Promise<MaintenanceWindow> {
    await this.db
      .insertInto('maintenance_windows')
      .values({ id, user_id: userId, name: 'Snoozed', mode: 'mute', snooze: 1, workflow_id: workflowId, starts_at: now, ends_at: until, created_at: now, updated_at: now })
      // The literal, not a parameter: SQLite matches the partial index by its predicate's text.
      .onConflict((oc) => oc.column('workflow_id').where('snooze', '=', sql.lit(1)).doUpdateSet({ starts_at: now, ends_at: until, updated_at: now }))
      .execute();
    return (await this.snoozeOf(workflowId))!;
  }

  /** Ends the workflow's snooze, if any. */
  async unsnooze(workflowId: string): Promise<void> {
    await this.db.deleteFrom('maintenance_windows').where('workflow_id', '=', workflowId).where('snooze', '=', 1).execute();
  }

  async snoozeOf(workflowId: string): Promise<MaintenanceWindow | undefined> {
    const row = await this.db.selectFrom('maintenance_windows').selectAll().where('workflow_id', '=', workflowId).where('snooze', '=', 1).executeTakeFirst();
    return row && toWindow(row);
  }
}
