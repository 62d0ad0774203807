// The report of the scheduling suite (bench/scheduling.bench.ts): what each
// run measured, and how it is written up — the table, the verdict against the
// targets (the embedded orloj's, and issue 19's for the roles in separate
// processes), the notes, and the description and settings it opens with.
import type { ReadTiming } from './api-reads.js';
import { DISTRIBUTED_ROLES, type DistributedRole } from './distributed.js';
import type { UsageBetween } from './embedded.js';
import type { DueOrder, Phases, SlotAnalysis, WindowAnalysis } from './schedule-db.js';
import { fmt, mib, ms, type Lag } from './stats.js';
import type { SuiteReport } from './suite.js';
import { codeVersion } from './versions.js';

// Targets from the issue: 100k one-minute workflows with no missed slot, p99 lag ≤ 250 ms, under half a core on average.
const TARGET_P99_MS = 250;
const TARGET_CPU_PERCENT = 50;
// Issue 19: the same schedule with the roles in separate processes on PostgreSQL + RabbitMQ.
const TARGET_DIST_P99_MS = 500;
/** CPU per job (orloj processes + PostgreSQL + RabbitMQ) at most this many times the embedded default's. */
const TARGET_DIST_CPU_RATIO = 2;
/** The burst's workflows' interval: long enough that no second round interferes. */
export const BURST_INTERVAL_MINUTES = 60;
// Issue 25: cron workflows in mixed zones keep the same schedule at CPU per job at most this many times the interval workflows' in the same run.
const TARGET_CRON_CPU_RATIO = 1.2;
/**
 * The cron workflows of the steady runs: every minute, in zones with whole,
 * half- and quarter-hour offsets and both hemispheres' daylight saving; the
 * jitter spreads them over the minute as the interval workflows' anchors are.
 */
export const CRON_SEED = {
  expression: '* * * * *',
  zones: ['UTC', 'Europe/Berlin', 'America/New_York', 'Asia/Kolkata', 'Asia/Kathmandu', 'Australia/Adelaide', 'America/St_Johns', 'Pacific/Chatham'],
  jitterSeconds: 59,
} as const;

export interface Settings {
  sizes: number[];
  durationS: number;
  warmupS: number;
  tailS: number;
  burst: number;
  burstTimeoutS: number;
  /** RUNNER_CONCURRENCY of the embedded rows (BENCH_SCHED_CONCURRENCY, default 64). */
  concurrency: number;
  /** RUNNER_CONCURRENCY of the distributed rows: BENCH_SCHED_CONCURRENCY if set, else sized to each row's rate (runnerSlotsFor). */
  distributedSlots: number | undefined;
  /** SCHEDULER_TICK for orloj; undefined: orloj's default. */
  tick: string | undefined;
  /** Sizes also run with the roles in separate processes on PostgreSQL + RabbitMQ (after the embedded run of the same size). */
  distributedSizes: number[];
  /** Sizes also run as cron workflows (CRON_SEED), right after the interval run of the same size. */
  cronSizes: number[];
  amqpUrl: string;
  /** Jobs of generated history (BENCH_SCHED_HISTORY): each distributed size runs again over a year of them; 0: not. */
  historyJobs: number;
  /** api calls of each kind timed after a distributed run's window (BENCH_SCHED_READS). */
  reads: number;
  /** In which order interval workflows fall due (BENCH_SCHED_ORDER; ScheduleDb.seedHeartbeats). */
  dueOrder: DueOrder;
}

/** What the steady run's workflows are scheduled by. */
export type SteadySchedule = 'interval' | 'cron';

export /** CPU of the helper processes and the rest of the machine over one measured stretch (% of one core). */
interface Interference {
  target: number | undefined;
  dbTool: number | undefined;
  loadGenerator: number | undefined;
  other: number | undefined;
}

