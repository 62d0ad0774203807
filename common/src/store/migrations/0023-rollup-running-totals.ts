import type { Kysely } from 'kysely';

/**
 * Issue 26, reliability reports at 1,000 workflows × 365 days: each
 * `workflow_rollups` row now holds the workflow's running totals up to the end
 * of its hour instead of that hour's counts (repos/rollups.repo.ts), so a
 * report reads two rows a workflow whatever the period. Rows from before are
 * turned into running totals, one workflow at a time. The (user_id, hour_at)
 * index served only the old report's scan; reports now start from the user's
 * workflows, so it goes and stops costing every insert.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.dropIndex('workflow_rollups_user_idx').execute();
  const ids = (await db.selectFrom('workflow_rollups').select('workflow_id').distinct().execute()) as Array<{ workflow_id: string }>;
  for (const { workflow_id } of ids) await toRunningTotals(db, workflow_id);
}

async function toRunningTotals(db: Kysely<any>, workflowId: string): Promise<void> {
  const rows = (await db.selectFrom('workflow_rollups').select(['hour_at', 'runs', 'failures', 'histogram']).where('workflow_id', '=', workflowId).orderBy('hour_at').execute()) as Array<{
    hour_at: number | string;
    runs: number;
    failures: number;
    histogram: string;
  }>;
  let runs = 0;
  let failures = 0;
  let histogram: number[] = [];
  for (const r of rows) {
    runs += r.runs;
    failures += r.failures;
    const hour = JSON.parse(r.histogram) as number[];
    histogram = hour.map((n, i) => n + (histogram[i] ?? 0));
    await db
      .updateTable('workflow_rollups')
      .set({ runs, failures, histogram: JSON.stringify(histogram) })
      .where('workflow_id', '=', workflowId)
      .where('hour_at', '=', r.hour_at)
      .execute();
  }
}
