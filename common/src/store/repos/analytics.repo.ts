import { sql, type Insertable, type Kysely } from 'kysely';
import type { Database } from '../schema.js';
import type { WorkflowKind } from '../../domain/workflow.js';
import { slot, type ReadRunner } from '../compiled-read.js';

/** What GET /analytics/{workflow_id} reports. */
export interface WorkflowTotals {
  totalJobs: number;
  totalJoblogs: number;
  totalDurationS: number;
}

export interface KindTotals extends WorkflowTotals {
  kind: WorkflowKind;
  totalWorkflows: number;
}

export interface TopWorkflow extends WorkflowTotals {
  workflowId: string;
  /** The current name, or undefined once the workflow was deleted. */
  name: string | undefined;
  kind: WorkflowKind;
}

export interface UserTotals extends WorkflowTotals {
  totalWorkflows: number;
  kinds: KindTotals[];
  top: TopWorkflow[];
}

export const DELETED_WORKFLOW_NAME = 'Deleted workflow';

/** Rows per statement of the batched writes (well under either engine's parameter limit). */
const CHUNK = 500;

/** How many workflows a user's totals list by jobs run (`top_workflows`). */
export const TOP_WORKFLOWS = 10;

/**
 * Analytics counters. Job totals per workflow live in workflow_stats, each
 * event applied once (applied_events); log lines are summed from
 * job_log_counts, which log-ingest keeps exactly (one monotonic count per job
 * attempt, retained or not). A user's totals are sums over their workflows.
 */
