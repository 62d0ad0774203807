// The embedded-api suite: orloj as most people run it — `orloj start` of the
// built tree (one process, SQLite, the in-process bus), every setting default
// but the per-user caps and the rate limit — set up as a user sets it up: one
// user signs up and creates one-minute HEARTBEAT checks through the API. Then
// a measured window on the real clock. The same, in the same run, against an
// older commit built from history (BENCH_BASELINE, default 9872053).
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import { buildFromHistory } from './lib/baseline.js';
import { REPO_ROOT, startServer, type ServerProcess } from './lib/child.js';
import { meterCpu, meterMachineCpu, meterOwnCpu } from './lib/cpu.js';
import { registerUser } from './lib/orloj.js';
import { startOrlojProcess, type OrlojProcess } from './lib/orloj-process.js';
import { lagText } from './lib/scheduling-report.js';
import { readWindow } from './lib/store-file.js';
import type { WindowAnalysis } from './lib/window-analysis.js';
import { envInt, fmt, mib, ms, sleep, type Summary } from './lib/stats.js';
import type { BenchSuite, SuiteContext } from './lib/suite.js';
import { createHeartbeats, type CreateResult } from './lib/user-session.js';
import { codeVersion } from './lib/versions.js';

const DEFAULT_BASELINE = '9872053';
// Issue 32's targets: CPU per check at 12,000 ≤ 0.35× the baseline's and peak RSS ≤ its; 60,000 with 0 missed slots under 60 % of a core; the last 1,000 creates' p99 ≤ 1.5× the first 1,000's.
const TARGET_CPU_RATIO = 0.35;
const TARGET_CPU_N = 12_000;
const TARGET_CEILING_N = 60_000;
const TARGET_CEILING_CPU = 60;
const TARGET_CREATE_RATIO = 1.5;

/**
 * What differs from the defaults, in both versions. The caps and the rate
 * limit would stop one user creating thousands of checks at N/60 a second;
 * 127.0.0.0/8 is where the target listens (refused by default).
 */
const ORLOJ_ENV: Record<string, string> = {
  MAX_WORKFLOWS_PER_USER: '10000000',
  MAX_ACTIVE_JOBS_PER_USER: '1000000',
  RATE_LIMIT_ENABLED: 'false',
  RUNNER_ALLOW_TARGETS: '127.0.0.0/8',
  // A preload for profiling or counting (bench/tools/count-sqlite-statements.cjs); not part of a measured run.
  ...(process.env.BENCH_EMBEDDED_NODE_OPTIONS ? { NODE_OPTIONS: process.env.BENCH_EMBEDDED_NODE_OPTIONS } : {}),
};

interface Settings {
  sizes: number[];
  windowS: number;
  warmupS: number;
  tailS: number;
  connections: number;
  /** Commit-ish measured beside this tree; undefined: none. */
  baseline: string | undefined;
  baselineDir: string | undefined;
}

function settingsFromEnv(env: NodeJS.ProcessEnv = process.env): Settings {
  const sizes = (env.BENCH_WORKFLOWS?.trim() || '12000').split(',').map((s) => {
    const n = Number(s.trim().replace(/_/g, ''));
    if (!Number.isInteger(n) || n < 60) throw new Error(`BENCH_WORKFLOWS must list integers ≥ 60 (got "${s}")`);
    return n;
  });
  const baseline = env.BENCH_BASELINE?.trim() ?? DEFAULT_BASELINE;
  return {
    sizes,
    windowS: envInt('BENCH_WINDOW', 180, 10),
    warmupS: envInt('BENCH_EMBEDDED_WARMUP', 60, 0),
    tailS: envInt('BENCH_EMBEDDED_TAIL', 10, 1),
    connections: envInt('BENCH_EMBEDDED_CONNECTIONS', 64, 1),
    baseline: baseline === '' || baseline === 'none' ? undefined : baseline,
    baselineDir: env.BENCH_BASELINE_DIR?.trim() || undefined,
  };
}

/** A built tree to measure. */
interface Version {
  label: string;
  root: string;
  how: string;
}

interface Measured {
  kind: 'measured';
  version: Version;
  workflows: number;
  loadAverage: number[];
  startupMs: number;
  create: CreateResult;
  windowS: number;
  cpu: number | undefined;
  memory: { peak: number; current: number } | undefined;
  targetRequests: number;
  elsewhere: { target: number | undefined; loadGenerator: number | undefined; other: number | undefined };
  store: WindowAnalysis;
  outputBytes: number;
}
type Run = Measured | { kind: 'failed'; version: Version; workflows: number; failure: string };

