/**
 * The tiers runner itself (scripts/test-tiers.mjs, docs/testing.md, "Tiers"), on tiny
 * fixture suites named by a plan file (ORLOJ_TEST_TIERS_PLAN): it runs lanes at once and
 * stages in turn, holds each tier's output under its header, sums the tiers' counts and
 * the extra counts on the closing line, and fails the run when one lane fails, a tier does
 * not load or runs under its floor.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { tempDir } from '@orloj/common/test-support';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

interface Outcome {
  code: number;
  output: string;
  /** The closing line: "N passed, N failed, N skipped". */
  closing: string;
}

interface Plan {
  tiers: Record<string, string[]>;
  plan: string[][][];
  floors?: Record<string, number>;
  groups?: Record<string, string[]>;
}

/**
 * A spec that waits until `file` exists: a tier that cannot end before another tier of the
 * run has written it, so it passes only when the two run at once.
 */
const waitsFor = (file: string) => `
const fs = require('node:fs');
it('meets the other lane', async function () {
  this.timeout(120000);
  while (!fs.existsSync(${JSON.stringify(file)})) await new Promise((r) => setTimeout(r, 20)); // poll interval: another mocha process writes the file
});
`;
const writes = (file: string) => `it('writes ${path.basename(file)}', () => require('node:fs').writeFileSync(${JSON.stringify(file)}, 'x'));\n`;

describe('the tiers runner (scripts/test-tiers.mjs)', function () {
  this.timeout(180_000);
  const dir = tempDir('orloj-tiers-test-', { each: true });

  /** Writes each spec (name → source) into the test's folder; their paths by name. */
  function specs(files: Record<string, string>): Record<string, string> {
    return Object.fromEntries(
      Object.entries(files).map(([name, source]) => {
        const file = path.join(dir(), name);
        fs.writeFileSync(file, source);
        return [name, file];
      }),
    );
  }

  /** Runs the tiers runner on `plan` with the repository's .mocharc.cjs; its exit code, output and closing line. */
  function tiers(plan: Plan, args: string[] = [], env: Record<string, string> = {}): Promise<Outcome> {
    const planFile = path.join(dir(), 'plan.json');
    fs.writeFileSync(planFile, JSON.stringify({ floors: {}, ...plan }));
    const options = { cwd: ROOT, env: { PATH: process.env.PATH ?? '', ORLOJ_LEAK_GRACE_MS: '5000', ORLOJ_TEST_TIERS_PLAN: planFile, ...env } };
    return new Promise((resolve) => {
      execFile(process.execPath, [path.join(ROOT, 'scripts/test-tiers.mjs'), ...args], options, (err, stdout, stderr) => {
        const output = stdout + stderr;
        resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, output, closing: stdout.trimEnd().split('\n').at(-1) ?? '' });
      });
    });
  }

  it('runs the lanes of a stage at once and the stages in turn, each tier under its header, and sums the counts', async () => {
    const met = path.join(dir(), 'met');
    const s = specs({
      'a.cjs': waitsFor(met) + "it('a second', () => {});\n",
      'b.cjs': writes(met) + "it('is skipped', function () { this.skip(); });\n",
      'c.cjs': `it('runs after the first stage', () => require('node:assert').ok(require('node:fs').existsSync(${JSON.stringify(met)})));\n`,
    });
    const r = await tiers({ tiers: { a: [s['a.cjs']!], b: [s['b.cjs']!], c: [s['c.cjs']!] }, plan: [[['a'], ['b']], [['c']]] });
    assert.equal(r.code, 0, r.output);
    for (const [tier, passed, skipped] of [['a', 2, 0], ['b', 1, 1], ['c', 1, 0]] as const) {
      assert.match(r.output, new RegExp(`========== tier ${tier}: \\d+m\\d\\ds, exit 0 ==========`));
      assert.match(r.output, new RegExp(`\\(tier ${tier}, \\d+m\\d\\ds, \\d+m\\d\\ds of CPU: ${passed} passed, 0 failed, ${skipped} skipped\\)`));
    }
    // Each tier's output is printed whole under its own header.
    assert.ok(r.output.indexOf('runs after the first stage') > r.output.indexOf('========== tier c'), r.output);
    assert.equal(r.closing, '4 passed, 0 failed, 1 skipped');
  });

  it('fails the run when one lane fails, runs the other lanes to the end, and counts the failure', async () => {
    const s = specs({
      'good.cjs': "it('passes', () => {});\nit('passes too', () => {});\n",
      'bad.cjs': "it('passes', () => {});\nit('breaks', () => { throw new Error('the lane fails here'); });\n",
      'later.cjs': "it('still runs', () => {});\n",
    });
    const r = await tiers({ tiers: { good: [s['good.cjs']!], bad: [s['bad.cjs']!], later: [s['later.cjs']!] }, plan: [[['bad'], ['good']], [['later']]] });
    assert.equal(r.code, 1, r.output);
    assert.match(r.output, /========== tier bad: \d+m\d\ds, exit 1 ==========/);
    assert.match(r.output, /the lane fails here/);
    assert.match(r.output, /\(tier good, \d+m\d\ds, \d+m\d\ds of CPU: 2 passed, 0 failed, 0 skipped\)/);
    assert.equal(r.closing, '4 passed, 1 failed, 0 skipped');
  });

  it('names a tier whose file does not load, and one under its floor, counting each as failed', async () => {
    const s = specs({ 'broken.cjs': "it('never loads', () => {});\n)(\n", 'thin.cjs': "it('the only one', () => {});\n" });
    const r = await tiers({ tiers: { broken: [s['broken.cjs']!], thin: [s['thin.cjs']!] }, plan: [[['broken'], ['thin']]], floors: { thin: 3 } });
    assert.equal(r.code, 1, r.output);
    assert.match(r.output, /========== tier broken: \d+m\d\ds, exit 1 ==========\n[^]*broken\.cjs:2[^]*SyntaxError/);
    assert.match(r.output, /\(tier broken, \d+m\d\ds, \d+m\d\ds of CPU: 0 passed, 1 failed, 0 skipped\)/);
    assert.match(r.output, /only 1 tests ran, fewer than the floor of 3 for tier thin/);
    assert.equal(r.closing, '1 passed, 2 failed, 0 skipped');
  });

  it('runs only the tiers named (a group by its name), adds the extra counts, and refuses an unknown tier', async () => {
    const s = specs({ 'one.cjs': "it('one', () => {});\n", 'two.cjs': "it('two', () => { throw new Error('not selected, yet ran'); });\n" });
    const extra = path.join(dir(), 'vitest.json');
    fs.writeFileSync(extra, JSON.stringify({ name: 'the component tests', passed: 5, failed: 0, skipped: 0 }));
    const plan = { tiers: { one: [s['one.cjs']!], two: [s['two.cjs']!] }, plan: [[['one'], ['two']]], groups: { ones: ['one'] } };
    const r = await tiers(plan, ['ones'], { ORLOJ_EXTRA_COUNTS: extra });
    assert.equal(r.code, 0, r.output);
    assert.doesNotMatch(r.output, /tier two/);
    assert.match(r.output, /\(including the component tests: 5 passed, 0 failed, 0 skipped\)/);
    assert.equal(r.closing, '6 passed, 0 failed, 0 skipped');
    const unknown = await tiers(plan, ['three']);
    assert.equal(unknown.code, 2, unknown.output);
    assert.match(unknown.output, /unknown tier three; the tiers are one, two, ones/);
  });
});
