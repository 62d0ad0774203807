import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import { newId, systemClock } from '@orloj/common/core';
import { newJob, newWorkflow, type Workflow } from '@orloj/common/domain';
import { silentLogger } from '@orloj/common/logging';
import { openDatabase, Store, type DatabaseHandle } from '@orloj/common/store';
import { RetentionSweeper, DEFAULT_RETENTION_CONFIG, type SweepResult } from '@orloj/scheduler';
import { createBenchSchema, DEFAULT_BENCH_DATABASE_URL, redactUrl } from './lib/postgres.js';
import { envInt, fmt, ms, sleep, summarize, type Summary } from './lib/stats.js';
import type { BenchSuite, SuiteContext } from './lib/suite.js';

const DAY = 86_400_000;
const WORKFLOWS = 1_000;
/** One job in LOGGED_EVERY has log lines. */
const LOGGED_EVERY = 50;
const LINES_PER_LOGGED_JOB = 100;
/** The probe: one scheduler-like write transaction every PROBE_EVERY_MS. */
const PROBE_EVERY_MS = 20;
const IDLE_MS = 5_000;
const TARGET_PROBE_P99_MS = 50;
const TARGET_PROBE_MAX_MS = 500;
const TARGET_STATEMENT_MAX_MS = 250;

type Engine = 'sqlite' | 'postgres';

interface EngineResult {
  engine: Engine;
  where: string;
  seedMs: number;
  jobs: number;
  logLines: number;
  sweepMs: number;
  pruned: SweepResult;
  statements: Record<string, Summary>;
  idle: Summary;
  during: Summary;
}

/**
 * 1M ended jobs of 1,000 workflows, completed evenly over the last 180 days
 * (so half are past RETENTION_JOBS=90d), and 100 log lines (100 bytes each)
 * for one job in 50, all written by SQL in the database.
 */
async function seed(handle: DatabaseHandle, store: Store, jobs: number): Promise<{ workflows: Workflow[]; ms: number; logLines: number }> {
  const started = Date.now();
  const userId = newId();
  await store.users.insert({ id: userId, email: `${userId}@bench.example`, passwordHash: 'x', notificationPreference: 'ALL', createdAt: 0, updatedAt: 0 });
  const workflows: Workflow[] = [];
  for (let i = 0; i < WORKFLOWS; i++) {
    const w = newWorkflow(
      { userId, name: `w${i}`, kind: 'HEARTBEAT', payload: JSON.stringify({ endpoint: 'https://example.com' }), intervalMinutes: 1, maxConsecutiveJobFailuresAllowed: 3 },
      0,
    );
    workflows.push(w);
  }
  await store.transaction(async (tx) => {
    for (const w of workflows) await tx.workflows.insert(w);
  });
  const db = handle.db;
  await sql`create table bench_wf (i integer primary key, id ${sql.raw(handle.dialect.name === 'postgres' ? 'uuid' : 'text')})`.execute(db);
  for (let i = 0; i < workflows.length; i += 200) {
    await db
      .insertInto('bench_wf' as never)
      .values(workflows.slice(i, i + 200).map((w, k) => ({ i: i + k, id: w.id })) as never)
      .execute();
  }
  const now = Date.now();
  const from = now - 180 * DAY;
  const step = Math.floor((180 * DAY) / jobs);
  if (handle.dialect.name === 'postgres') {
    await sql`
      insert into jobs (id, workflow_id, user_id, generation, trigger, status, slot_at, scheduled_at, attempts, started_at, completed_at, created_at, updated_at)
      select gen_random_uuid(), w.id, ${userId}, 0, 'AUTOMATIC', 'COMPLETED', t, t, 1, t, t + 1000, t, t + 1000
      from (select n, ${from}::bigint + n * ${step}::bigint as t from generate_series(0, ${jobs - 1}) n) s
      join bench_wf w on w.i = s.n % ${WORKFLOWS}`.execute(db);
    await sql`
      insert into job_logs (job_id, attempt, sequence_num, stream, message, timestamp)
      select j.id, 1, k, 'stdout', rpad('line ' || k, 100, '.'), j.completed_at
      from jobs j cross join generate_series(0, ${LINES_PER_LOGGED_JOB - 1}) k
      where (j.scheduled_at / ${step}) % ${LOGGED_EVERY} = 0`.execute(db);
    await sql`analyze`.execute(db);
  } else {
    await sql`
      insert into jobs (id, workflow_id, user_id, generation, trigger, status, slot_at, scheduled_at, attempts, started_at, completed_at, created_at, updated_at)
      with recursive seq(n) as (select 0 union all select n + 1 from seq where n < ${jobs - 1})
      select printf('00000000-0000-4000-8000-%012x', n), w.id, ${userId}, 0, 'AUTOMATIC', 'COMPLETED', t, t, 1, t, t + 1000, t, t + 1000
      from (select n, ${from} + n * ${step} as t from seq) s
      join bench_wf w on w.i = s.n % ${WORKFLOWS}`.execute(db);
    await sql`
      insert into job_logs (job_id, attempt, sequence_num, stream, message, timestamp)
      with recursive k(v) as (select 0 union all select v + 1 from k where v < ${LINES_PER_LOGGED_JOB - 1})
      select j.id, 1, k.v, 'stdout', printf('%-100s', 'line ' || k.v), j.completed_at
      from jobs j cross join k
      where ((j.scheduled_at - ${from}) / ${step}) % ${LOGGED_EVERY} = 0`.execute(db);
    await sql`analyze`.execute(db);
  }
  await sql`drop table bench_wf`.execute(db);
  const lines = await db.selectFrom('job_logs').select((eb) => eb.fn.countAll<number | string>().as('n')).executeTakeFirstOrThrow();
  return { workflows, ms: Date.now() - started, logLines: Number(lines.n) };
}

