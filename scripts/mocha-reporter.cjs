// Mocha's spec reporter, plus the plain closing line CI reads:
// "N passed, N failed, N skipped". ORLOJ_EXTRA_COUNTS names JSON files of
// {name?, passed, failed, skipped} from other runs (the dashboard's Vitest
// component tests, see scripts/test.sh; the reference client suite, see
// scripts/reference-client.sh and .ci/run), separated by ":", to add in, so
// the one line counts all. ORLOJ_COUNTS_OUT names a file this run writes its
// own counts to, in that form, for another run's closing line.
//
// It also refuses a verdict that hides tests: a test that never got a result
// (kept from running by a failing hook) is named and counted as failed, and
// with ORLOJ_TEST_FLOOR set, a run that executed fewer tests than that floor
// (scripts/test-floors.json, set by scripts/test-tiers.mjs per tier: a suite that
// silently stopped loading) fails.
//
// The counts carry the CPU seconds the run used (cpu: this process and the children it
// waited for, from /proc/self/stat: the orloj processes, tsc, Chromium; not PostgreSQL,
// RabbitMQ or podman's containers, which are no child of it). ORLOJ_CPU_FILES=1 lists
// them per test file too, heaviest first (docs/testing.md, "Where the CPU goes").
const fs = require('node:fs');
const path = require('node:path');
const Mocha = require('mocha');
const { Spec } = Mocha.reporters;
const { EVENT_RUN_END, EVENT_SUITE_BEGIN, EVENT_SUITE_END, EVENT_TEST_FAIL, EVENT_TEST_PASS, EVENT_TEST_PENDING } = Mocha.Runner.constants;

class OrlojReporter extends Spec {
  constructor(runner, options) {
    super(runner, options);
    const failedHooks = [];
    const finished = new Set();
    runner.on(EVENT_TEST_FAIL, (r) => (r.type === 'hook' ? failedHooks.push(r) : finished.add(r)));
    runner.on(EVENT_TEST_PASS, (t) => finished.add(t));
    runner.on(EVENT_TEST_PENDING, (t) => finished.add(t));
    const files = cpuPerFile(runner);
    // Registered before the runner's own listener, which hands runner.failures to mocha's exit code.
    runner.once(EVENT_RUN_END, () => {
      const s = runner.stats;
      const lines = [];
      const kept = notRun(runner, finished);
      if (kept.length) {
        lines.push(`${kept.length} test(s) did not run, counted as failed:`);
        for (const t of kept) {
          const hook = failedHooks.filter((h) => isWithin(t, h.parent)).at(-1);
          lines.push(`  - ${t.fullTitle()}${hook ? ` (kept from running by the failing ${hook.title} in ${hook.file ?? 'its suite'})` : ''}`);
        }
      }
      const executed = [...finished].filter((t) => !t.isPending()).length;
      const floor = Number(process.env.ORLOJ_TEST_FLOOR || 0);
      const underFloor = executed < floor;
      if (underFloor) {
        lines.push(`only ${executed} tests ran, fewer than the floor of ${floor}${process.env.ORLOJ_TEST_FLOOR_NAME ? ` for ${process.env.ORLOJ_TEST_FLOOR_NAME}` : ''} kept in scripts/test-floors.json: did a suite stop loading? (counted as a failure)`);
      }
      const failed = s.failures + kept.length + (underFloor ? 1 : 0);
      runner.failures += failed - s.failures;
      const out = process.env.ORLOJ_COUNTS_OUT;
      const cpu = cpuSeconds();
      if (out) fs.writeFileSync(out, JSON.stringify({ name: process.env.ORLOJ_COUNTS_NAME || undefined, passed: s.passes, failed, skipped: s.pending, cpu }));
      const extras = extraCounts();
      const sum = (k) => extras.reduce((n, e) => n + e[k], 0);
      // registered after Spec's own listener, so this prints after its epilogue
      for (const line of lines) console.log(line);
      if (files) {
        console.log(`CPU and wall seconds per file (${cpu.toFixed(0)} s of CPU in all, loading included):`);
        for (const [file, [seconds, wall]] of [...files].sort((a, b) => b[1][0] - a[1][0])) {
          console.log(`  ${seconds.toFixed(1).padStart(7)} ${wall.toFixed(0).padStart(6)}  ${path.relative(process.cwd(), file)}`);
        }
      }
      for (const e of extras) console.log(e.note);
      console.log(`${s.passes + sum('passed')} passed, ${failed + sum('failed')} failed, ${s.pending + sum('skipped')} skipped`);
    });
  }
}

/** CPU seconds of this process and of the children it waited for (their descendants included, when reaped). */
function cpuSeconds() {
  try {
    // Fields after the command name: utime, stime, cutime and cstime are the 12th to 15th, in clock ticks.
    const f = fs.readFileSync('/proc/self/stat', 'utf8').split(') ')[1].split(' ');
    return (Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) / 100;
  } catch {
    return 0; // not Linux: no figure
  }
}

/** With ORLOJ_CPU_FILES=1, a map each test file's top-level suites add their CPU seconds to. */
function cpuPerFile(runner) {
  if (process.env.ORLOJ_CPU_FILES !== '1') return undefined;
  const files = new Map();
  const started = new Map();
  runner.on(EVENT_SUITE_BEGIN, (suite) => suite.parent?.root && started.set(suite, [cpuSeconds(), Date.now()]));
  runner.on(EVENT_SUITE_END, (suite) => {
    if (!started.has(suite)) return;
    const key = suite.file ?? suite.title;
    const [cpu, wall] = files.get(key) ?? [0, 0];
    const [cpu0, wall0] = started.get(suite);
    files.set(key, [cpu + cpuSeconds() - cpu0, wall + (Date.now() - wall0) / 1000]);
  });
  return files;
}

/** The tests this run selected (grep, only) that neither passed, failed nor were skipped. */
function notRun(runner, finished) {
  const grep = runner._grep;
  const selected = (t) => !grep || grep.test(t.fullTitle()) !== Boolean(runner._invert);
  const out = [];
  const walk = (suite) => {
    for (const t of suite.tests) if (!finished.has(t) && !t.isPending() && selected(t)) out.push(t);
    suite.suites.forEach(walk);
  };
  walk(runner.suite);
  return out;
}

function isWithin(test, suite) {
  for (let s = test.parent; s; s = s.parent) if (s === suite) return true;
  return false;
}

function extraCounts() {
  return readCounts((process.env.ORLOJ_EXTRA_COUNTS || '').split(path.delimiter).filter(Boolean));
}

/** Reads count files ({name?, passed, failed, skipped}); one that cannot be read counts as one failure. */
function readCounts(files, unreadable = (file) => `(the counts in ${file} could not be read: counted as a failure)`) {
  return files.map((file) => {
    try {
      const c = JSON.parse(fs.readFileSync(file, 'utf8'));
      const n = (v) => (Number.isInteger(v) && v >= 0 ? v : 0);
      const counts = { passed: n(c.passed), failed: n(c.failed), skipped: n(c.skipped), cpu: Number(c.cpu) || 0 };
      const name = typeof c.name === 'string' && c.name ? c.name : 'the dashboard component tests';
      return { ...counts, note: `(including ${name}: ${counts.passed} passed, ${counts.failed} failed, ${counts.skipped} skipped)` };
    } catch {
      return { passed: 0, failed: 1, skipped: 0, cpu: 0, note: typeof unreadable === 'function' ? unreadable(file) : unreadable };
    }
  });
}

module.exports = OrlojReporter;
module.exports.readCounts = readCounts;
