// The scheduling suite: how well orloj keeps a schedule of one-minute HEARTBEAT
// workflows on the real clock — embedded (every role in one process, SQLite),
// on an interval and as every-minute cron in mixed time zones, with the roles
// in separate processes (PostgreSQL + RabbitMQ), and a burst of slots due at
// one instant. Each run sets up, measures a window and reads the
// jobs back; the report is bench/lib/scheduling-report.ts's.
import { benchPasswordHash, signIn, timeReads, type ReadTiming } from './lib/api-reads.js';
import { startServer, type ServerProcess } from './lib/child.js';
import { meterCpu, meterMachineCpu, meterOwnCpu, pidsNamed, type CpuMeter } from './lib/cpu.js';
import { DISTRIBUTED_ROLES, startDistributedOrloj, type DistributedOrloj, type DistributedRole } from './lib/distributed.js';
import { startEmbeddedOrloj, usageBetween, type EmbeddedOrloj } from './lib/embedded.js';
import { createBenchDatabase } from './lib/orloj.js';
import { startScheduleDb, type DueOrder, type ScheduleDb } from './lib/schedule-db.js';
import {
  BURST_INTERVAL_MINUTES,
  CRON_SEED,
  cpuText,
  distributedTotal,
  lagText,
  schedulingReport,
  sum,
  type DistributedCpu,
  type Interference,
  type Run,
  type Settings,
  type SteadySchedule,
} from './lib/scheduling-report.js';
import { envInt, fmt, sleep } from './lib/stats.js';
import type { BenchSuite, SuiteContext } from './lib/suite.js';

const DEFAULT_AMQP = 'amqp://guest:guest@127.0.0.1:5672';
/** Slots begin this long after orloj is up and their schedule was moved into place. */
const LEAD_MS = 3_000;
/** Retention of the distributed pair when BENCH_SCHED_HISTORY is set: longer than the generated year. */
const HISTORY_RETENTION = { RETENTION_JOBS: '400d', RETENTION_NOTIFICATIONS: '400d' };

function sizesFrom(value: string, name: string): number[] {
  return value
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .map((s) => {
      const n = Number(s.replace(/_/g, ''));
      if (!Number.isInteger(n) || n < 1) throw new Error(`${name} must list positive integers (got "${s}")`);
      return n;
    });
}

function dueOrderOf(value: string | undefined): DueOrder {
  const order = value?.trim() || 'random';
  if (order !== 'random' && order !== 'ids') throw new Error(`BENCH_SCHED_ORDER must be random or ids (got "${order}")`);
  return order;
}

/**
 * The runner slots an operator gives a fleet of `workflows` one-minute checks
 * (docs/operations.md, "Sizing the runners": checks a second × 0.15 s, with room
 * to spare): twice that, a power of two, at least 64. 100,000 get 512.
 */
export function runnerSlotsFor(workflows: number): number {
  return Math.max(64, 2 ** Math.ceil(Math.log2((workflows / 60) * 0.3)));
}

export function settingsFromEnv(env: NodeJS.ProcessEnv = process.env): Settings {
  const sizes = sizesFrom(env.BENCH_SCHED_SIZES?.trim() || '10000,100000', 'BENCH_SCHED_SIZES');
  const dist = env.BENCH_SCHED_DISTRIBUTED?.trim();
  const distributedSizes = dist === '0' ? [] : dist ? sizesFrom(dist, 'BENCH_SCHED_DISTRIBUTED') : sizes;
  const cron = env.BENCH_SCHED_CRON?.trim();
  const cronSizes = cron === '0' ? [] : cron ? sizesFrom(cron, 'BENCH_SCHED_CRON') : sizes;
  const concurrency = envInt('BENCH_SCHED_CONCURRENCY', 64, 1, env);
  return {
    sizes,
    durationS: envInt('BENCH_SCHED_DURATION', 180, 10, env),
    warmupS: envInt('BENCH_SCHED_WARMUP', 10, 0, env),
    tailS: envInt('BENCH_SCHED_TAIL', 10, 1, env),
    burst: envInt('BENCH_SCHED_BURST', 10_000, 0, env),
    burstTimeoutS: envInt('BENCH_SCHED_BURST_TIMEOUT', 300, 10, env),
    concurrency,
    distributedSlots: env.BENCH_SCHED_CONCURRENCY?.trim() ? concurrency : undefined,
    tick: env.BENCH_SCHED_TICK?.trim() || undefined,
    distributedSizes,
    cronSizes,
    amqpUrl: env.BENCH_AMQP_URL?.trim() || DEFAULT_AMQP,
    historyJobs: envInt('BENCH_SCHED_HISTORY', 0, 0, env),
    reads: envInt('BENCH_SCHED_READS', 50, 0, env),
    dueOrder: dueOrderOf(env.BENCH_SCHED_ORDER),
  };
}

