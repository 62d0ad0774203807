#!/usr/bin/env node
// Runs the mocha tiers (docs/testing.md, "Tiers"): each tier is a mocha process of its
// own; tiers in one lane run one after another, lanes at the same time, stages one after
// another. A tier's output is held in a file and printed whole when it ends, so parallel
// tiers do not interleave. The closing line "N passed, N failed, N skipped" sums every
// tier and every file ORLOJ_EXTRA_COUNTS names (Vitest, the reference client suite).
//
//   node scripts/test-tiers.mjs                 every tier
//   node scripts/test-tiers.mjs unit system     the tiers named (system = its parts)
//
// Each tier must execute at least the number of tests scripts/test-floors.json keeps for
// it (the reporter fails it otherwise): a suite that silently stops loading fails the run.
// ORLOJ_TEST_LANES=1 runs every tier one after another (a quieter machine for timing).
// ORLOJ_TEST_TIERS_PLAN names a JSON file {tiers, plan, floors, ignore?, groups?} that
// replaces the repository's (server/test/test-tiers.test.ts runs small fixture suites so).
/* global process, console, setTimeout */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';

const ROOT = path.resolve(import.meta.dirname, '..');
const require = createRequire(import.meta.url);
const { readCounts } = require('./mocha-reporter.cjs');

const custom = process.env.ORLOJ_TEST_TIERS_PLAN ? JSON.parse(fs.readFileSync(process.env.ORLOJ_TEST_TIERS_PLAN, 'utf8')) : undefined;

/** What each tier runs. Every *.test.ts under a package's test/ belongs to exactly one. */
const REPOSITORY_TIERS = {
  // Each package's code in-process, against the real stores and buses.
  unit: ['common', 'scheduler', 'runners', 'log-ingest', 'notifier'].map((p) => `${p}/test/**/*.test.ts`),
  // The HTTP API in-process, through a real listening server, on both engines.
  integration: ['api/test/**/*.test.ts'],
  // Real `orloj` processes and fleets, the command line, the ingress, Prometheus.
  'system-server': ['server/test/**/*.test.ts'],
  // Chromium against real processes.
  'system-ui': ['dashboard/test/**/*.test.ts'],
  // The container image, compose, Kubernetes and a production install: after system-server,
  // in its lane, which ends minutes before system-ui's browser suites (docs/testing.md).
  'system-deploy': ['deploy/test/**/*.test.ts'],
  // Alone, after every other tier: restart.test.ts restarts the shared PostgreSQL and
  // RabbitMQ; availability.test.ts bounds /livez latency under a flood, which other lanes
  // on the same two cores would break; fair-share.test.ts asserts no slot of a real-clock
  // process is skipped, which a starved process could not promise.
  'system-alone': ['server/test/restart.test.ts', 'server/test/availability.test.ts', 'server/test/fair-share.test.ts'],
};
export const TIERS = custom?.tiers ?? REPOSITORY_TIERS;
const IGNORE = custom ? (custom.ignore ?? {}) : { 'system-server': ['server/test/restart.test.ts', 'server/test/availability.test.ts', 'server/test/fair-share.test.ts'] };
/** Names a caller may use for a group of tiers. */
const GROUPS = custom ? (custom.groups ?? {}) : { system: ['system-server', 'system-deploy', 'system-ui', 'system-alone'] };
/** Stages run one after another; in a stage, lanes run at once; in a lane, tiers in turn. */
const PLAN = custom?.plan ?? [[['unit', 'integration'], ['system-server', 'system-deploy'], ['system-ui']], [['system-alone']]];

function selected(names) {
  if (names.length === 0) return new Set(Object.keys(TIERS));
  const out = new Set();
  for (const n of names) {
    const tiers = GROUPS[n] ?? (n in TIERS ? [n] : undefined);
    if (!tiers) {
      console.error(`unknown tier ${n}; the tiers are ${[...Object.keys(TIERS), ...Object.keys(GROUPS)].join(', ')}`);
      process.exit(2);
    }
    tiers.forEach((t) => out.add(t));
  }
  return out;
}