const sleepUntil = (t: number) => sleep(t - Date.now());
const pct = (n: number | undefined) => (n === undefined || !Number.isFinite(n) ? 'n/a' : `${fmt(n)} %`);

/** `node scripts/build.mjs`, as `npm start` runs it before the server (it skips what is up to date). */
function buildThisTree(): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['scripts/build.mjs'], { cwd: REPO_ROOT, stdio: 'inherit' });
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`scripts/build.mjs exited ${code}`))));
  });
}

async function measure(ctx: SuiteContext, s: Settings, version: Version, n: number): Promise<Run> {
  const label = `${version.label}, ${fmt(n)} workflows`;
  const loadAverage = os.loadavg().map((l) => Math.round(l * 100) / 100);
  let target: ServerProcess | undefined;
  let orloj: OrlojProcess | undefined;
  try {
    target = await startServer('http-target', {});
    const started = performance.now();
    orloj = await startOrlojProcess(version.root, ORLOJ_ENV);
    const startupMs = Math.round(performance.now() - started);
    const { cookie } = await registerUser(orloj.url);
    ctx.log(`${label}: up in ${fmt(startupMs)} ms (load ${loadAverage.join(', ')}); creating ${fmt(n)} workflows at ${fmt(n / 60, 1)}/s`);
    const create = await createHeartbeats({ url: orloj.url, cookie, count: n, endpoint: `${target.url}/health`, connections: s.connections, log: (m) => ctx.log(`${label}: ${m}`) });
    const failedCreates = n - (create.statuses['201'] ?? 0);
    ctx.log(
      `${label}: created in ${fmt(create.ms / 1000, 1)} s, p99 first ${fmt(create.k)} ${ms(create.first.p99)} ms, last ${ms(create.last.p99)} ms${failedCreates ? `; ${failedCreates} failed: ${create.firstError}` : ''}`,
    );
    // The warm-up starts at the last answer: every workflow's first slot (a minute after its build) lies in it when it is at least 60 s.
    const windowStart = create.endedAt + s.warmupS * 1000;
    const windowEnd = windowStart + s.windowS * 1000;
    await sleepUntil(windowStart);
    const pid = orloj.pid;
    const meters = { orloj: meterCpu(() => [pid]), target: meterCpu(() => [target!.pid]), own: meterOwnCpu(), machine: meterMachineCpu() };
    const progress = meterCpu(() => [pid]);
    const requests0 = (await target.call<{ requests: number }>('stats')).requests;
    for (let t = windowStart + 30_000; t < windowEnd; t += 30_000) {
      await sleepUntil(t);
      const r = (await target.call<{ requests: number }>('stats')).requests;
      ctx.log(`${label}: ${Math.round((t - windowStart) / 1000)} s, ${fmt((r - requests0) / ((t - windowStart) / 1000))} checks/s (needed ${fmt(n / 60)}), orloj CPU ${pct(progress.stop())} so far`);
    }
    await sleepUntil(windowEnd);
    const cpu = meters.orloj.stop();
    const elsewhere = { target: meters.target.stop(), loadGenerator: meters.own.stop(), other: undefined as number | undefined };
    const machine = meters.machine.stop();
    if (machine !== undefined) elsewhere.other = Math.max(0, machine - (cpu ?? 0) - (elsewhere.target ?? 0) - (elsewhere.loadGenerator ?? 0));
    const memory = orloj.memory();
    const targetRequests = (await target.call<{ requests: number }>('stats')).requests - requests0;
    await sleepUntil(windowEnd + s.tailS * 1000);
    const stopAt = Date.now();
    await orloj.stop();
    const store = readWindow(orloj.databaseFile, { windowStart, windowEnd, stopAt });
    const outputBytes = fs.statSync(orloj.outputFile).size;
    ctx.log(
      `${label}: ${fmt(targetRequests / s.windowS, 1)} checks/s, missed ${fmt(store.skipped)} + ${fmt(store.noJob)} of ${fmt(store.dueSlots)}, lag p50 ${lagText(store.lag.p50)} p99 ${lagText(store.lag.p99)} ms, CPU ${pct(cpu)}, peak RSS ${memory ? mib(memory.peak) : 'n/a'}`,
    );
    return { kind: 'measured', version, workflows: n, loadAverage, startupMs, create, windowS: s.windowS, cpu, memory, targetRequests, elsewhere, store, outputBytes };
  } catch (err) {
    const failure = err instanceof Error ? err.message : String(err);
    ctx.log(`${label}: FAILED: ${failure}`);
    if (orloj) ctx.log(`${label}: orloj's output is in ${orloj.outputFile}`);
    return { kind: 'failed', version, workflows: n, failure };
  } finally {
    await orloj?.stop().catch((err: unknown) => ctx.log(`${label}: stopping orloj failed: ${String(err)}`));
    await target?.stop();
    if (orloj && !process.env.BENCH_KEEP_DATA) orloj.remove();
  }
}