function meterInterference(target: ServerProcess, tool: ScheduleDb): { stop(orlojCpu: number): Interference } {
  const meters: Record<'target' | 'dbTool' | 'loadGenerator' | 'machine', CpuMeter> = {
    target: meterCpu(() => [target.pid]),
    dbTool: meterCpu(() => [tool.pid]),
    loadGenerator: meterOwnCpu(),
    machine: meterMachineCpu(),
  };
  return {
    stop(orlojCpu) {
      const r = { target: meters.target.stop(), dbTool: meters.dbTool.stop(), loadGenerator: meters.loadGenerator.stop() };
      const machine = meters.machine.stop();
      const ours = orlojCpu + (r.target ?? 0) + (r.dbTool ?? 0) + (r.loadGenerator ?? 0);
      return { ...r, other: machine === undefined ? undefined : Math.max(0, machine - ours) };
    },
  };
}

const sleepUntil = (t: number) => sleep(t - Date.now());

/** A fresh SQLite file, the HEARTBEAT target, the db tool with `count` seeded workflows, then orloj over it; all gone after `fn`. */
async function withSetup<T>(
  ctx: SuiteContext,
  s: Settings,
  label: string,
  seed: { count: number; intervalMinutes: number; spreadMs: number; cron?: typeof CRON_SEED },
  env: Record<string, string>,
  fn: (x: { orloj: EmbeddedOrloj; tool: ScheduleDb; target: ServerProcess; seededMs: number; startupMs: number }) => Promise<T>,
): Promise<T> {
  const db = await createBenchDatabase('sqlite');
  const target = await startServer('http-target', {});
  let tool: ScheduleDb | undefined;
  let orloj: EmbeddedOrloj | undefined;
  try {
    tool = await startScheduleDb(db.url);
    const seeded = await tool.seedHeartbeats({ ...seed, endpoint: `${target.url}/health` });
    ctx.log(`${label}: ${fmt(seed.count)} workflows seeded in ${fmt(seeded.ms)} ms (${await tool.engine()}); starting orloj`);
    const started = performance.now();
    orloj = await startEmbeddedOrloj(db.url, {
      RUNNER_CONCURRENCY: String(s.concurrency),
      RUNNER_ALLOW_TARGETS: '127.0.0.0/8',
      ...(s.tick ? { SCHEDULER_TICK: s.tick } : {}),
      ...env,
    });
    const startupMs = Math.round(performance.now() - started);
    return await fn({ orloj, tool, target, seededMs: seeded.ms, startupMs });
  } finally {
    await orloj?.stop().catch((err: unknown) => ctx.log(`${label}: stopping orloj failed: ${String(err)}`));
    await tool?.stop();
    await target.stop();
    await db.drop();
  }
}

/**
 * N one-minute workflows on the real clock: on an interval, their anchors
 * spread over the minute, or as cron `* * * * *` in mixed zones, spread by a
 * jitter of up to 59 s. `variant` names a run with extra environment for orloj
 * (the rollup-cost suite's).
 */
