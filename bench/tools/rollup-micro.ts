// The rollup write's CPU in process (issue 26), an inner loop for the
// rollup-cost suite that a busy machine can still run: N one-minute workflows'
// COMPLETED outcomes applied through applyJobOutcomes in transactions of BATCH,
// one pass a simulated minute, passes with and without the rollup write
// (RollupsRepo.addMany, as BENCH_ROLLUPS=off) alternating. Prints the CPU per
// job of each and the difference; not a figure for docs/benchmarks.md.
//
//   node --conditions=orloj-src --import tsx bench/tools/rollup-micro.ts
//   (N, BATCH, ROUNDS; DATABASE_URL for another database than a temp SQLite file)
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { applyJobOutcomes, openDatabase, RollupsRepo, Store } from '@orloj/common/store';
import { insertUser, jobFixture, workflowFixture } from '../../common/test/support/fixtures.js';

const N = Number(process.env.N ?? 2_000);
const BATCH = Number(process.env.BATCH ?? 32);
const ROUNDS = Number(process.env.ROUNDS ?? 40);
const dir = process.env.DATABASE_URL ? undefined : fs.mkdtempSync(path.join(os.tmpdir(), 'rollup-micro-'));
const handle = openDatabase(process.env.DATABASE_URL ?? `sqlite:${path.join(dir!, 'orloj.db')}`);
await handle.migrate();
const store = Store.fromHandle(handle);
const userId = await insertUser(store);
const workflows = Array.from({ length: N }, () => workflowFixture(userId));
await store.transaction(async (tx) => {
  for (const w of workflows) await tx.workflows.insert(w);
});

const write = RollupsRepo.prototype.addMany;
let t = Date.UTC(2026, 0, 1, 0, 0, 30);
/** One pass over every workflow; µs of CPU per job. */
async function pass(rollups: boolean): Promise<number> {
  RollupsRepo.prototype.addMany = rollups ? write : () => Promise.resolve();
  const jobs = workflows.map((w) => jobFixture(w, 'COMPLETED', { at: t - 1_000, completedAt: t - 500 }));
  const before = process.cpuUsage();
  for (let i = 0; i < jobs.length; i += BATCH) await store.transaction((tx) => applyJobOutcomes(tx, jobs.slice(i, i + BATCH), t));
  const used = process.cpuUsage(before);
  t += 60_000;
  return (used.user + used.system) / jobs.length;
}

await pass(true);
await pass(false);
const off: number[] = [];
const on: number[] = [];
for (let r = 0; r < ROUNDS; r++) {
  // Which goes first alternates too.
  if (r % 2) on.push(await pass(true));
  off.push(await pass(false));
  if (!(r % 2)) on.push(await pass(true));
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
console.log(`N=${N} batch=${BATCH} rounds=${ROUNDS} ${handle.dialect.name}`);
console.log(`without the rollup write: ${median(off).toFixed(1)} µs of CPU per job (median of the passes)`);
console.log(`with it:                  ${median(on).toFixed(1)} µs`);
console.log(`the rollup write:         ${(median(on) - median(off)).toFixed(1)} µs per job`);
await handle.close();
if (dir) fs.rmSync(dir, { recursive: true, force: true });