/** CPU time of the orloj process per check it delivered in the window (ms). */
const cpuPerCheck = (r: Measured) => (r.cpu === undefined ? Number.NaN : ((r.cpu / 100) * r.windowS * 1000) / r.store.completedInWindow);
const missed = (r: Measured) => r.store.skipped + r.store.noJob;
const summaryText = (x: Summary) => `${ms(x.p50)} / ${ms(x.p99)}`;

/** Rows: one metric of one size; columns: the versions. */
function tableOf(runs: readonly Run[], versions: readonly Version[], sizes: readonly number[]): { columns: string[]; rows: string[][] } {
  const rows: string[][] = [];
  const metric = (n: number, name: string, cell: (r: Measured) => string) => {
    rows.push([
      `${fmt(n)} workflows: ${name}`,
      ...versions.map((v) => {
        const r = runs.find((x) => x.version === v && x.workflows === n);
        if (!r) return '—';
        return r.kind === 'failed' ? `not measured: ${r.failure.split('\n')[0]}` : cell(r);
      }),
    ]);
  };
  for (const n of sizes) {
    metric(n, `created through the API (paced at ${fmt(n / 60, 1)}/s)`, (r) => `${fmt(r.create.ms / 1000, 1)} s (${fmt(n / (r.create.ms / 1000), 1)}/s), ${fmt(n - (r.create.statuses['201'] ?? 0))} not 201`);
    metric(n, 'create call p50 / p99 ms, first → last', (r) => `${summaryText(r.create.first)} → ${summaryText(r.create.last)} (${fmt(r.create.k)} calls each)`);
    metric(n, 'checks/s delivered', (r) => `${fmt(r.targetRequests / r.windowS, 1)} (needed ${fmt(n / 60, 1)})`);
    metric(n, 'orloj CPU, whole process', (r) => pct(r.cpu));
    metric(n, 'CPU per check', (r) => `${fmt(cpuPerCheck(r), 2)} ms`);
    metric(n, 'peak RSS', (r) => (r.memory ? mib(r.memory.peak) : 'n/a'));
    metric(n, 'lag p50 / p99 / max ms', (r) => `${lagText(r.store.lag.p50)} / ${lagText(r.store.lag.p99)} / ${lagText(r.store.lag.max)}`);
    metric(n, 'missed slots', (r) => `${fmt(missed(r))} of ${fmt(r.store.dueSlots)} (${fmt(r.store.skipped)} skipped, ${fmt(r.store.noJob)} no job)`);
    metric(n, 'FAILED jobs (whole run)', (r) => fmt(r.store.allJobs.FAILED ?? 0));
    metric(n, 'load average at start (1 min)', (r) => fmt(r.loadAverage[0] ?? Number.NaN, 2));
  }
  return { columns: ['', ...versions.map((v) => v.label)], rows };
}

/** Issue 32's targets 2-4: each where its size was measured (other sizes: the same ratios, for orientation only). */
function verdictOf(runs: readonly Run[], current: Version, baseline: Version | undefined, sizes: readonly number[]): string[] {
  const get = (v: Version | undefined, n: number) => runs.find((r): r is Measured => r.kind === 'measured' && r.version === v && r.workflows === n);
  const out = [
    `Targets (issue 32): at ${fmt(TARGET_CPU_N)} workflows CPU per check ≤ ${TARGET_CPU_RATIO}× and peak RSS ≤ the baseline's; at ${fmt(TARGET_CEILING_N)}, 0 missed slots under ${TARGET_CEILING_CPU} % of a core; the p99 of the last 1,000 creates of ${fmt(TARGET_CEILING_N)} within ${TARGET_CREATE_RATIO}× the first 1,000's.`,
    '',
  ];
  for (const n of sizes) {
    const c = get(current, n);
    const b = get(baseline, n);
    const scope = (target: number) => (n === target ? '' : ` (target set at ${fmt(target)}; here for orientation)`);
    if (!c) {
      out.push(`- ${fmt(n)}: ${current.label} **not measured**`);
      continue;
    }
    if (b) {
      const ratio = cpuPerCheck(c) / cpuPerCheck(b);
      const rss = c.memory && b.memory ? c.memory.peak / b.memory.peak : Number.NaN;
      const ok = ratio <= TARGET_CPU_RATIO && rss <= 1;
      out.push(
        `- ${fmt(n)}: CPU per check ${fmt(ratio, 2)}× ${baseline!.label}'s (${fmt(cpuPerCheck(c), 2)} against ${fmt(cpuPerCheck(b), 2)} ms), peak RSS ${fmt(rss, 2)}×${scope(TARGET_CPU_N)} → **${ok ? 'met' : 'missed'}**`,
      );
    }
    const okCeiling = missed(c) === 0 && (c.cpu ?? Infinity) < TARGET_CEILING_CPU;
    out.push(`- ${fmt(n)}: ${fmt(missed(c))} missed slots, ${pct(c.cpu)} of a core${scope(TARGET_CEILING_N)} → **${okCeiling ? 'met' : 'missed'}**`);
    const createRatio = c.create.last.p99 / c.create.first.p99;
    out.push(
      `- ${fmt(n)}: create p99, last ${fmt(c.create.k)} ${ms(c.create.last.p99)} ms = ${fmt(createRatio, 2)}× the first ${fmt(c.create.k)}'s${scope(TARGET_CEILING_N)} → **${createRatio <= TARGET_CREATE_RATIO ? 'met' : 'missed'}**`,
    );
  }
  return out;
}

