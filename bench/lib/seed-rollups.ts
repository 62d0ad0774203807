// Runs inside the orloj server process (bench/servers/orloj.ts): it imports the
// @orloj/common sources, which the load generator process never does.
import { sql } from 'kysely';
import { newId } from '@orloj/common/core';
import { ROLLUP_BOUNDS_MS, ROLLUP_BUCKET_COLUMNS, type Store } from '@orloj/common/store';

const HOUR = 3_600_000;
const RUNS_PER_HOUR = 60;
/** One hour of a one-minute check, by histogram bucket (upper bound ms → runs): most answer in 25 ms, a few are slow. */
const HOUR_HISTOGRAM: Readonly<Record<number, number>> = { 25: 40, 50: 14, 100: 4, 500: 1, 3_000: 1 };
const INCIDENTS_PER_DOWN_WORKFLOW = 12;

/**
 * The `workflow_rollups` rows a year of results leaves (repos/rollups.repo.ts:
 * each row the workflow's running totals up to the end of its hour): every
 * one of the user's workflows, every hour of the last `days` days, 60 runs an
 * hour with the histogram above; those the seed marks failing (one in seven) failed 3 runs an hour and
 * had an incident a month. Written by the database itself (one INSERT …
 * SELECT over a recursive series of hours, the same SQL on both engines),
 * then the planner statistics refreshed as autovacuum would.
 */
export async function seedRollups(store: Store, userId: string, days: number): Promise<{ rows: number; incidents: number }> {
  const hours = days * 24;
  const lastHour = Math.floor(Date.now() / HOUR) * HOUR;
  const firstHour = lastHour - (hours - 1) * HOUR;
  const buckets = [...ROLLUP_BOUNDS_MS, Infinity].map((bound) => HOUR_HISTOGRAM[bound] ?? 0);
  // Each bucket's column: the hour's count times the hours so far.
  const histogram = buckets.map((n) => `h.k * ${n}`).join(', ');
  await store.transaction(async (tx) => {
    await sql`with recursive h(k) as (select 1 union all select k + 1 from h where k < ${sql.lit(hours)})
      insert into workflow_rollups (workflow_id, hour_at, user_id, runs, failures, ${sql.raw(ROLLUP_BUCKET_COLUMNS.join(', '))})
      select w.id, ${sql.lit(firstHour)} + (h.k - 1) * cast(${sql.lit(HOUR)} as bigint), w.user_id, h.k * ${sql.lit(RUNS_PER_HOUR)},
        case when w.consecutive_job_failures_count > 0 then h.k * 3 else 0 end, ${sql.raw(histogram)}
      from workflows w cross join h where w.user_id = ${userId}`.execute(tx.db);
  });
  const down = await store.db.selectFrom('workflows').select('id').where('user_id', '=', userId).where('consecutive_job_failures_count', '>', 0).execute();
  const incidents = down.flatMap(({ id }) =>
    Array.from({ length: INCIDENTS_PER_DOWN_WORKFLOW }, (_, m) => {
      const startedAt = firstHour + Math.floor(((m + 0.5) * hours * HOUR) / INCIDENTS_PER_DOWN_WORKFLOW);
      return {
        id: newId(),
        user_id: userId,
        workflow_id: id,
        opened_by_job_id: newId(),
        started_at: startedAt,
        opened_at: startedAt,
        closed_at: startedAt + 20 * 60_000,
        resolution: 'recovered',
        first_failure_job_id: newId(),
        first_failure_code: 'connection_refused',
        first_failure_message: 'Connection refused',
        failed_runs: 20,
        updated_at: startedAt + 20 * 60_000,
      };
    }),
  );
  for (let i = 0; i < incidents.length; i += 500) await store.db.insertInto('incidents').values(incidents.slice(i, i + 500)).execute();
  await sql`analyze`.execute(store.db);
  const counted = await store.db.selectFrom('workflow_rollups').select((eb) => eb.fn.countAll<number | string>().as('n')).executeTakeFirstOrThrow();
  return { rows: Number(counted.n), incidents: incidents.length };
}