export interface Common {
  label: string;
  workflows: number;
  seededMs: number;
  startupMs: number;
  usage: UsageBetween;
  interference: Interference;
  targetRequests: number;
}
export type SteadyRun = Common & { kind: 'steady'; schedule: SteadySchedule; analysis: WindowAnalysis; windowS: number };
export type BurstRun = Common & { kind: 'burst'; analysis: SlotAnalysis; drained: boolean };
/** CPU over the window, % of one core, by process group. */
export interface DistributedCpu {
  roles: Record<DistributedRole, number | undefined>;
  /** The PostgreSQL backends serving the roles (found by application_name). */
  backends: number | undefined;
  /** Every postgres process (shared with anything else using this cluster). */
  postgresAll: number | undefined;
  /** beam.smp (shared with anything else using this broker). */
  broker: number | undefined;
  target: number | undefined;
  dbTool: number | undefined;
  other: number | undefined;
}
export type DistributedRun = {
  kind: 'distributed';
  label: string;
  workflows: number;
  seededMs: number;
  startupMs: number;
  targetRequests: number;
  analysis: WindowAnalysis;
  windowS: number;
  cpu: DistributedCpu;
  /** The year of history generated before the run (BENCH_SCHED_HISTORY), if any. */
  history?: { jobs: number; notifications: number; rollups: number; incidents: number; attempts: number; ms: number; steps: Record<string, number> };
  /** The api reads timed after the window (issue 28, target 3). */
  reads?: ReadTiming[];
};
export type Run = SteadyRun | BurstRun | DistributedRun | { kind: 'failed'; label: string; failure: string };

export const sum = (xs: Array<number | undefined>) => xs.reduce<number>((a, b) => a + (b ?? 0), 0);
/** orloj's roles + their PostgreSQL backends + RabbitMQ, % of one core. */
export const distributedTotal = (c: DistributedCpu) => sum([...Object.values(c.roles), c.backends, c.broker]);
/** CPU ms per job completed in the window. */
export const cpuMsPerJob = (cpuPercent: number, windowS: number, jobs: number) => (jobs > 0 ? (cpuPercent / 100) * windowS * 1000 / jobs : Number.NaN);

const distributedRuns = (runs: readonly Run[]) => runs.filter((r): r is DistributedRun => r.kind === 'distributed');
const measuredRuns = (runs: readonly Run[]) => runs.filter((r): r is SteadyRun | BurstRun => r.kind === 'steady' || r.kind === 'burst');

// The target answers 200 to everything: a FAILED job is either orloj
// overloaded (its time limit or its lease ran out) or a broken setup.
const OVERLOAD = /^(TIME_LIMIT_EXCEEDED|SYSTEM_ERROR):/;

/** Runs whose jobs FAILED for a reason other than overload. */
const brokenRuns = (runs: readonly Run[]) => [...measuredRuns(runs), ...distributedRuns(runs)].filter((r) => Object.keys(r.analysis.failures).some((reason) => !OVERLOAD.test(reason)));

/** The suite's report of `runs`; invalid when a run failed or a job FAILED for a reason other than overload. */
export function schedulingReport(runs: readonly Run[], s: Settings): SuiteReport {
  return {
    description: DESCRIPTION,
    settings: settingsOf(s),
    table: {
      columns: ['Run', 'due slots', 'jobs/s', 'missed', 'lag p50 / p99 / max ms', 'time to drain', 'orloj CPU', 'orloj peak RSS', 'CPU elsewhere', 'FAILED jobs (whole run)'],
      rows: runs.map((r) => tableRow(r, s)),
    },
    verdict: [...embeddedVerdict(runs, s), ...cronVerdict(runs), ...distributedVerdict(runs)],
    notes: noteLines(runs),
    valid: !(runs.some((r) => r.kind === 'failed') || brokenRuns(runs).length > 0),
  };
}

