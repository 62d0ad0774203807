// Runs inside bench/servers/schedule-db.ts (it imports the @orloj/common
// sources, which the load generator process never does).
import { sql } from 'kysely';
import { ROLLUP_BOUNDS_MS, ROLLUP_BUCKET_COLUMNS, type Store } from '@orloj/common/store';

const DAY = 86_400_000;
const HOUR = 3_600_000;
/** One job in FAILURE_EVERY failed (a refused connection); one failed job in three took a second attempt. */
const FAILURE_EVERY = 50;

export interface HistoryResult {
  jobs: number;
  notifications: number;
  rollups: number;
  incidents: number;
  attempts: number;
  /** Milliseconds each step took, in order. */
  steps: Record<string, number>;
}

/**
 * A year of finished history for the workflows already seeded (issue 28,
 * target 3), written by PostgreSQL itself with set-wise SQL over
 * generate_series, as the roles would have left it: `jobs` spread evenly over
 * `days` days before now (each workflow's runs `days / per` apart, offset by
 * its place in the minute; mostly COMPLETED, one in 50 FAILED by a refused
 * connection, a third of those on a second attempt with its `job_attempts`
 * row), a notification per finished job as the notifier makes them (the
 * failure marked `down`, and a `recovered` one after it), a closed incident per
 * failure, the `workflow_rollups` running totals of each job's hour, the
 * workflows' counters and a year of scheduler uptime; then VACUUM ANALYZE of
 * what it wrote, so that autovacuum does not wake on the fresh tables during
 * the measured window that follows (it did, 2026-12-03). No log
 * lines: HEARTBEAT checks write none. Inserted in slot order, as a year of
 * runs appends them. PostgreSQL only.
 */
