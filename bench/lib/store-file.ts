import Database from 'better-sqlite3';
import { slotCoverage, type SlotJob, type WindowAnalysis, type WorkflowSlots } from './window-analysis.js';

/**
 * The schedule as an orloj SQLite file recorded it, read with plain SQL after
 * orloj stopped. Only columns every version since the jobs table has (slot_at,
 * trigger, the step times), so the current tree and older commits are judged
 * by one rule (window-analysis.ts).
 */
export function readWindow(file: string, window: { windowStart: number; windowEnd: number; stopAt: number }): WindowAnalysis {
  const db = new Database(file, { fileMustExist: true });
  try {
    const workflows = db.prepare('select id, build_completed_at, interval_minutes from workflows').all() as WorkflowSlots[];
    const jobs = db
      .prepare(
        `select workflow_id, slot_at, status, created_at, queued_at, started_at, completed_at, updated_at
           from jobs where "trigger" = 'AUTOMATIC' and slot_at >= ?`,
      )
      .all(window.windowStart) as SlotJob[];
    const completed = db
      .prepare(`select count(*) as n from jobs where status = 'COMPLETED' and completed_at >= ? and completed_at < ?`)
      .get(window.windowStart, window.windowEnd) as { n: number };
    const totals = db.prepare('select status, count(*) as n from jobs group by status').all() as Array<{ status: string; n: number }>;
    const failed = db
      .prepare(`select status_reason_code as code, status_reason_message as message, count(*) as n from jobs where status = 'FAILED' group by 1, 2`)
      .all() as Array<{ code: string | null; message: string | null; n: number }>;
    return {
      ...slotCoverage(workflows, jobs, window),
      completedInWindow: completed.n,
      allJobs: Object.fromEntries(totals.map((r) => [r.status, r.n])),
      failures: Object.fromEntries(failed.map((r) => [`${r.code ?? '?'}: ${r.message ?? ''}`, r.n])),
    };
  } finally {
    db.close();
  }
}