export async function steady(ctx: SuiteContext, s: Settings, n: number, schedule: SteadySchedule, variant?: { label: string; env: Record<string, string> }): Promise<Run> {
  const base =
    schedule === 'interval'
      ? `${fmt(n)} workflows, every minute`
      : `${fmt(n)} cron workflows, \`${CRON_SEED.expression}\` in ${CRON_SEED.zones.length} zones, jitter ≤ ${CRON_SEED.jitterSeconds} s`;
  const label = `${base}${variant ? `, ${variant.label}` : ''}`;
  const seed = { count: n, intervalMinutes: 1, spreadMs: 60_000, dueOrder: s.dueOrder, ...(schedule === 'cron' ? { cron: CRON_SEED } : {}) };
  try {
    return await withSetup(ctx, s, label, seed, variant?.env ?? {}, async ({ orloj, tool, target, seededMs, startupMs }) => {
      // Cron slots are instants of the clock: built just before a minute starts, the window holds whole minutes of them, as the interval run's does.
      const firstDue = schedule === 'cron' ? Math.ceil((Date.now() + LEAD_MS) / 60_000) * 60_000 : Date.now() + LEAD_MS;
      const shifted = await tool.shiftSchedule(firstDue);
      const windowStart = firstDue + s.warmupS * 1000;
      const windowEnd = windowStart + s.durationS * 1000;
      ctx.log(`${label}: orloj up in ${fmt(startupMs)} ms, schedule moved in ${fmt(shifted.ms)} ms; measuring ${s.durationS} s after ${s.warmupS} s warm-up`);
      await sleepUntil(windowStart);
      const u0 = await orloj.usage();
      const endProfile = await orloj.profile(`steady-${n}`);
      const requests0 = (await target.call<{ requests: number }>('stats')).requests;
      const meters = meterInterference(target, tool);
      const progress = meterCpu(() => [orloj.pid]);
      for (let t = windowStart + 30_000; t < windowEnd; t += 30_000) {
        await sleepUntil(t);
        const r = (await target.call<{ requests: number }>('stats')).requests;
        ctx.log(`${label}: ${Math.round((t - windowStart) / 1000)} s, ${fmt((r - requests0) / ((t - windowStart) / 1000))} checks/s (needed ${fmt(n / 60)}), orloj CPU ${fmt(progress.stop() ?? Number.NaN)} % so far`);
      }
      await sleepUntil(windowEnd);
      const u1 = await orloj.usage();
      const usage = usageBetween(u0, u1);
      const interference = meters.stop(usage.cpuPercent);
      const requests1 = (await target.call<{ requests: number }>('stats')).requests;
      const profileFile = await endProfile();
      if (profileFile) ctx.log(`${label}: CPU profile of the window in ${profileFile}`);
      await sleepUntil(windowEnd + s.tailS * 1000);
      const stopAt = Date.now();
      await orloj.stop();
      const analysis = await tool.analyzeWindow({ windowStart, windowEnd, stopAt });
      ctx.log(
        `${label}: ${fmt(analysis.completedInWindow / s.durationS, 1)} jobs/s, missed ${fmt(analysis.skipped)} + ${fmt(analysis.noJob)} of ${fmt(analysis.dueSlots)}, lag p50 ${lagText(analysis.lag.p50)} p99 ${lagText(analysis.lag.p99)} ms, CPU ${fmt(usage.cpuPercent)} %`,
      );
      return { kind: 'steady', schedule, label, workflows: n, seededMs, startupMs, usage, interference, targetRequests: requests1 - requests0, analysis, windowS: s.durationS };
    });
  } catch (err) {
    ctx.log(`${label}: FAILED: ${err instanceof Error ? err.message : String(err)}`);
    return { kind: 'failed', label, failure: err instanceof Error ? err.message : String(err) };
  }
}