const DESCRIPTION = [
  'How well the embedded orloj (`startOrloj` with api + scheduler + runners in one child process, SQLite, `BUS_URL=memory:`) keeps a schedule on the real clock.',
  'N built HEARTBEAT workflows with a one-minute interval are inserted straight into the SQLite file, their slots spread evenly over the minute (build anchors 60 s / N apart, in an order unrelated to their ids unless BENCH_SCHED_ORDER=ids); each job is one HTTP GET to a local node:http target in another child process that answers 200.',
  'After a warm-up the suite measures a window, waits a tail so that the window\'s last slots get their jobs, stops orloj and reads the jobs table.',
  'The rows "roles in separate processes" run the same schedule with api, scheduler, runners, log-ingest and notifier as separate `orloj start --roles <role>` processes on PostgreSQL (a fresh schema) and RabbitMQ (a fresh prefix), right after the embedded run of the same size; their CPU is read from /proc for each role process, the PostgreSQL backends serving them (by application_name) and beam.smp, and CPU per job is compared with the embedded run.',
  `The cron rows (issue 25) run the same number of HEARTBEAT workflows on cron \`${CRON_SEED.expression}\` read in ${CRON_SEED.zones.join(', ')} (in turn), each moved by its jitter (up to ${CRON_SEED.jitterSeconds} s, from its id) so that they spread over the minute as the interval workflows do; they are built just before the first slot, and their slots (for "missed") are computed by the schedule code of this tree. Each cron run comes right after the interval run of the same size, so their CPU per job compares under the same load.`,
  `The burst row seeds workflows whose first slot is one and the same instant (interval ${BURST_INTERVAL_MINUTES} min, so no second round interferes) and measures how long it takes until all their jobs are COMPLETED in the store.`,
].join(' ');

function settingsOf(s: Settings): Array<[label: string, value: string]> {
  return [
    ['Code', codeVersion()],
    ['orloj', `all roles in one child process (TypeScript sources via tsx), \`NODE_ENV=production\`, \`BUS_URL=memory:\`, SQLite in a temp file, \`SCHEDULER_TICK=${s.tick ?? '1s (default)'}\`, \`RUNNER_CONCURRENCY=${s.concurrency}\`, \`RUNNER_ALLOW_TARGETS=127.0.0.0/8\`, \`LOG_LEVEL=warn\`, \`MAX_ACTIVE_JOBS_PER_USER\` and \`MAX_WORKFLOWS_PER_USER\` out of the way (one user owns every workflow), real clock, other settings default`],
    ['Steady state', `N = ${s.sizes.map((n) => fmt(n)).join(' and ')}; ${s.durationS} s measured after ${s.warmupS} s of schedule, orloj stopped ${s.tailS} s after the window; interval workflows due ${s.dueOrder === 'ids' ? 'in the order of their ids (BENCH_SCHED_ORDER=ids)' : 'in an order unrelated to their ids (a fixed shuffle)'}`],
    ['Burst', s.burst > 0 ? `${fmt(s.burst)} workflows, one slot instant, at most ${s.burstTimeoutS} s` : 'skipped (BENCH_SCHED_BURST=0)'],
    ['Overrides', 'BENCH_SCHED_SIZES (comma-separated N), BENCH_SCHED_DURATION, BENCH_SCHED_WARMUP, BENCH_SCHED_TAIL (s), BENCH_SCHED_BURST (N, 0 skips), BENCH_SCHED_BURST_TIMEOUT (s), BENCH_SCHED_CONCURRENCY (RUNNER_CONCURRENCY: the embedded rows’ default 64; the distributed rows’ default sized to their rate as docs/operations.md, "Sizing the runners", says: checks a second × 0.3 s, a power of two, at least 64), BENCH_SCHED_TICK (SCHEDULER_TICK), BENCH_SCHED_DISTRIBUTED (sizes also run with the roles in separate processes on PostgreSQL + RabbitMQ; default: every size; 0: none), BENCH_SCHED_CRON (sizes of BENCH_SCHED_SIZES also run as cron workflows; default: every size; 0: none), BENCH_SCHED_HISTORY (jobs: each distributed size runs again, right after, over a year of that much generated history, both rows with RETENTION_JOBS and RETENTION_NOTIFICATIONS 400d; default 0, off), BENCH_SCHED_KEEP_HISTORY (1: the filled schema is kept for EXPLAIN), BENCH_SCHED_READS (api calls of each kind timed after a distributed window, default 50), BENCH_SCHED_ORDER (`random`, the default: interval workflows fall due in an order unrelated to their ids, as workflows created over days do, and as cron workflows spread by their jitter do; `ids`: in the order of their ids, as before 2026-12-04, which walks every index keyed by workflow in order and made the interval rows cheaper per job), BENCH_AMQP_URL, BENCH_DATABASE_URL, BENCH_CPU_PROF (adds orloj-embedded-<run>-<pid>.cpuprofile: the orloj process during each measured window; the role processes write a profile of their whole life), BENCH_ROLE_NODE_OPTIONS (NODE_OPTIONS of the role processes, e.g. `--require ./bench/tools/count-pg-statements.cjs` to count their SQL statements)'],
  ];
}