export async function seedHistory(store: Store, arg: { jobs: number; days: number }): Promise<HistoryResult> {
  if (store.dialect.name !== 'postgres') throw new Error('the history generator writes PostgreSQL only');
  const { db } = store;
  const steps: Record<string, number> = {};
  const step = async (name: string, run: () => Promise<unknown>) => {
    const t = performance.now();
    await run();
    steps[name] = Math.round(performance.now() - t);
  };
  const workflows = Number((await db.selectFrom('workflows').select((eb) => eb.fn.countAll<string>().as('n')).executeTakeFirstOrThrow()).n);
  const per = Math.max(1, Math.floor(arg.jobs / workflows));
  const end = Math.floor((Date.now() - HOUR) / 60_000) * 60_000;
  const start = end - arg.days * DAY;
  const gap = Math.floor((arg.days * DAY) / per);
  // The histogram bucket of a response time, as rollups.repo.ts files it.
  const bucketOf = `case ${ROLLUP_BOUNDS_MS.map((b, i) => `when j.check_response_ms <= ${b} then ${i}`).join(' ')} else ${ROLLUP_BOUNDS_MS.length} end`;
  const sums = ROLLUP_BUCKET_COLUMNS.map((c, i) => `sum(case when b = ${i} and status = 'COMPLETED' then 1 else 0 end) over w as ${c}`).join(', ');

  await step('jobs', () =>
    sql`insert into jobs (id, workflow_id, user_id, generation, trigger, status, slot_at, scheduled_at, attempts, queued_at, dispatched_at,
        runner_id, started_at, completed_at, status_reason_code, status_reason_message, created_at, updated_at,
        check_status_code, check_response_ms, check_failure)
      select gen_random_uuid(), w.id, w.user_id, 0, 'AUTOMATIC', case when x.f then 'FAILED' else 'COMPLETED' end, x.s, x.s,
        case when x.f and g.i % 3 = 0 then 2 else 1 end, x.s + 20, x.s + 22, 'runner-history', x.s + 60, x.s + 60 + x.ms,
        case when x.f then 'connection_refused' end, case when x.f then 'Connection refused' end, x.s + 20, x.s + 100 + x.ms,
        case when x.f then null else 200 end, x.ms, case when x.f then 'connection_refused' end
      from generate_series(0, ${sql.lit(per - 1)}) g(i)
      cross join (select id, user_id, row_number() over (order by id) - 1 as k from workflows) w
      cross join lateral (select
          ${sql.lit(start)}::bigint + g.i::bigint * ${sql.lit(gap)} + (w.k * 60000 / ${sql.lit(workflows)}) as s,
          g.i < ${sql.lit(per - 1)} and (w.k * 7 + g.i) % ${sql.lit(FAILURE_EVERY)} = 0 as f,
          5 + ((w.k * 31 + g.i * 17) % 60) as ms) x
      order by g.i, w.k`.execute(db),
  );
  await step('job_attempts', () =>
    sql`insert into job_attempts (job_id, attempt, runner_id, started_at, ended_at, end_code, end_message)
      select id, 1, 'runner-history', started_at - 30000, started_at - 100, 'lease_lost', 'The runner stopped renewing its lease.'
      from jobs where attempts = 2`.execute(db),
  );
  // Each finished job's notification (its job.completed or job.failed), and the workflow.recovered one a gap after each failure.
  await step('notifications', () =>
    sql`insert into notifications (id, user_id, workflow_id, dedupe_key, kind, state_change, payload, read_at, created_at, updated_at)
      select gen_random_uuid(), j.user_id, j.workflow_id, j.user_id || ':' || gen_random_uuid(), n.kind, n.state_change,
        json_build_object('title', n.title, 'message', n.message, 'entity_type', n.entity, 'entity_id', n.entity_id, 'workflow_id', j.workflow_id,
          'action_url', n.url, 'state_change', n.state_change)::text,
        n.at + ${sql.lit(DAY)}, n.at, n.at
      from jobs j
      join workflows w on w.id = j.workflow_id
      cross join lateral (
        select case when j.status = 'FAILED' then 'WEB_ERROR' else 'WEB_SUCCESS' end as kind,
          case when j.status = 'FAILED' then 'down' end as state_change,
          case when j.status = 'FAILED' then 'Job failed' else 'Job completed' end as title,
          case when j.status = 'FAILED' then 'A job of workflow "' || w.name || '" failed: Connection refused The workflow is down.'
            else 'A job of workflow "' || w.name || '" completed.' end as message,
          'JOB' as entity, j.id::text as entity_id, '/workflows/' || j.workflow_id || '/jobs/' || j.id as url, j.completed_at as at
        union all
        select 'WEB_SUCCESS', 'recovered', 'Workflow recovered', 'Workflow "' || w.name || '" is up again: a job completed after 1 consecutive failed job.',
          'WORKFLOW', j.workflow_id::text, '/workflows/' || j.workflow_id, j.completed_at + ${sql.lit(gap)}
        where j.status = 'FAILED'
      ) n
      order by j.completed_at`.execute(db),
  );
  await step('incidents', () =>
    sql`insert into incidents (id, user_id, workflow_id, opened_by_job_id, started_at, opened_at, closed_at, resolution,
        first_failure_job_id, first_failure_code, first_failure_message, failed_runs, updated_at)
      select gen_random_uuid(), user_id, workflow_id, id, scheduled_at, completed_at, completed_at + ${sql.lit(gap)}, 'recovered',
        id, 'connection_refused', 'Connection refused', 1, completed_at + ${sql.lit(gap)}
      from jobs where status = 'FAILED'`.execute(db),
  );
  // Running totals up to the end of each job's hour (every job is alone in its hour: the gap is longer).
  await step('workflow_rollups', () =>
    sql`insert into workflow_rollups (workflow_id, hour_at, user_id, runs, failures, ${sql.raw(ROLLUP_BUCKET_COLUMNS.join(', '))})
      select workflow_id, completed_at / ${sql.lit(HOUR)} * ${sql.lit(HOUR)}, user_id,
        count(*) over w, sum(case when status = 'FAILED' then 1 else 0 end) over w, ${sql.raw(sums)}
      from (select j.*, ${sql.raw(bucketOf)} as b from jobs j) j
      window w as (partition by workflow_id order by completed_at rows between unbounded preceding and current row)`.execute(db),
  );
  await step('counters', async () => {
    await sql`insert into workflow_stats (workflow_id, user_id, kind, total_jobs, total_duration_s)
      select workflow_id, user_id, 'HEARTBEAT', count(*), 0 from jobs group by workflow_id, user_id
      on conflict (workflow_id) do update set total_jobs = excluded.total_jobs`.execute(db);
    // The leader's year: one period a week, a minute's gap between them.
    await sql`insert into orloj_uptime (started_at, last_seen_at)
      select ${sql.lit(start)}::bigint + k::bigint * ${sql.lit(7 * DAY)}, ${sql.lit(start)}::bigint + (k::bigint + 1) * ${sql.lit(7 * DAY)} - 60000
      from generate_series(0, ${sql.lit(Math.floor(arg.days / 7) - 1)}) k
      on conflict do nothing`.execute(db);
  });
  // Outside a transaction (VACUUM refuses one); the names resolve in the store's schema.
  await step('vacuum analyze', () =>
    sql`vacuum (analyze) workflows, jobs, job_attempts, notifications, incidents, workflow_rollups, workflow_stats, orloj_uptime`.execute(db),
  );
  const count = async (table: 'jobs' | 'notifications' | 'workflow_rollups' | 'incidents' | 'job_attempts') =>
    Number((await db.selectFrom(table).select((eb) => eb.fn.countAll<string>().as('n')).executeTakeFirstOrThrow()).n);
  return {
    jobs: await count('jobs'),
    notifications: await count('notifications'),
    rollups: await count('workflow_rollups'),
    incidents: await count('incidents'),
    attempts: await count('job_attempts'),
    steps,
  };
}