/** The steady run with api, scheduler, runners, log-ingest and notifier in separate processes on PostgreSQL + RabbitMQ. */
async function steadyDistributed(ctx: SuiteContext, s: Settings, n: number, historyJobs = 0): Promise<Run> {
  const slots = s.distributedSlots ?? runnerSlotsFor(n);
  const label = `${fmt(n)} workflows, every minute, roles in separate processes (PostgreSQL + RabbitMQ, ${fmt(slots)} runner slots)${historyJobs ? `, over a year of history (${fmt(historyJobs)} jobs)` : ''}`;
  const db = await createBenchDatabase('postgres');
  const target = await startServer('http-target', {});
  let tool: ScheduleDb | undefined;
  let orloj: DistributedOrloj | undefined;
  try {
    tool = await startScheduleDb(db.url);
    const seeded = await tool.seedHeartbeats({ count: n, intervalMinutes: 1, spreadMs: 60_000, dueOrder: s.dueOrder, endpoint: `${target.url}/health`, passwordHash: await benchPasswordHash() });
    ctx.log(`${label}: ${fmt(n)} workflows seeded in ${fmt(seeded.ms)} ms (${await tool.engine()})`);
    const history = historyJobs ? await tool.seedHistory({ jobs: historyJobs, days: 365 }) : undefined;
    if (history) ctx.log(`${label}: history generated in ${fmt(history.ms)} ms ${JSON.stringify(history)}`);
    ctx.log(`${label}: starting the roles`);
    const started = performance.now();
    orloj = await startDistributedOrloj(db.url, s.amqpUrl, {
      RUNNER_CONCURRENCY: String(slots),
      RUNNER_ALLOW_TARGETS: '127.0.0.0/8',
      ...(s.tick ? { SCHEDULER_TICK: s.tick } : {}),
      // A year held: the default retention (90 days) would spend the run deleting three quarters of it. Both rows of the pair alike.
      ...(s.historyJobs ? HISTORY_RETENTION : {}),
    });
    const startupMs = Math.round(performance.now() - started);
    const firstDue = Date.now() + LEAD_MS;
    const shifted = await tool.shiftSchedule(firstDue);
    const windowStart = firstDue + s.warmupS * 1000;
    const windowEnd = windowStart + s.durationS * 1000;
    ctx.log(`${label}: roles up in ${fmt(startupMs)} ms, schedule moved in ${fmt(shifted.ms)} ms; measuring ${s.durationS} s after ${s.warmupS} s warm-up`);
    await sleepUntil(windowStart);
    const backends = await orloj.backendPids();
    const pids = orloj.pids;
    const roleMeters = DISTRIBUTED_ROLES.map((role) => [role, meterCpu(() => [pids[role]])] as const);
    const meters = {
      backends: meterCpu(() => backends),
      postgresAll: meterCpu(() => pidsNamed('postgres')),
      broker: meterCpu(() => pidsNamed('beam.smp')),
      target: meterCpu(() => [target.pid]),
      dbTool: meterCpu(() => [tool!.pid]),
      machine: meterMachineCpu(),
    };
    const requests0 = (await target.call<{ requests: number }>('stats')).requests;
    for (let t = windowStart + 30_000; t < windowEnd; t += 30_000) {
      await sleepUntil(t);
      const r = (await target.call<{ requests: number }>('stats')).requests;
      ctx.log(`${label}: ${Math.round((t - windowStart) / 1000)} s, ${fmt((r - requests0) / ((t - windowStart) / 1000))} checks/s (needed ${fmt(n / 60)})`);
    }
    await sleepUntil(windowEnd);
    const roles = Object.fromEntries(roleMeters.map(([role, m]) => [role, m.stop()])) as Record<DistributedRole, number | undefined>;
    const cpu: Omit<DistributedCpu, 'other'> = {
      roles,
      backends: meters.backends.stop(),
      postgresAll: meters.postgresAll.stop(),
      broker: meters.broker.stop(),
      target: meters.target.stop(),
      dbTool: meters.dbTool.stop(),
    };
    const machine = meters.machine.stop();
    const ours = sum([...Object.values(roles), cpu.postgresAll, cpu.broker, cpu.target, cpu.dbTool]);
    const requests1 = (await target.call<{ requests: number }>('stats')).requests;
    await sleepUntil(windowEnd + s.tailS * 1000);
    const stopAt = Date.now();
    // A failed read is reported, not taken for a failed run: the window is measured already.
    const reads = s.reads
      ? await apiReads(orloj, tool, seeded.email, s.reads).catch((err: unknown) => {
          ctx.log(`${label}: api reads FAILED: ${String(err)}`);
          return undefined;
        })
      : undefined;
    if (reads) ctx.log(`${label}: api reads ${JSON.stringify(reads)}`);
    await orloj.stop();
    orloj = undefined;
    const analysis = await tool.analyzeWindow({ windowStart, windowEnd, stopAt });
    if (analysis.completedWithoutRunner) ctx.log(`${label}: ${fmt(analysis.completedWithoutRunner)} jobs completed with no runner recorded (a start applied after its result)`);
    const full: DistributedCpu = { ...cpu, other: machine === undefined ? undefined : Math.max(0, machine - ours) };
    ctx.log(
      `${label}: ${fmt(analysis.completedInWindow / s.durationS, 1)} jobs/s, missed ${fmt(analysis.skipped)} + ${fmt(analysis.noJob)} of ${fmt(analysis.dueSlots)}, lag p50 ${lagText(analysis.lag.p50)} p99 ${lagText(analysis.lag.p99)} ms, CPU ${fmt(distributedTotal(full))} % (${cpuText(full)})`,
    );
    return { kind: 'distributed', label, workflows: n, seededMs: seeded.ms, startupMs, targetRequests: requests1 - requests0, analysis, windowS: s.durationS, cpu: full, history, reads };
  } catch (err) {
    ctx.log(`${label}: FAILED: ${err instanceof Error ? err.message : String(err)}`);
    return { kind: 'failed', label, failure: err instanceof Error ? err.message : String(err) };
  } finally {
    await orloj?.stop().catch((err: unknown) => ctx.log(`${label}: stopping orloj failed: ${String(err)}`));
    await tool?.stop();
    await target.stop();
    // BENCH_SCHED_KEEP_HISTORY=1 leaves the filled schema for EXPLAIN (drop it by hand after).
    if (historyJobs && process.env.BENCH_SCHED_KEEP_HISTORY === '1') ctx.log(`${label}: schema kept: ${db.url}`);
    else await db.drop();
  }
}

