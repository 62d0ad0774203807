/**
 * The closing line CI reads (scripts/mocha-reporter.cjs): mocha's own counts
 * plus every file ORLOJ_EXTRA_COUNTS names (Vitest's, the reference client
 * suite's), and the counts a run hands on through ORLOJ_COUNTS_OUT.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const run = promisify(execFile);

describe('the mocha reporter', function () {
  this.timeout(60_000);
  let dir: string;

  before(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'orloj-reporter-'));
    fs.writeFileSync(path.join(dir, 'spec.cjs'), "it('a', () => {}); it('b', () => {}); it('c', () => { throw new Error('no'); }); it.skip('d', () => {});\n");
  });

  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  /** Runs mocha on the small spec (or the one named) with the reporter; its output, whatever its exit code. */
  async function mocha(env: Record<string, string>, spec = 'spec.cjs'): Promise<string> {
    const args = [path.join(ROOT, 'node_modules/mocha/bin/mocha.js'), '--no-config', '--reporter', path.join(ROOT, 'scripts/mocha-reporter.cjs'), path.join(dir, spec)];
    try {
      return (await run(process.execPath, args, { cwd: dir, env: { PATH: process.env.PATH ?? '', ...env } })).stdout;
    } catch (err) {
      return (err as { stdout: string }).stdout;
    }
  }

  it('adds the counts of every file ORLOJ_EXTRA_COUNTS names, an unreadable one as a failure, and writes its own to ORLOJ_COUNTS_OUT', async () => {
    const vitest = path.join(dir, 'vitest.json');
    const reference = path.join(dir, 'reference.json');
    const empty = path.join(dir, 'empty.json');
    const own = path.join(dir, 'own.json');
    fs.writeFileSync(vitest, JSON.stringify({ name: 'the dashboard component tests', passed: 30, failed: 0, skipped: 1 }));
    fs.writeFileSync(reference, JSON.stringify({ name: 'the reference client suite', passed: 3, failed: 1, skipped: 0 }));
    fs.writeFileSync(empty, '');
    const out = await mocha({ ORLOJ_EXTRA_COUNTS: [reference, vitest, empty].join(path.delimiter), ORLOJ_COUNTS_OUT: own, ORLOJ_COUNTS_NAME: 'a run' });
    const lines = out.trimEnd().split('\n');
    assert.equal(lines.at(-1), '35 passed, 3 failed, 2 skipped');
    assert.ok(out.includes('(including the reference client suite: 3 passed, 1 failed, 0 skipped)'), out);
    assert.ok(out.includes('(including the dashboard component tests: 30 passed, 0 failed, 1 skipped)'), out);
    assert.ok(out.includes(`(the counts in ${empty} could not be read: counted as a failure)`), out);
    const { cpu, ...counts } = JSON.parse(fs.readFileSync(own, 'utf8')) as { cpu: number };
    assert.deepEqual(counts, { name: 'a run', passed: 2, failed: 1, skipped: 1 });
    assert.ok(cpu > 0, `the CPU seconds the run used: ${cpu}`);
  });

  it('lists the CPU seconds of each test file with ORLOJ_CPU_FILES=1', async () => {
    fs.writeFileSync(path.join(dir, 'busy.cjs'), "describe('busy', () => it('spins', () => { for (const end = process.cpuUsage().user + 200_000; process.cpuUsage().user < end; ); }));\n");
    const out = await mocha({ ORLOJ_CPU_FILES: '1' }, 'busy.cjs');
    const row = out.split('\n').find((l) => l.endsWith(' busy.cjs'));
    assert.match(out, /CPU and wall seconds per file \(\d+ s of CPU in all, loading included\):/);
    assert.ok(row && Number(row.trim().split(/\s+/)[0]) >= 0.2, out);
  });

  it('prints its own counts alone without extra files', async () => {
    const out = await mocha({});
    assert.equal(out.trimEnd().split('\n').at(-1), '2 passed, 1 failed, 1 skipped');
  });
});