/**
 * What the scheduler leader writes all the time: a job created and moved to
 * an end state in one transaction. Run every PROBE_EVERY_MS until `stop`;
 * returns each transaction's latency.
 */
async function probe(store: Store, workflows: Workflow[], stop: AbortSignal): Promise<number[]> {
  const latencies: number[] = [];
  for (let i = 0; !stop.aborted; i++) {
    const w = workflows[i % workflows.length]!;
    const t0 = performance.now();
    await store.transaction(async (tx) => {
      const now = Date.now();
      const job = newJob(w, 'MANUAL', now, now);
      await tx.jobs.insert(job);
      await tx.jobMoves.transition(job.id, 'CANCELED', now, { completedAt: now });
    });
    latencies.push(performance.now() - t0);
    await sleep(PROBE_EVERY_MS);
  }
  return latencies;
}

/** The store with its retention statements timed, by method. */
function timedStore(store: Store, times: Record<string, number[]>): Store {
  const retention = new Proxy(store.retention, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver) as unknown;
      if (typeof value !== 'function') return value;
      return async (...args: unknown[]) => {
        const t0 = performance.now();
        try {
          return (await (value as (...a: unknown[]) => Promise<unknown>).apply(target, args)) as unknown;
        } finally {
          (times[String(prop)] ??= []).push(performance.now() - t0);
        }
      };
    },
  });
  return Object.assign(Object.create(store) as Store, { retention });
}

async function runEngine(ctx: SuiteContext, engine: Engine, jobs: number): Promise<EngineResult> {
  let where: string;
  let handle: DatabaseHandle;
  let cleanup: () => Promise<void>;
  if (engine === 'sqlite') {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'orloj-bench-retention-'));
    where = 'a temp file';
    handle = openDatabase(`sqlite:${path.join(dir, 'orloj.db')}`);
    cleanup = async () => {
      await handle.close();
      fs.rmSync(dir, { recursive: true, force: true });
    };
  } else {
    const base = process.env.BENCH_DATABASE_URL?.trim() || DEFAULT_BENCH_DATABASE_URL;
    const schema = await createBenchSchema(base);
    where = `fresh schema in ${redactUrl(base)}, dropped after`;
    handle = openDatabase(schema.url);
    cleanup = async () => {
      await handle.close();
      await schema.drop();
    };
  }
  try {
    await handle.migrate();
    const store = Store.fromHandle(handle);
    ctx.log(`${engine}: seeding ${fmt(jobs)} jobs`);
    const seeded = await seed(handle, store, jobs);
    ctx.log(`${engine}: seeded ${fmt(jobs)} jobs and ${fmt(seeded.logLines)} log lines in ${seeded.ms} ms`);

    const idleStop = new AbortController();
    const idleRun = probe(store, seeded.workflows, idleStop.signal);
    await sleep(IDLE_MS);
    idleStop.abort();
    const idle = summarize(await idleRun);

    const times: Record<string, number[]> = {};
    const sweeper = new RetentionSweeper({ store: timedStore(store, times), clock: systemClock, logger: silentLogger, mayRun: () => true });
    const duringStop = new AbortController();
    const duringRun = probe(store, seeded.workflows, duringStop.signal);
    const t0 = Date.now();
    const pruned = await sweeper.sweep();
    const sweepMs = Date.now() - t0;
    duringStop.abort();
    const during = summarize(await duringRun);
    ctx.log(`${engine}: swept in ${sweepMs} ms: ${JSON.stringify(pruned)}`);
    const statements = Object.fromEntries(Object.entries(times).map(([k, v]) => [k, summarize(v)]));
    return { engine, where, seedMs: seeded.ms, jobs, logLines: seeded.logLines, sweepMs, pruned, statements, idle, during };
  } finally {
    await cleanup();
  }
}

