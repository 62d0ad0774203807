// The rollup-cost suite (issue 26): what keeping reliability rollups as
// results arrive costs the embedded orloj per job — the scheduling suite's
// steady run of one-minute HEARTBEAT workflows, with the rollup write and
// without it (BENCH_ROLLUPS=off in bench/servers/orloj-embedded.ts), rounds
// alternating so that a change in the machine's load falls on both.
import { settingsFromEnv, steady } from './scheduling.bench.js';
import type { Run, SteadyRun } from './lib/scheduling-report.js';
import { envInt, fmt, ms } from './lib/stats.js';
import type { BenchSuite } from './lib/suite.js';
import { codeVersion } from './lib/versions.js';

const TARGET_PERCENT = 5;
const VARIANTS = [
  { label: 'rollup write off', env: { BENCH_ROLLUPS: 'off' } },
  { label: 'rollups on (as shipped)', env: {} },
] as const;

/** CPU time of the orloj process per job completed in the window (ms). */
const cpuPerJob = (r: SteadyRun) => ((r.usage.cpuPercent / 100) * r.windowS * 1000) / Math.max(1, r.analysis.completedInWindow);

export const rollupCost: BenchSuite = {
  name: 'rollup-cost',
  title: 'Rollup cost per job: the scheduling run with and without the rollup write',

  async run(ctx) {
    const base = settingsFromEnv();
    const n = envInt('BENCH_ROLLUP_WORKFLOWS', 100_000, 1);
    const rounds = envInt('BENCH_ROLLUP_ROUNDS', 1, 1);
    // A warm-up of more than one interval: every workflow's first run of the hour (a read and
    // an insert) falls before the window, which then holds what a steady hour holds — runs
    // that add to their hour's row in place, and an hour's first run only where the window
    // crosses an hour (one run in 60 of a one-minute workflow).
    const s = { ...base, sizes: [n], warmupS: Math.max(base.warmupS, 70) };
    const runs: Array<{ variant: (typeof VARIANTS)[number]; run: Run }> = [];
    for (let round = 0; round < rounds; round++) {
      for (const variant of VARIANTS) runs.push({ variant, run: await steady(ctx, s, n, 'interval', variant) });
    }
    const rows = runs.map(({ run }) => {
      if (run.kind !== 'steady') return [run.label, `not run: ${run.kind === 'failed' ? run.failure : run.kind}`, '', '', '', '', ''];
      const a = run.analysis;
      return [
        run.label,
        fmt(a.completedInWindow),
        fmt(a.completedInWindow / run.windowS, 1),
        `${fmt(run.usage.cpuPercent, 1)} %`,
        ms(cpuPerJob(run)),
        `${fmt(a.skipped + a.noJob)} of ${fmt(a.dueSlots)}`,
        `${fmt(run.interference.other ?? Number.NaN)} %`,
      ];
    });
    const perJob = (label: string) => {
      const done = runs.filter((r) => r.variant.label === label && r.run.kind === 'steady').map((r) => cpuPerJob(r.run as SteadyRun));
      return done.length ? done.reduce((x, y) => x + y, 0) / done.length : undefined;
    };
    const [off, on] = [perJob(VARIANTS[0].label), perJob(VARIANTS[1].label)];
    const verdict = [`Target (issue 26): CPU per job with rollups within ${TARGET_PERCENT} % of the same run without them.`, ''];
    if (off === undefined || on === undefined) verdict.push('- **not measured**');
    else {
      const change = ((on - off) / off) * 100;
      verdict.push(`- ${ms(on)} ms with rollups against ${ms(off)} ms without (mean of ${rounds} round${rounds === 1 ? '' : 's'}): ${change >= 0 ? '+' : ''}${fmt(change, 1)} % → **${change <= TARGET_PERCENT ? 'met' : 'missed'}**`);
    }
    const failed = runs.filter((r) => r.run.kind !== 'steady');
    return {
      description: [
        `The scheduling suite's steady run (bench/scheduling.bench.ts: ${fmt(n)} one-minute HEARTBEAT workflows inserted straight into SQLite, the embedded orloj with every role in one process, the real clock), once as shipped and once with the rollup write of each finished run skipped`,
        '(`BENCH_ROLLUPS=off` replaces `RollupsRepo.addMany` in the benchmark\'s orloj process: a benchmark switch, not a setting), the two alternating round by round.',
        'CPU per job is the orloj process\'s CPU time over the measured window divided by the jobs completed in it.',
      ].join(' '),
      settings: [
        ['Code', codeVersion()],
        ['Run', `N = ${fmt(n)}, ${s.durationS} s measured after ${s.warmupS} s of schedule, orloj stopped ${s.tailS} s after; RUNNER_CONCURRENCY=${s.concurrency}; ${rounds} round${rounds === 1 ? '' : 's'} of (off, on)`],
        ['Overrides', 'BENCH_ROLLUP_WORKFLOWS (N), BENCH_ROLLUP_ROUNDS, and the scheduling suite\'s BENCH_SCHED_DURATION, BENCH_SCHED_WARMUP, BENCH_SCHED_TAIL, BENCH_SCHED_CONCURRENCY, BENCH_SCHED_TICK'],
      ],
      table: { columns: ['Run', 'jobs in window', 'jobs/s', 'orloj CPU', 'CPU per job ms', 'missed slots', 'CPU elsewhere'], rows },
      verdict,
      notes: [
        '- The write compared (docs/adr/0016-incidents.md): a run in the hour of its workflow\'s latest `workflow_rollups` row is one UPDATE of that row, adding to its histogram bucket\'s column, prepared once; the hour\'s first run of a workflow reads the latest row and inserts the hour\'s. The runs of a batch of results are written together (`RollupsRepo.addMany`).',
        '- "CPU elsewhere" is the rest of the machine during the window (other work, in % of one core): the orloj process\'s own CPU time is what is compared, but a busy machine slows it too (shared caches and cores), so compare rows of one run.',
        ...(failed.length ? [`- **Invalid run**: ${failed.map((r) => r.run.label).join(', ')} did not run.`] : []),
      ],
      valid: failed.length === 0,
    };
  },
};