/** One row of the table. */
function tableRow(r: Run, s: Settings): string[] {
  if (r.kind === 'failed') return [r.label, `not run: ${r.failure.split('\n')[0]}`, '', '', '', '', '', '', '', ''];
  if (r.kind === 'distributed') {
    const a = r.analysis;
    const total = distributedTotal(r.cpu);
    return [
      r.label,
      `${fmt(a.dueSlots)}`,
      `${fmt(a.completedInWindow / r.windowS, 1)} (needed ${fmt(r.workflows / 60, 1)})`,
      `${fmt(a.skipped + a.noJob)} (${fmt(a.skipped)} skipped, ${fmt(a.noJob)} no job)`,
      `${lagText(a.lag.p50)} / ${lagText(a.lag.p99)} / ${lagText(a.lag.max)}`,
      '—',
      `${pct(total)} (5 role processes + their PostgreSQL backends + RabbitMQ; ${fmt(cpuMsPerJob(total, r.windowS, a.completedInWindow), 2)} ms CPU/job)`,
      'n/a',
      `target ${pct(r.cpu.target)}, other processes ${pct(r.cpu.other)}`,
      `${fmt(a.allJobs.FAILED ?? 0)}`,
    ];
  }
  const perJob = r.kind === 'steady' ? `; ${fmt(cpuMsPerJob(r.usage.cpuPercent, r.windowS, r.analysis.completedInWindow), 2)} ms CPU/job` : '';
  const cpu = `${pct(r.usage.cpuPercent)} (loop busy ${fmt(r.usage.eventLoopUtilization * 100)} %${perJob})`;
  const lag = `${lagText(r.analysis.lag.p50)} / ${lagText(r.analysis.lag.p99)} / ${lagText(r.analysis.lag.max)}`;
  const others = `target ${pct(r.interference.target)}, other processes ${pct(r.interference.other)}`;
  if (r.kind === 'steady') {
    const a = r.analysis;
    return [
      r.label,
      `${fmt(a.dueSlots)}`,
      `${fmt(a.completedInWindow / r.windowS, 1)} (needed ${fmt(r.workflows / 60, 1)})`,
      `${fmt(a.skipped + a.noJob)} (${fmt(a.skipped)} skipped, ${fmt(a.noJob)} no job)`,
      lag,
      '—',
      cpu,
      mib(r.usage.maxRss),
      others,
      `${fmt(a.allJobs.FAILED ?? 0)}`,
    ];
  }
  const a = r.analysis;
  const drainS = a.lastCompleted / 1000;
  return [
    r.label,
    `${fmt(a.jobs)}`,
    r.drained ? `${fmt(r.workflows / drainS, 1)} (drain)` : 'n/a',
    r.drained ? '0' : `${fmt(r.workflows - (a.statuses.COMPLETED ?? 0))} not completed`,
    lag,
    r.drained ? `${fmt(drainS, 1)} s` : `not drained in ${s.burstTimeoutS} s`,
    cpu,
    mib(r.usage.maxRss),
    others,
    `${fmt(a.statuses.FAILED ?? 0)}`,
  ];
}