export const retention: BenchSuite = {
  name: 'retention',
  title: 'Retention: one sweep over a large jobs table beside the scheduler’s writes',
  async run(ctx) {
    const jobs = envInt('BENCH_RETENTION_JOBS', 1_000_000, 10_000);
    const results: EngineResult[] = [];
    for (const engine of ['sqlite', 'postgres'] as const) results.push(await runEngine(ctx, engine, jobs));
    const c = DEFAULT_RETENTION_CONFIG;
    const rows: string[][] = [];
    for (const r of results) {
      rows.push([
        r.engine,
        `${fmt(r.pruned.jobs)} jobs, ${fmt(r.pruned.logLines)} lines`,
        `${fmt(r.sweepMs / 1000, 1)} s`,
        ...['endedBefore', 'prunable', 'deleteLogLines', 'deleteJobs'].map((k) => {
          const s = r.statements[k];
          return s ? `${ms(s.p50)} / ${ms(s.p99)} / ${ms(s.max)}` : 'n/a';
        }),
        `${ms(r.idle.p50)} / ${ms(r.idle.p99)} / ${ms(r.idle.max)}`,
        `${ms(r.during.p50)} / ${ms(r.during.p99)} / ${ms(r.during.max)} (${fmt(r.during.count)})`,
      ]);
    }
    const verdict = results.map((r) => {
      const worst = Math.max(...Object.values(r.statements).map((s) => s.max));
      const met = r.during.p99 <= TARGET_PROBE_P99_MS && r.during.max <= TARGET_PROBE_MAX_MS && worst <= TARGET_STATEMENT_MAX_MS;
      return `- ${r.engine}: scheduler write p99 ${ms(r.during.p99)} ms, max ${ms(r.during.max)} ms while sweeping; slowest sweep statement ${ms(worst)} ms → **${met ? 'met' : 'not met'}**`;
    });
    return {
      description: `One retention sweep (\`RetentionSweeper.sweep()\`, default settings) over ${fmt(jobs)} ended jobs of ${fmt(WORKFLOWS)} workflows, completed evenly over the last 180 days, with ${LINES_PER_LOGGED_JOB} log lines of 100 bytes for one job in ${LOGGED_EVERY}. Half the jobs are past RETENTION_JOBS and go with their lines; the lines of jobs between RETENTION_JOB_LOGS and RETENTION_JOBS go too. Meanwhile a probe runs what the scheduler leader writes all the time — a job inserted and moved to an end state in one transaction — every ${PROBE_EVERY_MS} ms in the same process (on SQLite: the same connection, as in the embedded server), before the sweep (idle) and during it.`,
      settings: [
        ['Retention', `RETENTION_JOBS ${c.jobsMs! / DAY}d, RETENTION_JOB_LOGS ${c.jobLogsMs! / DAY}d, RETENTION_KEEP_JOBS ${c.keepJobs}, RETENTION_BATCH_SIZE ${c.batchSize}, ${c.pauseMs} ms pause between statements`],
        ['Data', `${fmt(jobs)} jobs (BENCH_RETENTION_JOBS), seeded by SQL; statistics refreshed with ANALYZE`],
        ...results.map((r): [string, string] => [r.engine, `${r.where}; ${fmt(r.jobs)} jobs and ${fmt(r.logLines)} log lines seeded in ${fmt(r.seedMs / 1000, 1)} s`]),
      ],
      table: {
        columns: ['Engine', 'pruned', 'sweep', 'page of ended jobs ms (p50 / p99 / max)', 'which may go', 'delete ≤500 lines', 'delete ≤500 jobs', 'scheduler write, idle', 'scheduler write, during the sweep (count)'],
        rows,
      },
      verdict: [
        `Target: while a sweep runs, the scheduler's write transaction stays at p99 ≤ ${TARGET_PROBE_P99_MS} ms and max ≤ ${TARGET_PROBE_MAX_MS} ms (a tick is 1 s), and no sweep statement takes over ${TARGET_STATEMENT_MAX_MS} ms.`,
        ...verdict,
      ],
      notes: [
        '- Every statement of the sweep touches at most RETENTION_BATCH_SIZE rows and is its own transaction, so the longest the scheduler can wait is one statement; the pause between statements lets its writes in.',
        '- The sweep time is not a target: it runs in the background every RETENTION_INTERVAL, and after the first sweep each one only has an interval’s worth of rows to prune.',
      ],
      valid: results.every((r) => r.pruned.complete && r.pruned.jobs > 0),
    };
  },
};