/** The api reads of issue 28, target 3, as the seeded user: the list's first page with health, a finished job's workflow jobs and the job. */
async function apiReads(orloj: DistributedOrloj, tool: ScheduleDb, email: string, calls: number): Promise<ReadTiming[]> {
  const cookie = await signIn(orloj.url, email);
  const job = await tool.someFinishedJob();
  if (!job) throw new Error('no COMPLETED job to read');
  return timeReads(
    orloj.url,
    cookie,
    [
      { label: 'GET /workflows?include=health', path: '/workflows?include=health' },
      { label: 'GET /workflows/{id}/jobs', path: `/workflows/${job.workflow_id}/jobs` },
      // A HEARTBEAT job keeps no log lines (its logs page answers 412): the job's own page instead.
      { label: 'GET /workflows/{id}/jobs/{job_id}', path: `/workflows/${job.workflow_id}/jobs/${job.id}` },
    ],
    calls,
  );
}

async function burst(ctx: SuiteContext, s: Settings, n: number): Promise<Run> {
  const label = `burst: ${fmt(n)} workflows due at one instant`;
  try {
    return await withSetup(ctx, s, label, { count: n, intervalMinutes: BURST_INTERVAL_MINUTES, spreadMs: 0 }, {}, async ({ orloj, tool, target, seededMs, startupMs }) => {
      const slotAt = Date.now() + LEAD_MS;
      await tool.shiftSchedule(slotAt);
      ctx.log(`${label}: orloj up in ${fmt(startupMs)} ms; slot at +${LEAD_MS / 1000} s, waiting for every job to complete (at most ${s.burstTimeoutS} s)`);
      await sleepUntil(slotAt);
      const u0 = await orloj.usage();
      const endProfile = await orloj.profile(`burst-${n}`);
      const requests0 = (await target.call<{ requests: number }>('stats')).requests;
      const meters = meterInterference(target, tool);
      const deadline = slotAt + s.burstTimeoutS * 1000;
      let drained = false;
      let lastLog = Date.now();
      while (Date.now() < deadline) {
        await sleep(250);
        const p = await tool.slotProgress(slotAt);
        if ((p.COMPLETED ?? 0) >= n) {
          drained = true;
          break;
        }
        if (Date.now() - lastLog >= 10_000) {
          lastLog = Date.now();
          ctx.log(`${label}: +${fmt((Date.now() - slotAt) / 1000)} s ${JSON.stringify(p)}`);
        }
      }
      const u1 = await orloj.usage();
      const usage = usageBetween(u0, u1);
      const interference = meters.stop(usage.cpuPercent);
      const requests1 = (await target.call<{ requests: number }>('stats')).requests;
      const profileFile = await endProfile();
      if (profileFile) ctx.log(`${label}: CPU profile of the drain in ${profileFile}`);
      const stopAt = Date.now();
      await orloj.stop();
      const analysis = await tool.analyzeSlot({ slotAt, stopAt });
      ctx.log(`${label}: ${drained ? `drained in ${fmt(analysis.lastCompleted)} ms` : 'NOT drained'}; lag p50 ${lagText(analysis.lag.p50)} p99 ${lagText(analysis.lag.p99)} ms`);
      return { kind: 'burst', label, workflows: n, seededMs, startupMs, usage, interference, targetRequests: requests1 - requests0, analysis, drained };
    });
  } catch (err) {
    ctx.log(`${label}: FAILED: ${err instanceof Error ? err.message : String(err)}`);
    return { kind: 'failed', label, failure: err instanceof Error ? err.message : String(err) };
  }
}

export const scheduling: BenchSuite = {
  name: 'scheduling',
  title: 'Scheduling: one-minute HEARTBEAT workflows on the embedded orloj (real clock)',

  async run(ctx) {
    const s = settingsFromEnv();
    const runs: Run[] = [];
    for (const n of s.sizes) {
      runs.push(await steady(ctx, s, n, 'interval'));
      // Right after the interval run of the same size, so their CPU per job compares on the same machine load.
      if (s.cronSizes.includes(n)) runs.push(await steady(ctx, s, n, 'cron'));
      if (s.distributedSizes.includes(n)) {
        runs.push(await steadyDistributed(ctx, s, n));
        if (s.historyJobs) runs.push(await steadyDistributed(ctx, s, n, s.historyJobs));
      }
    }
    for (const n of s.distributedSizes.filter((d) => !s.sizes.includes(d))) {
      runs.push(await steadyDistributed(ctx, s, n));
      if (s.historyJobs) runs.push(await steadyDistributed(ctx, s, n, s.historyJobs));
    }
    if (s.burst > 0) runs.push(await burst(ctx, s, s.burst));

    return schedulingReport(runs, s);
  },
};
