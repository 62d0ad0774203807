// `npm run bench [-- <suite> …]`: runs the benchmark suites (all, or those whose
// name contains one of the arguments) and rewrites their sections of
// docs/benchmarks.md (BENCH_OUTPUT names another file; "-" writes none).
// Environment: BENCH_DURATION (s, default 20), BENCH_CONNECTIONS (64),
// BENCH_WARMUP (s, 3), BENCH_DATABASE_URL (PostgreSQL, default
// postgres://postgres@127.0.0.1:5432/orloj_test), BENCH_CPU_PROF=<dir> (V8
// profiles of the server processes; the scheduling, containers, live-tail and
// log-search suites add one of the orloj process over each measured window).
// Suites read their own variables too (BENCH_SCHED_*, BENCH_CONTAINER_*,
// BENCH_INGEST_*, BENCH_LOG_*, BENCH_TAIL_*, BENCH_EMBEDDED_*, BENCH_REPORT_*,
// BENCH_ROLLUP_*, BENCH_WORKFLOWS, BENCH_WINDOW, BENCH_BASELINE*: see each
// suite's section).
// `npm run bench -- --list` lists suites.
import path from 'node:path';
import { REPO_ROOT } from './lib/child.js';
import { loadSettingsFromEnv } from './lib/load.js';
import { machineInfo } from './lib/machine.js';
import { renderSection, writeSection } from './lib/markdown.js';
import type { BenchSuite } from './lib/suite.js';
import { containers } from './containers.bench.js';
import { dashboardFirstRow } from './dashboard-first-row.bench.js';
import { embeddedApi } from './embedded-api.bench.js';
import { liveTail } from './live-tail.bench.js';
import { logIngest } from './log-ingest.bench.js';
import { logSearch } from './log-search.bench.js';
import { reliabilityReport } from './reliability-report.bench.js';
import { retention } from './retention.bench.js';
import { rollupCost } from './rollup-cost.bench.js';
import { scheduling } from './scheduling.bench.js';
import { transportFloor } from './transport-floor.bench.js';
import { workflowsList } from './workflows-list.bench.js';

/** Every suite, in run order. Add new ones here. */
const SUITES: BenchSuite[] = [workflowsList, scheduling, embeddedApi, transportFloor, containers, logIngest, logSearch, liveTail, retention, dashboardFirstRow, reliabilityReport, rollupCost];

async function main(filters: string[]): Promise<number> {
  if (filters.includes('--list')) {
    for (const s of SUITES) console.log(`${s.name}\t${s.title}`);
    return 0;
  }
  const selected = filters.length ? SUITES.filter((s) => filters.some((f) => s.name.includes(f))) : SUITES;
  if (!selected.length) {
    console.error(`no suite matches ${filters.join(', ')}; suites: ${SUITES.map((s) => s.name).join(', ')}`);
    return 2;
  }
  const load = loadSettingsFromEnv();
  const output = process.env.BENCH_OUTPUT?.trim() || path.join(REPO_ROOT, 'docs', 'benchmarks.md');
  const host = machineInfo();
  console.log(`machine: ${host.cpu}, ${host.cores} cores, ${host.ramGiB} GiB, Node ${host.node}`);
  console.log(`load: ${load.connections} connections, ${load.duration} s after ${load.warmup} s warm-up`);

  let exitCode = 0;
  for (const suite of selected) {
    console.log(`\n== ${suite.name}: ${suite.title}`);
    const date = new Date();
    const machine = machineInfo();
    if (machine.loadAverage[0] > 0.5) {
      console.warn(`[${suite.name}] load average ${machine.loadAverage[0]}: other work is running, expect noisy numbers`);
    }
    const report = await suite.run({ load, log: (m) => console.log(`[${suite.name}] ${m}`) });
    const section = renderSection(suite, report, machine, date);
    if (output !== '-') {
      writeSection(output, suite.name, section);
      console.log(`[${suite.name}] written to ${path.relative(process.cwd(), output) || output}`);
    }
    console.log(`\n${section.split('\n').filter((l) => !l.startsWith('<!--')).join('\n')}`);
    if (!report.valid) {
      console.error(`[${suite.name}] INVALID: errors, non-2xx answers or targets that did not run`);
      exitCode = 1;
    }
  }
  return exitCode;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error('benchmark failed:', err);
    process.exit(1);
  },
);
