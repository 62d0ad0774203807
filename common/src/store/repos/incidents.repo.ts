/**
 * The `incidents` table's SQL (migration 0018, docs/adr/0016-incidents.md):
 * one row a down period of a workflow, opened and closed by the lifecycle
 * (lifecycle.ts) in the transaction of the job outcome that turned the
 * workflow down or up, acknowledged and snoozed by its owner.
 */
import type { Kysely } from 'kysely';
import type { Database, IncidentsTable, Selectable } from '../schema.js';
import type { KeysetPosition } from '../../core/cursor.js';

export const INCIDENT_RESOLUTIONS = ['recovered', 'terminated'] as const;
export type IncidentResolution = (typeof INCIDENT_RESOLUTIONS)[number];

export interface Incident {
  id: string;
  userId: string;
  workflowId: string;
  /** The workflow's current name (the incident goes with a deleted workflow). */
  workflowName: string;
  openedByJobId: string;
  /** When the first failed run of the streak that turned the workflow down finished. */
  startedAt: number;
  /** When the policy's N-th failure turned it down. */
  openedAt: number;
  closedAt: number | null;
  resolution: IncidentResolution | null;
  firstFailureJobId: string;
  firstFailureCode: string | null;
  firstFailureMessage: string | null;
  failedRuns: number;
  acknowledgedBy: string | null;
  acknowledgedAt: number | null;
  snoozedUntil: number | null;
  updatedAt: number;
}

export type NewIncident = Omit<Incident, 'workflowName' | 'closedAt' | 'resolution' | 'acknowledgedBy' | 'acknowledgedAt' | 'snoozedUntil' | 'updatedAt'>;

export interface IncidentListFilter {
  userId: string;
  workflowId?: string;
  /** Open ones (true), closed ones (false), or both (undefined). */
  open?: boolean;
  after?: KeysetPosition;
  limit: number;
}

type Row = Selectable<IncidentsTable> & { workflow_name: string };

function toIncident(r: Row): Incident {
  return {
    id: r.id,
    userId: r.user_id,
    workflowId: r.workflow_id,
    workflowName: r.workflow_name,
    openedByJobId: r.opened_by_job_id,
    startedAt: Number(r.started_at),
    openedAt: Number(r.opened_at),
    closedAt: r.closed_at === null ? null : Number(r.closed_at),
    resolution: r.resolution as IncidentResolution | null,
    firstFailureJobId: r.first_failure_job_id,
    firstFailureCode: r.first_failure_code,
    firstFailureMessage: r.first_failure_message,
    failedRuns: r.failed_runs,
    acknowledgedBy: r.acknowledged_by,
    acknowledgedAt: r.acknowledged_at === null ? null : Number(r.acknowledged_at),
    snoozedUntil: r.snoozed_until === null ? null : Number(r.snoozed_until),
    updatedAt: Number(r.updated_at),
  };
}

export class IncidentsRepo {
  constructor(private readonly db: Kysely<Database>) {}

  private select() {
    return this.db.selectFrom('incidents').innerJoin('workflows', 'workflows.id', 'incidents.workflow_id').selectAll('incidents').select('workflows.name as workflow_name');
  }

  /** Opens an incident; the unique opener (a job ends once) and the one-open-a-workflow index make a second open a no-op. */
  async open(i: NewIncident, now: number): Promise<void> {
    await this.db
      .insertInto('incidents')
      .values({
        id: i.id,
        user_id: i.userId,
        workflow_id: i.workflowId,
        opened_by_job_id: i.openedByJobId,
        started_at: i.startedAt,
        opened_at: i.openedAt,
        first_failure_job_id: i.firstFailureJobId,
        first_failure_code: i.firstFailureCode,
        first_failure_message: i.firstFailureMessage,
        failed_runs: i.failedRuns,
        updated_at: now,
      })
      .onConflict((oc) => oc.doNothing())
      .execute();
  }

  /** One more failed run in the workflow's open incident; false when none is open. */
  async addFailedRun(workflowId: string, now: number): Promise<boolean> {
    const r = await this.db
      .updateTable('incidents')
      .set((eb) => ({ failed_runs: eb('failed_runs', '+', 1), updated_at: now }))
      .where('workflow_id', '=', workflowId)
      .where('closed_at', 'is', null)
      .executeTakeFirst();
    return Number(r.numUpdatedRows) > 0;
  }

  /** Closes the workflow's open incident, if any. */
  async close(workflowId: string, resolution: IncidentResolution, now: number): Promise<void> {
    await this.db
      .updateTable('incidents')
      .set({ closed_at: now, resolution, updated_at: now })
      .where('workflow_id', '=', workflowId)
      .where('closed_at', 'is', null)
      .execute();
  }

  async findForUser(userId: string, id: string): Promise<Incident | undefined> {
    const row = await this.select().where('incidents.id', '=', id).where('incidents.user_id', '=', userId).executeTakeFirst();
    return row && toIncident(row);
  }

  /** The user's incidents, newest first (started_at, id), at most `limit`. */
  async list(f: IncidentListFilter): Promise<Incident[]> {
    let q = this.select().where('incidents.user_id', '=', f.userId);
    if (f.workflowId) q = q.where('incidents.workflow_id', '=', f.workflowId);
    if (f.open !== undefined) q = q.where('incidents.closed_at', f.open ? 'is' : 'is not', null);
    if (f.after) {
      const { k, id } = f.after;
      q = q.where((eb) => eb.or([eb('incidents.started_at', '<', k), eb.and([eb('incidents.started_at', '=', k), eb('incidents.id', '<', id)])]));
    }
    const rows = await q.orderBy('incidents.started_at', 'desc').orderBy('incidents.id', 'desc').limit(f.limit).execute();
    return rows.map(toIncident);
  }

  /** The user's incidents still open at `from` or opened since (only `workflowId`'s when given): the down periods of a report. */
  async overlapping(userId: string, from: number, workflowId?: string): Promise<Incident[]> {
    let q = this.select()
      .where('incidents.user_id', '=', userId)
      .where((eb) => eb.or([eb('incidents.closed_at', 'is', null), eb('incidents.closed_at', '>', from)]));
    if (workflowId) q = q.where('incidents.workflow_id', '=', workflowId);
    return (await q.execute()).map(toIncident);
  }

  /** Acknowledged by `by` (kept when already acknowledged); undefined when not the user's. */
  async acknowledge(userId: string, id: string, by: string, now: number): Promise<Incident | undefined> {
    await this.db
      .updateTable('incidents')
      .set({ acknowledged_by: by, acknowledged_at: now, updated_at: now })
      .where('id', '=', id)
      .where('user_id', '=', userId)
      .where('acknowledged_at', 'is', null)
      .execute();
    return this.findForUser(userId, id);
  }

  /** Snoozed until `until`; undefined when not the user's. */
  async snooze(userId: string, id: string, until: number, now: number): Promise<Incident | undefined> {
    await this.db.updateTable('incidents').set({ snoozed_until: until, updated_at: now }).where('id', '=', id).where('user_id', '=', userId).execute();
    return this.findForUser(userId, id);
  }
}