/** The verdict against the issue's targets: the embedded runs, failed runs and the burst. */
function embeddedVerdict(runs: readonly Run[], s: Settings): string[] {
  const verdict: string[] = [
    `Targets (issue): 100,000 one-minute workflows with 0 missed slots, p99 lag ≤ ${TARGET_P99_MS} ms, orloj under ${TARGET_CPU_PERCENT} % of one core on average.`,
    '',
  ];
  for (const r of runs) {
    if (r.kind !== 'steady') continue;
    const a = r.analysis;
    const missed = a.skipped + a.noJob;
    const okMissed = missed === 0;
    const okLag = a.lag.p99.v !== null && Number.isFinite(a.lag.p99.v) && !a.lag.p99.censored && a.lag.p99.v <= TARGET_P99_MS;
    const okCpu = r.usage.cpuPercent < TARGET_CPU_PERCENT;
    verdict.push(
      `- ${r.label}: missed ${fmt(missed)} (${okMissed ? 'met' : 'missed'}), p99 lag ${lagText(a.lag.p99)} ms (${okLag ? 'met' : 'missed'}), CPU ${pct(r.usage.cpuPercent)} (${okCpu ? 'met' : 'missed'}) → **${okMissed && okLag && okCpu ? 'met' : 'missed'}**`,
    );
  }
  for (const r of runs) if (r.kind === 'failed') verdict.push(`- ${r.label}: **not measured** (${r.failure.split('\n')[0]})`);
  for (const r of runs) {
    if (r.kind === 'burst') verdict.push(`- ${r.label}: no target; ${r.drained ? `drained in ${fmt(r.analysis.lastCompleted / 1000, 1)} s` : `**not drained** within ${s.burstTimeoutS} s`}.`);
  }
  return verdict;
}

/** The embedded interval run of `workflows` workflows, the baseline of the others of that size. */
const intervalRun = (runs: readonly Run[], workflows: number) => runs.find((b): b is SteadyRun => b.kind === 'steady' && b.schedule === 'interval' && b.workflows === workflows);

/** The cron runs against the interval runs of the same size (issue 25); none without cron runs. */
function cronVerdict(runs: readonly Run[]): string[] {
  const cron = runs.filter((r): r is SteadyRun => r.kind === 'steady' && r.schedule === 'cron');
  if (!cron.length) return [];
  const verdict: string[] = ['', `Targets (issue 25), cron workflows in mixed zones: 0 missed slots and CPU per job ≤ ${TARGET_CRON_CPU_RATIO}× the interval workflows' of the same size in the same run.`, ''];
  for (const r of cron) {
    const missed = r.analysis.skipped + r.analysis.noJob;
    const perJob = cpuMsPerJob(r.usage.cpuPercent, r.windowS, r.analysis.completedInWindow);
    const base = intervalRun(runs, r.workflows);
    const basePerJob = base ? cpuMsPerJob(base.usage.cpuPercent, base.windowS, base.analysis.completedInWindow) : Number.NaN;
    const ratio = perJob / basePerJob;
    const okCpu = Number.isFinite(ratio) && ratio <= TARGET_CRON_CPU_RATIO;
    verdict.push(
      `- ${r.label}: missed ${fmt(missed)} (${missed === 0 ? 'met' : 'missed'}), CPU ${fmt(perJob, 2)} ms/job = ${Number.isFinite(ratio) ? `${fmt(ratio, 2)}×` : 'n/a ×'} the interval workflows' ${fmt(basePerJob, 2)} ms/job (${okCpu ? 'met' : 'missed'}) → **${missed === 0 && okCpu ? 'met' : 'missed'}**`,
    );
  }
  return verdict;
}

