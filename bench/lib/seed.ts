// Runs inside the orloj server process (bench/servers/orloj.ts): it imports the
// @orloj/common sources, which the load generator process never does.
import { sql } from 'kysely';
import { newId, type Store } from '@orloj/common';

const BATCH = 500; // 16 columns × 500 rows stays under both engines' bind-parameter limits

/**
 * Inserts `count` active workflows for the user, newest created last, one per
 * minute back from now; every fifth is a CONTAINER workflow. Bulk inserts in
 * one transaction, then refreshes the planner statistics as autovacuum would.
 */
export async function seedWorkflows(store: Store, userId: string, count: number): Promise<void> {
  const now = Date.now();
  await store.transaction(async (tx) => {
    for (let start = 0; start < count; start += BATCH) {
      const rows = [];
      for (let i = start; i < Math.min(count, start + BATCH); i++) {
        const container = i % 5 === 0;
        const name = container ? `Nightly export ${i}` : `Health check ${i} — service-${i % 97}.example.com`;
        const createdAt = now - (count - i) * 60_000;
        rows.push({
          id: newId(),
          user_id: userId,
          name,
          name_folded: name.toLowerCase(),
          payload: container
            ? JSON.stringify({ image: 'ghcr.io/example/exporter:1.4.2', cmd: ['export', '--since', '24h'], env: { STAGE: 'prod' }, timeout: '15m' })
            : JSON.stringify({ endpoint: `https://service-${i % 97}.example.com/health`, method: 'GET', expected_status_code: 200, timeout: '10s' }),
          kind: container ? ('CONTAINER' as const) : ('HEARTBEAT' as const),
          build_status: 'COMPLETED' as const,
          interval_minutes: container ? 1_440 : 5,
          consecutive_job_failures_count: i % 7 === 0 ? 1 : 0,
          max_consecutive_job_failures_allowed: 3,
          log_retention: container ? 1 : 0,
          generation: 0,
          created_at: createdAt,
          updated_at: createdAt,
          terminated_at: null,
          build_completed_at: createdAt + 30_000,
        });
      }
      await tx.db.insertInto('workflows').values(rows).execute();
    }
  });
  if (store.dialect.name === 'postgres') await sql`analyze workflows`.execute(store.db);
}

export async function engineVersion(store: Store): Promise<string> {
  if (store.dialect.name === 'postgres') {
    const { rows } = await sql<{ v: string }>`select current_setting('server_version') as v`.execute(store.db);
    return `PostgreSQL ${rows[0]?.v ?? '?'}`;
  }
  const { rows } = await sql<{ v: string }>`select sqlite_version() as v`.execute(store.db);
  return `SQLite ${rows[0]?.v ?? '?'}`;
}