function notesOf(runs: readonly Run[]): string[] {
  const notes = [
    '- Each version ran alone, one after the other, on the same machine; the load average of each run is in the table. CPU: user + system time of the orloj process from /proc over the window (100 % = one core); CPU per check divides it by the jobs COMPLETED in the window. Peak RSS: VmHWM of the process, its whole life (creation included). Checks/s: requests the target answered in the window.',
    '- Lag = `started_at − slot_at` of the job; slots fall at `build_completed_at` + k minutes. Missed: a slot due in the window without its AUTOMATIC job, skipped (the workflow has a job for a later slot) or with none at all when orloj stopped. Read from the SQLite file with plain SQL after orloj stopped, the same rule as the scheduling suite (bench/lib/window-analysis.ts).',
    '- Create calls: `POST /workflows` with a fresh `Idempotency-Key`, the session and CSRF cookies, sent on a fixed pace of N/60 a second over at most BENCH_EMBEDDED_CONNECTIONS keep-alive connections (undici), timed from send to the end of the answer; the first and last 1,000 (fewer when N < 2,000: then the halves).',
  ];
  for (const r of runs) {
    if (r.kind !== 'measured') continue;
    const label = `${r.version.label}, ${fmt(r.workflows)} workflows`;
    const f = Object.entries(r.store.failures);
    notes.push(
      `- ${label}: up in ${fmt(r.startupMs)} ms; create answers ${JSON.stringify(r.create.statuses)}${r.create.firstError ? ` (first error: ${r.create.firstError.split('\n')[0]})` : ''}; CPU elsewhere: target ${pct(r.elsewhere.target)}, load generator ${pct(r.elsewhere.loadGenerator)}, other processes ${pct(r.elsewhere.other)}; RSS at the end of the window ${r.memory ? mib(r.memory.current) : 'n/a'}; its output (LOG_LEVEL default) ${fmt(r.outputBytes / 1024)} KiB; jobs at the end ${JSON.stringify(r.store.allJobs)}${f.length ? `; FAILED by reason: ${f.map(([k, v]) => `${fmt(v)} × ${k}`).join('; ')}` : ''}.`,
    );
    if ((r.elsewhere.other ?? 0) > 25) notes.push(`- **Disturbed**: other processes used ${pct(r.elsewhere.other)} of a core during "${label}".`);
  }
  return notes;
}

/**
 * Sizes below the targets', or a machine busy with other work, test the suite
 * rather than measure orloj: the section then says so first.
 */
function smokeNote(runs: readonly Run[], sizes: readonly number[]): string | undefined {
  const cores = os.availableParallelism();
  const loads = runs.flatMap((r) => (r.kind === 'measured' ? [r.loadAverage[0] ?? 0] : []));
  const small = sizes.every((n) => n < TARGET_CPU_N);
  const busy = loads.some((l) => l > cores / 2);
  if (!small && !busy) return undefined;
  const why = [
    small ? `N = ${sizes.map((n) => fmt(n)).join(', ')}, below the ${fmt(TARGET_CPU_N)} and ${fmt(TARGET_CEILING_N)} the targets are set at` : '',
    busy ? `the machine was busy with other work (1-minute load average ${loads.map((l) => fmt(l, 2)).join(' and ')} on ${cores} cores when the runs started)` : '',
  ].filter(Boolean);
  return `**Smoke run, not a measurement**: ${why.join('; ')}. It shows that the suite works end to end against both versions; its figures are not issue 32's. Full runs (\`BENCH_WORKFLOWS=12000,60000\`) belong on a quiet machine.`;
}