/** The verdict of the runs with the roles in separate processes (issue 19); none without such runs. */
function distributedVerdict(runs: readonly Run[]): string[] {
  const distributed = distributedRuns(runs);
  if (!distributed.length) return [];
  const verdict: string[] = [
    '',
    `Targets (issue 19), roles in separate processes on PostgreSQL + RabbitMQ: 0 missed slots, p99 lag ≤ ${TARGET_DIST_P99_MS} ms, CPU per job (orloj processes + PostgreSQL + RabbitMQ) ≤ ${TARGET_DIST_CPU_RATIO}× the embedded default's in the same run.`,
    '',
  ];
  for (const r of distributed) {
    const a = r.analysis;
    const missed = a.skipped + a.noJob;
    const okLag = a.lag.p99.v !== null && Number.isFinite(a.lag.p99.v) && !a.lag.p99.censored && a.lag.p99.v <= TARGET_DIST_P99_MS;
    const perJob = cpuMsPerJob(distributedTotal(r.cpu), r.windowS, a.completedInWindow);
    const base = intervalRun(runs, r.workflows);
    const basePerJob = base ? cpuMsPerJob(base.usage.cpuPercent, base.windowS, base.analysis.completedInWindow) : Number.NaN;
    const ratio = perJob / basePerJob;
    const okCpu = Number.isFinite(ratio) && ratio <= TARGET_DIST_CPU_RATIO;
    verdict.push(
      `- ${r.label}: missed ${fmt(missed)} (${missed === 0 ? 'met' : 'missed'}), p99 lag ${lagText(a.lag.p99)} ms (${okLag ? 'met' : 'missed'}), CPU ${fmt(perJob, 2)} ms/job = ${Number.isFinite(ratio) ? `${fmt(ratio, 2)}×` : 'n/a ×'} the embedded ${fmt(basePerJob, 2)} ms/job (${okCpu ? 'met' : 'missed'}) → **${missed === 0 && okLag && okCpu ? 'met' : 'missed'}**`,
    );
  }
  return verdict;
}

