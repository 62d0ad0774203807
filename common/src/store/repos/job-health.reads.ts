/**
 * The health read-outs of the `jobs` table: a page of workflows' recent
 * runs, their outcome counts (uptime) and their open runs, each in one query
 * for the page. JobsRepo exposes them (store.jobs.recentRuns, …).
 */
import type { Kysely } from 'kysely';
import type { Database } from '../schema.js';
import { RECENT_RUNS, type OpenRun, type RunCounts, type RunSummary } from '../../domain/health.js';
import { toCheck } from './job-rows.js';

/** Workflows per recentRuns statement. */
const RECENT_BRANCHES = 100;

export class JobHealthReads {
  constructor(private readonly db: Kysely<Database>) {}

  /**
   * The latest finished runs of each workflow, newest first by slot, at most
   * `perWorkflow` each: one query for a page of workflows (the dashboard's
   * strip of recent runs). Each workflow is its own branch of a UNION ALL,
   * reading jobs_workflow_list_idx from its newest slot and stopping after
   * `perWorkflow` finished runs, so the read costs the same whatever the
   * history: a window over the workflows' whole history read and sorted every
   * run they ever had (500 each, a page took 58–79 ms against 1–11 ms now;
   * docs/benchmarks.md, "Issue 28, target 3").
   */
  async recentRuns(workflowIds: readonly string[], perWorkflow: number = RECENT_RUNS): Promise<Map<string, RunSummary[]>> {
    const out = new Map<string, RunSummary[]>();
    if (workflowIds.length === 0) return out;
    const rows = [];
    // SQLite allows 500 terms in a compound SELECT; a page has far fewer workflows.
    for (let i = 0; i < workflowIds.length; i += RECENT_BRANCHES) {
      const branches = workflowIds.slice(i, i + RECENT_BRANCHES).map((id, b) =>
        this.db
          .selectFrom((db) =>
            db
              .selectFrom('jobs')
              .select(['id', 'workflow_id', 'status', 'scheduled_at', 'completed_at', 'check_status_code', 'check_response_ms', 'check_failure'])
              .where('workflow_id', '=', id)
              .where('status', 'in', ['COMPLETED', 'FAILED', 'CANCELED'])
              .orderBy('scheduled_at', 'desc')
              .orderBy('id', 'desc')
              .limit(perWorkflow)
              .as(`w${b}`),
          )
          .selectAll(),
      );
      const union = branches.slice(1).reduce((q, branch) => q.unionAll(branch), branches[0]!);
      rows.push(
        ...(await this.db.selectFrom(union.as('r')).selectAll().orderBy('workflow_id').orderBy('scheduled_at', 'desc').orderBy('id', 'desc').execute()),
      );
    }
    for (const r of rows) {
      const run: RunSummary = {
        jobId: r.id,
        status: r.status as RunSummary['status'],
        scheduledAt: Number(r.scheduled_at),
        completedAt: r.completed_at === null ? null : Number(r.completed_at),
        check: toCheck(r),
      };
      const list = out.get(r.workflow_id);
      if (list) list.push(run);
      else out.set(r.workflow_id, [run]);
    }
    return out;
  }

  /** Per workflow, its runs scheduled since `since` that finished, by outcome (uptime). */
  async outcomeCounts(workflowIds: readonly string[], since: number): Promise<Map<string, RunCounts>> {
    const out = new Map<string, RunCounts>();
    if (workflowIds.length === 0) return out;
    const rows = await this.db
      .selectFrom('jobs')
      .select((eb) => ['workflow_id', 'status', eb.fn.countAll<number | string>().as('n')])
      .where('workflow_id', 'in', workflowIds)
      .where('scheduled_at', '>=', since)
      .where('status', 'in', ['COMPLETED', 'FAILED', 'CANCELED'])
      .groupBy(['workflow_id', 'status'])
      .execute();
    for (const r of rows) {
      const counts = out.get(r.workflow_id) ?? { completed: 0, failed: 0, canceled: 0 };
      const n = Number(r.n);
      if (r.status === 'COMPLETED') counts.completed = n;
      else if (r.status === 'FAILED') counts.failed = n;
      else counts.canceled = n;
      out.set(r.workflow_id, counts);
    }
    return out;
  }

  /** Per workflow, its jobs not yet finished. */
  async openRuns(workflowIds: readonly string[]): Promise<Map<string, OpenRun[]>> {
    const out = new Map<string, OpenRun[]>();
    if (workflowIds.length === 0) return out;
    const rows = await this.db
      .selectFrom('jobs')
      .select(['id', 'workflow_id', 'status', 'scheduled_at'])
      .where('workflow_id', 'in', workflowIds)
      .where('status', 'in', ['PENDING', 'QUEUED', 'RUNNING'])
      .orderBy('scheduled_at')
      .execute();
    for (const r of rows) {
      const run: OpenRun = { jobId: r.id, status: r.status as OpenRun['status'], scheduledAt: Number(r.scheduled_at) };
      const list = out.get(r.workflow_id);
      if (list) list.push(run);
      else out.set(r.workflow_id, [run]);
    }
    return out;
  }
}