export const embeddedApi: BenchSuite = {
  name: 'embedded-api',
  title: 'The embedded default as a user runs it: checks created through the API, against 9872053',

  async run(ctx) {
    const s = settingsFromEnv();
    ctx.log('building this tree (node scripts/build.mjs, as npm start does)');
    await buildThisTree();
    const current: Version = { label: `this tree (${codeVersion()})`, root: REPO_ROOT, how: '`node scripts/build.mjs` (what `npm start` runs first)' };
    let baseline: Version | undefined;
    let baselineFailure: string | undefined;
    if (s.baseline) {
      try {
        const built = await buildFromHistory(s.baseline, s.baselineDir, ctx.log);
        baseline = { label: `commit ${built.short}`, root: built.root, how: built.how };
      } catch (err) {
        baselineFailure = err instanceof Error ? err.message : String(err);
        ctx.log(`baseline ${s.baseline} could not be built: ${baselineFailure}`);
      }
    }
    const versions = baseline ? [current, baseline] : [current];
    const runs: Run[] = [];
    for (const n of s.sizes) for (const v of versions) runs.push(await measure(ctx, s, v, n));

    const description = [
      'orloj as most people run it, set up as a user sets it up. `node server/dist/bin.js start` of the built tree (what `npm start` runs): one process with every role, SQLite in DATA_DIR, the in-process bus, every setting default except the per-user caps and the rate limit (below).',
      'One user signs up through `POST /auth/register` and creates N one-minute HEARTBEAT workflows through `POST /workflows`, paced at N/60 a second so that their builds, and so their slots, spread over the minute; each check is one GET to a local node:http target in another process that answers 200 at once.',
      'After the last create a warm-up (every workflow has had its first slot), then a measured window on the real clock; orloj is stopped a tail after it and its SQLite file is read. The same, one after the other on the same machine, against the baseline commit built from history.',
      'The scheduling suite\'s rows (workflows inserted straight into SQLite, the orloj process started from the TypeScript sources) stay the second view.',
    ].join(' ');
    const settings: Array<[string, string]> = [
      ['Code', `${codeVersion()}, built by ${current.how}`],
      ['Baseline', baseline ? `${baseline.label}: ${baseline.how}` : s.baseline ? `${s.baseline}: not built (${baselineFailure?.split('\n')[0]})` : 'none (BENCH_BASELINE=none)'],
      ['orloj', `only DATA_DIR (a temp dir), \`PORT=0\` and ${Object.entries(ORLOJ_ENV).map(([k, v]) => `\`${k}=${v}\``).join(', ')}; nothing else in its environment but PATH and HOME (so \`RUNNER_CONCURRENCY\`, \`SCHEDULER_TICK\`, \`LOG_LEVEL\`… at their defaults; NODE_ENV unset). The baseline has no per-user caps; it ignores those two variables`],
      ['Run', `N = ${s.sizes.map((n) => fmt(n)).join(' and ')}; creation at N/60 a second on at most ${s.connections} connections, then ${s.warmupS} s of warm-up after the last answer, ${s.windowS} s measured, orloj stopped ${s.tailS} s later`],
      ['Overrides', 'BENCH_WORKFLOWS (comma-separated N, default 12000; 12000,60000 for every target of issue 32), BENCH_WINDOW (s, 180), BENCH_EMBEDDED_WARMUP (s after the last create, 60), BENCH_EMBEDDED_TAIL (s, 10), BENCH_EMBEDDED_CONNECTIONS (64), BENCH_BASELINE (commit-ish, default 9872053; none skips), BENCH_BASELINE_DIR (its build, default <tmp>/orloj-bench-<hash>, kept for the next run), BENCH_KEEP_DATA (keep each run\'s DATA_DIR: SQLite file and output)'],
    ];
    const valid = runs.every((r) => r.kind === 'measured' && (r.create.statuses['201'] ?? 0) === r.workflows) && (!s.baseline || baseline !== undefined);
    const smoke = smokeNote(runs, s.sizes);
    return {
      description: smoke ? `${smoke}\n\n${description}` : description,
      settings,
      table: tableOf(runs, versions, s.sizes),
      verdict: verdictOf(runs, current, baseline, s.sizes),
      notes: notesOf(runs),
      valid,
    };
  },
};
