import { UPTIME_WINDOW_MS, workflowHealth, type WorkflowHealth } from '../domain/health.js';
import type { WorkflowSummary } from '../domain/workflow.js';
import type { Store } from './store.js';

/**
 * The health of a page of workflows (domain/health.ts), read with four
 * queries whatever the page's size: recent runs, uptime counts, open jobs and
 * the schedule's bookkeeping (next and skipped slots). Read fresh on every call: unlike the list itself, health moves
 * with time and with every run.
 */
export async function readHealth(store: Store, workflows: readonly WorkflowSummary[], now: number): Promise<Map<string, WorkflowHealth>> {
  const ids = workflows.map((w) => w.id);
  const [recent, counts, open, schedule] = await Promise.all([
    store.jobs.recentRuns(ids),
    store.jobs.outcomeCounts(ids, now - UPTIME_WINDOW_MS),
    store.jobs.openRuns(ids),
    store.workflows.scheduleFacts(ids),
  ]);
  const out = new Map<string, WorkflowHealth>();
  for (const w of workflows) {
    out.set(
      w.id,
      workflowHealth(
        w,
        {
          recent: recent.get(w.id) ?? [],
          window: counts.get(w.id) ?? { completed: 0, failed: 0, canceled: 0 },
          open: open.get(w.id) ?? [],
          nextDueAt: schedule.get(w.id)?.nextDueAt ?? null,
          ...(schedule.has(w.id) ? { skipped: schedule.get(w.id)!.skipped } : {}),
        },
        now,
      ),
    );
  }
  return out;
}