const floors = custom?.floors ?? JSON.parse(fs.readFileSync(path.join(ROOT, 'scripts/test-floors.json'), 'utf8'));
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'orloj-tiers-'));
const results = new Map();

function runTier(name) {
  const log = path.join(dir, `${name}.log`);
  const counts = path.join(dir, `${name}.json`);
  const args = [path.join(ROOT, 'node_modules/mocha/bin/mocha.js'), ...TIERS[name], ...(IGNORE[name] ?? []).flatMap((f) => ['--ignore', f])];
  const env = { ...process.env, ORLOJ_COUNTS_OUT: counts, ORLOJ_COUNTS_NAME: `tier ${name}`, ORLOJ_TEST_FLOOR: String(floors[name] ?? 0), ORLOJ_TEST_FLOOR_NAME: `tier ${name}` };
  // The sum is made here, once: a tier's own closing line counts only the tier.
  delete env.ORLOJ_EXTRA_COUNTS;
  const started = Date.now();
  process.stderr.write(`[test] tier ${name}: started\n`);
  return new Promise((resolve) => {
    const out = fs.openSync(log, 'w');
    const child = spawn(process.execPath, args, { cwd: ROOT, env, stdio: ['ignore', out, out] });
    child.on('close', (code, signal) => {
      fs.closeSync(out);
      const wall = minutes((Date.now() - started) / 1000);
      results.set(name, { code: code ?? 1, signal, counts, wall });
      console.log(`\n========== tier ${name}: ${wall}, exit ${signal ?? code} ==========`);
      process.stdout.write(fs.readFileSync(log, 'utf8'));
      resolve();
    });
  });
}

/** 262 seconds as 4m22s. */
function minutes(seconds) {
  const s = Math.round(seconds);
  return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
}

const wanted = selected(process.argv.slice(2));
const plan = process.env.ORLOJ_TEST_LANES === '1' ? PLAN.map((stage) => [stage.flat()]) : PLAN;
for (const stage of plan) {
  await Promise.all(
    stage.map(async (lane) => {
      for (const tier of lane) if (wanted.has(tier)) await runTier(tier);
    }),
  );
}

// A tier that ended without its counts (a file that failed to load, a crash) is named and counts as failed.
const tiers = [...results].map(([name, r]) => {
  const [c] = readCounts([r.counts], `the counts of tier ${name} (exit ${r.signal ?? r.code}) could not be read: counted as a failure`);
  // Counts without a failure and a non-zero exit: the leak guard ended the run (its message is in the log).
  const failed = r.code !== 0 && c.failed === 0 ? 1 : c.failed;
  // The CPU a tier used, not its wall time, is what it costs a machine shared with other lanes.
  return { ...c, failed, note: `(tier ${name}, ${r.wall}, ${minutes(c.cpu)} of CPU: ${c.passed} passed, ${failed} failed, ${c.skipped} skipped)`, ok: r.code === 0 && failed === 0 };
});
const extraFiles = (process.env.ORLOJ_EXTRA_COUNTS || '').split(path.delimiter).filter(Boolean);
// A run beside this one (.ci/run: the reference client suite) writes its counts when it ends.
for (const deadline = Date.now() + Number(process.env.ORLOJ_EXTRA_COUNTS_WAIT_MS || 0); Date.now() < deadline; ) {
  if (extraFiles.every((f) => fs.existsSync(f) && fs.statSync(f).size > 0)) break;
  process.stderr.write('[test] waiting for the counts of a run beside this one (ORLOJ_EXTRA_COUNTS)\n');
  await new Promise((resolve) => setTimeout(resolve, 10_000)); // polling a file another process writes once
}
const extras = readCounts(extraFiles);
const all = [...tiers, ...extras];
const sum = (k) => all.reduce((n, c) => n + c[k], 0);
console.log('');
for (const c of all) console.log(c.note);
console.log(`the tiers used ${minutes(sum('cpu'))} of CPU (their processes and the children they waited for)`);
console.log(`${sum('passed')} passed, ${sum('failed')} failed, ${sum('skipped')} skipped`);
fs.rmSync(dir, { recursive: true, force: true });
process.exit(tiers.every((t) => t.ok) && sum('failed') === 0 ? 0 : 1);
