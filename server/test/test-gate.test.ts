/**
 * The gate itself (docs/testing.md, "A strict gate"): mocha run with the
 * repository's own .mocharc.cjs on small spec files, each committing one of the
 * mistakes that would let a green run hide tests. Each must end the run with a
 * non-zero exit code and a message naming the mistake.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { tempDir } from '@orloj/common/test-support';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const run = promisify(execFile);

interface Outcome {
  code: number;
  output: string;
}

describe('the test gate', function () {
  this.timeout(120_000);
  const dir = tempDir('orloj-gate-');

  /** Runs mocha with the repository's config (as `npm test` does) on one spec; exit code and all output. */
  async function mocha(name: string, spec: string, env: Record<string, string> = {}): Promise<Outcome> {
    const file = path.join(dir(), name);
    fs.writeFileSync(file, spec);
    const args = [path.join(ROOT, 'node_modules/mocha/bin/mocha.js'), '--config', path.join(ROOT, '.mocharc.cjs'), file];
    const options = { cwd: ROOT, env: { PATH: process.env.PATH ?? '', REQUIRE_SERVICES: '1', ORLOJ_LEAK_GRACE_MS: '5000', ...env } };
    try {
      const { stdout, stderr } = await run(process.execPath, args, options);
      return { code: 0, output: stdout + stderr };
    } catch (err) {
      const e = err as { code: number; stdout: string; stderr: string };
      return { code: e.code, output: e.stdout + e.stderr };
    }
  }

  it('passes a clean spec, with its counts on the closing line', async () => {
    const { code, output } = await mocha('clean.cjs', "it('one', () => {}); it('two', () => {});\n");
    assert.equal(code, 0, output);
    assert.equal(output.trimEnd().split('\n').at(-1), '2 passed, 0 failed, 0 skipped');
  });

  it('fails a committed it.only, naming the file and line', async () => {
    const { code, output } = await mocha('focused.cjs', "it('another', () => {});\nit.only('the focused one', () => {});\n");
    assert.notEqual(code, 0, output);
    assert.match(output, /`\.only` forbidden/);
    assert.match(output, /focused\.cjs:2/);
  });

  it('refuses .only in lint, naming the line', async () => {
    const source = "describe('a suite', () => {\n  it.only('the focused one', () => {});\n});\n";
    const options = { cwd: ROOT, input: source };
    const lint = await new Promise<Outcome>((resolve) => {
      const child = execFile(process.execPath, [path.join(ROOT, 'node_modules/eslint/bin/eslint.js'), '--stdin', '--stdin-filename', 'common/test/focused.test.ts'], options, (err, stdout, stderr) =>
        resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, output: stdout + stderr }),
      );
      child.stdin?.end(source);
    });
    assert.notEqual(lint.code, 0, lint.output);
    assert.match(lint.output, /2:3\s+error\s+'it\.only' is restricted/);
  });

  it('fails an unexpected this.skip() where every service is required, naming the test', async () => {
    const spec = "it('runs', () => {});\nit('gives up quietly', function () { this.skip(); });\n";
    const strict = await mocha('skip.cjs', spec);
    assert.notEqual(strict.code, 0, strict.output);
    assert.match(strict.output, /gives up quietly:\s+Error: Pending test forbidden/);
    assert.equal(strict.output.trimEnd().split('\n').at(-1), '1 passed, 1 failed, 0 skipped');
    // Without REQUIRE_SERVICES (a laptop without RabbitMQ) a skip stays a skip.
    const lenient = await mocha('skip.cjs', spec, { REQUIRE_SERVICES: '0' });
    assert.equal(lenient.code, 0, lenient.output);
    assert.equal(lenient.output.trimEnd().split('\n').at(-1), '1 passed, 0 failed, 1 skipped');
  });

  it('counts the tests a failing before hook kept from running as failed, and names the hook', async () => {
    const spec = [
      "describe('a suite whose setup fails', function () {",
      "  before(() => { throw new Error('the database is gone'); });",
      "  it('first', () => {});",
      "  it('second', () => {});",
      "  describe('nested', () => { it('third', () => {}); });",
      '});',
      "describe('a suite whose teardown fails', function () {",
      "  afterEach(() => { throw new Error('could not clean up'); });",
      "  it('runs', () => {});",
      "  it('never runs', () => {});",
      '});',
      "it('elsewhere', () => {});",
      '',
    ].join('\n');
    const { code, output } = await mocha('hook.cjs', spec);
    assert.notEqual(code, 0, output);
    for (const title of ['first', 'second', 'third']) {
      assert.match(output, new RegExp(`${title}:\\s+Test skipped due to failure in hook .*before all.*the database is gone`));
    }
    assert.match(output, /1 test\(s\) did not run, counted as failed:\n {2}- a suite whose teardown fails never runs \(kept from running by the failing "after each" hook for "runs"/);
    // before all (1) + the 3 tests it kept + after each (1) + the 1 test it kept
    assert.equal(output.trimEnd().split('\n').at(-1), '2 passed, 6 failed, 0 skipped');
  });

  it('fails a run that executed fewer tests than its floor', async () => {
    const { code, output } = await mocha('floor.cjs', "it('one', () => {}); it('two', () => {});\n", { ORLOJ_TEST_FLOOR: '3', ORLOJ_TEST_FLOOR_NAME: 'the gate tier' });
    assert.notEqual(code, 0, output);
    assert.match(output, /only 2 tests ran, fewer than the floor of 3 for the gate tier/);
    assert.equal(output.trimEnd().split('\n').at(-1), '2 passed, 1 failed, 0 skipped');
  });
});