/** Observations and caveats after the verdict. */
function noteLines(runs: readonly Run[]): string[] {
  const measured = measuredRuns(runs);
  const distributed = distributedRuns(runs);
  const notes: string[] = [
    '- Lag = `started_at − slot_at` of the job (the runner stamps `started_at` when it takes the job). "≥" marks a lower bound: some jobs had not started when orloj stopped, and they count with (stop − slot). Missed: a due slot in the window without an AUTOMATIC job, either skipped (the workflow already has a job for a later slot: orloj runs only the most recent missed slot) or with no job at all when orloj stopped, tail seconds after the window.',
    '- Jobs/s: jobs whose `completed_at` falls in the window, per second; "needed" is workflows / 60. CPU: `process.cpuUsage()` of the orloj process over the window (100 % = one core); "loop busy" is its event-loop utilisation (not meaningful under BENCH_CPU_PROF); peak RSS is getrusage maxRSS of the orloj process. "target" is the HTTP target process, "other processes" the rest of the machine (interference: the db tool, the load generator and anything else).',
    '- Steps below: `created_at` and `queued_at` are both the clock reading at the start of the scheduler tick that created and dispatched a job (one reading per tick), so "that tick → started" also holds the rest of that tick\'s work.',
    ...measured.map((r) => phaseLine(r.label, r.analysis.phases)),
    ...measured.map(
      (r) =>
        `- ${r.label}: seeded in ${fmt(r.seededMs)} ms, orloj up in ${fmt(r.startupMs)} ms; ${fmt(r.targetRequests)} HEARTBEAT requests reached the target during the measurement; event-loop delay p99 ${ms(r.usage.delayP99)} ms, max ${ms(r.usage.delayMax)} ms; jobs at the end: ${JSON.stringify(r.kind === 'steady' ? r.analysis.allJobs : r.analysis.statuses)}.`,
    ),
    ...measured
      .filter((r) => r.kind === 'burst')
      .map((r) => {
        const a = (r as BurstRun).analysis;
        return `- ${r.label}: after the slot, the last job was created at +${ms(a.lastCreated)} ms, QUEUED at +${ms(a.lastQueued)} ms, started at +${ms(a.lastStarted)} ms, finished at +${ms(a.lastFinished)} ms, COMPLETED in the store at +${ms(a.lastCompleted)} ms.`;
      }),
  ];
  for (const r of distributed) {
    notes.push(
      phaseLine(r.label, r.analysis.phases),
      `- ${r.label}: where the CPU went, % of one core over the window: ${cpuText(r.cpu)}; the HEARTBEAT target ${pct(r.cpu.target)}, the db tool ${pct(r.cpu.dbTool)}, other processes ${pct(r.cpu.other)}. Seeded in ${fmt(r.seededMs)} ms, roles up in ${fmt(r.startupMs)} ms; ${fmt(r.targetRequests)} HEARTBEAT requests reached the target during the measurement; jobs at the end: ${JSON.stringify(r.analysis.allJobs)}.`,
    );
    if (r.history) {
      const h = r.history;
      notes.push(
        `- ${r.label}: history generated in ${fmt(h.ms / 1000)} s (${Object.entries(h.steps).map(([k, v]) => `${k} ${fmt(v / 1000, 1)} s`).join(', ')}): ${fmt(h.jobs)} jobs, ${fmt(h.notifications)} notifications, ${fmt(h.rollups)} rollup rows, ${fmt(h.incidents)} incidents, ${fmt(h.attempts)} earlier attempts.`,
      );
    }
    if (r.reads) {
      notes.push(`- ${r.label}: api reads after the window, ms (p50 / p99 / mean of ${r.reads[0]?.calls ?? 0} calls one after another): ${r.reads.map((t) => `${t.label} ${fmt(t.p50, 1)} / ${fmt(t.p99, 1)} / ${fmt(t.mean, 1)} (${fmt(t.bytes)} B)`).join('; ')}.`);
    }
  }
  const disturbed = measured.filter((r) => (r.interference.other ?? 0) > 25);
  if (disturbed.length) {
    notes.push(
      `- **Disturbed**: other processes used ${disturbed.map((r) => `${pct(r.interference.other)} of a core during "${r.label}"`).join(', ')}; orloj shared the 2 cores with them, so its lag and throughput there are pessimistic.`,
    );
  }
  for (const r of [...measured, ...distributed]) {
    const f = Object.entries(r.analysis.failures);
    if (f.length) notes.push(`- ${r.label}: FAILED jobs by reason: ${f.map(([reason, n]) => `${fmt(n)} × ${reason}`).join('; ')}.`);
  }
  const broken = brokenRuns(runs);
  if (broken.length) {
    notes.push(`- **Invalid run**: jobs in ${broken.map((r) => `"${r.label}"`).join(', ')} FAILED for a reason other than overload (time limit, lost lease): the setup, not orloj's speed, is in question.`);
  }
  return notes;
}

/** A lag in ms; "≥" when it is a lower bound (that job had not started when orloj stopped). */
export function lagText(l: Lag | null | undefined): string {
  if (!l || l.v === null || !Number.isFinite(l.v)) return 'n/a';
  return `${l.censored ? '≥ ' : ''}${ms(l.v)}`;
}

const pct = (n: number | undefined) => (n === undefined || !Number.isFinite(n) ? 'n/a' : `${fmt(n)} %`);

export function cpuText(c: DistributedCpu): string {
  const roles = DISTRIBUTED_ROLES.map((r) => `${r} ${pct(c.roles[r])}`).join(', ');
  return `${roles}, PostgreSQL backends ${pct(c.backends)} (all postgres processes ${pct(c.postgresAll)}), RabbitMQ ${pct(c.broker)}`;
}

function phaseLine(label: string, phases: Phases): string {
  const parts = Object.entries(phases)
    .filter(([, v]) => v.count > 0)
    .map(([name, v]) => `${name} ${ms(v.p50)} / ${ms(v.p99)}`);
  return `- ${label} — where the time goes, p50 / p99 ms per step: ${parts.join('; ')}.`;
}