export class AnalyticsRepo {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly runner: ReadRunner,
  ) {}

  /** Records these events as applied, one statement a chunk: the ids applied now (the others were applied before). */
  async markAppliedMany(eventIds: readonly string[], now: number): Promise<Set<string>> {
    const applied = new Set<string>();
    const ids = [...new Set(eventIds)];
    const one = this.runner.reads.get('analytics.markApplied', (db) =>
      db
        .insertInto('applied_events')
        .values({ id: slot<string>('id'), applied_at: slot<number>('now') })
        .onConflict((oc) => oc.column('id').doNothing())
        .returning('id'),
    );
    const held = this.runner.eachRow(one, ids, (id) => ({ id, now }));
    if (held) return new Set(held.flat().map((r) => r.id as string));
    for (let i = 0; i < ids.length; i += CHUNK) {
      const rows = await this.db
        .insertInto('applied_events')
        .values(ids.slice(i, i + CHUNK).map((id) => ({ id, applied_at: now })))
        .onConflict((oc) => oc.column('id').doNothing())
        .returning('id')
        .execute();
      for (const r of rows) applied.add(r.id);
    }
    return applied;
  }

  async purgeApplied(before: number): Promise<number> {
    const r = await this.db.deleteFrom('applied_events').where('applied_at', '<', before).executeTakeFirst();
    return Number(r.numDeletedRows);
  }

  /** Adds to a workflow's counters, creating its row if needed. */
  addToWorkflow(w: { workflowId: string; userId: string; kind: WorkflowKind }, jobs: number, durationS: number): Promise<void> {
    return this.addToWorkflows([{ ...w, jobs, durationS }]);
  }

  /** Adds to the counters of many workflows, each once, in one statement a chunk. */
  async addToWorkflows(adds: readonly { workflowId: string; userId: string; kind: WorkflowKind; jobs: number; durationS: number }[]): Promise<void> {
    if (new Set(adds.map((a) => a.workflowId)).size !== adds.length) throw new Error('addToWorkflows: each workflow once');
    type Row = Insertable<Database['workflow_stats']>;
    const upsert = (rows: Row | Row[], db: Kysely<Database>) =>
      db
        .insertInto('workflow_stats')
        .values(rows)
        .onConflict((oc) =>
          oc.column('workflow_id').doUpdateSet((eb) => ({
            total_jobs: eb('workflow_stats.total_jobs', '+', eb.ref('excluded.total_jobs')),
            total_duration_s: eb('workflow_stats.total_duration_s', '+', eb.ref('excluded.total_duration_s')),
          })),
        );
    const slots = { workflow_id: slot<string>('workflowId'), user_id: slot<string>('userId'), kind: slot<WorkflowKind>('kind'), total_jobs: slot<number>('jobs'), total_duration_s: slot<number>('durationS'), deleted_at: null };
    if (adds.length === 0 || this.runner.eachRow(this.runner.reads.get('analytics.addToWorkflow', (db) => upsert(slots, db)), adds, (a) => a)) return;
    for (let i = 0; i < adds.length; i += CHUNK) {
      await upsert(
        adds.slice(i, i + CHUNK).map((a) => ({ workflow_id: a.workflowId, user_id: a.userId, kind: a.kind, total_jobs: a.jobs, total_duration_s: a.durationS, deleted_at: null })),
        this.db,
      ).execute();
    }
  }

  async markDeleted(workflowId: string, now: number): Promise<void> {
    await this.db.updateTable('workflow_stats').set({ deleted_at: now }).where('workflow_id', '=', workflowId).execute();
  }

  /** The workflow's totals, or undefined when it never was the user's. */
  async forWorkflow(userId: string, workflowId: string): Promise<WorkflowTotals | undefined> {
    const stats = await this.db
      .selectFrom('workflow_stats')
      .select(['total_jobs', 'total_duration_s'])
      .where('workflow_id', '=', workflowId)
      .where('user_id', '=', userId)
      .executeTakeFirst();
    // A workflow whose first event is not applied yet has no row: zeros.
    if (!stats && !(await this.db.selectFrom('workflows').select('id').where('id', '=', workflowId).where('user_id', '=', userId).executeTakeFirst())) {
      return undefined;
    }
    const logs = await this.db
      .selectFrom('job_log_counts')
      .select((eb) => eb.fn.coalesce(eb.fn.sum<number | string>('lines'), sql<number>`0`).as('n'))
      .where('workflow_id', '=', workflowId)
      .executeTakeFirstOrThrow();
    return { totalJobs: stats?.total_jobs ?? 0, totalDurationS: stats?.total_duration_s ?? 0, totalJoblogs: Number(logs.n) };
  }

  async forUser(userId: string, top = TOP_WORKFLOWS): Promise<UserTotals> {
    const logRows = await this.db
      .selectFrom('job_log_counts')
      .select(['workflow_id', (eb) => eb.fn.sum<number | string>('lines').as('n')])
      .where('user_id', '=', userId)
      .groupBy('workflow_id')
      .execute();
    const logs = new Map(logRows.map((r) => [r.workflow_id, Number(r.n)]));
    const rows = await this.db
      .selectFrom('workflow_stats as s')
      .leftJoin('workflows as w', 'w.id', 's.workflow_id')
      .select(['s.workflow_id', 's.kind', 's.total_jobs', 's.total_duration_s', 'w.name'])
      .where('s.user_id', '=', userId)
      .execute();
    const all: TopWorkflow[] = rows.map((r) => ({
      workflowId: r.workflow_id,
      name: r.name ?? undefined,
      kind: r.kind,
      totalJobs: Number(r.total_jobs),
      totalDurationS: Number(r.total_duration_s),
      totalJoblogs: logs.get(r.workflow_id) ?? 0,
    }));
    const kinds = new Map<WorkflowKind, KindTotals>();
    const totals: UserTotals = { totalWorkflows: 0, totalJobs: 0, totalJoblogs: 0, totalDurationS: 0, kinds: [], top: [] };
    for (const w of all) {
      let k = kinds.get(w.kind);
      if (!k) kinds.set(w.kind, (k = { kind: w.kind, totalWorkflows: 0, totalJobs: 0, totalJoblogs: 0, totalDurationS: 0 }));
      for (const t of [k, totals]) {
        t.totalWorkflows += 1;
        t.totalJobs += w.totalJobs;
        t.totalJoblogs += w.totalJoblogs;
        t.totalDurationS += w.totalDurationS;
      }
    }
    const nameOf = (w: TopWorkflow) => w.name ?? DELETED_WORKFLOW_NAME;
    totals.kinds = [...kinds.values()].sort((a, b) => (a.kind < b.kind ? -1 : 1));
    totals.top = all
      .sort((a, b) => b.totalJobs - a.totalJobs || nameOf(a).localeCompare(nameOf(b)) || (a.workflowId < b.workflowId ? -1 : 1))
      .slice(0, top);
    return totals;
  }
}
