import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { finish, orloj, waitForLine } from './support/cli.js';

/**
 * Issue 30: a body over 4 MiB gets the 413 problem document even from a
 * client that sends the whole body before it reads (Node's fetch, no
 * `Expect: 100-continue`). Against the real process: the in-process harness
 * shares the client's event loop, which hides the race (before the fix, 5 of
 * 20 such requests to `orloj start` failed with a reset).
 */
describe('413 that clients can read: the real api process', function () {
  this.timeout(120_000);
  let dir: string;
  let child: ReturnType<typeof orloj>;
  let base: string;

  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'orloj-413-'));
    child = orloj(['start', '--roles', 'api'], { DATA_DIR: dir, PORT: '0', RATE_LIMIT_ENABLED: 'false' });
    const line = await waitForLine(child, /orloj is running/);
    base = `http://127.0.0.1:${/listening on [^:]+:(\d+)/.exec(line)![1]}`;
  });
  after(async () => {
    const exit = finish(child);
    child.kill('SIGTERM');
    await exit;
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it("answers 413 to a 5 MiB body sent by Node's fetch, 20 times out of 20", async () => {
    const big = JSON.stringify({ email: 'big@example.com', password: 'x'.repeat(5 * 1024 * 1024) });
    const failures: string[] = [];
    for (let i = 0; i < 20; i++) {
      try {
        const res = await fetch(`${base}/auth/register`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: big });
        const problem = (await res.json()) as { code?: string };
        if (res.status !== 413 || problem.code !== 'body_too_large') failures.push(`${res.status} ${problem.code}`);
      } catch (err) {
        failures.push(String((err as { cause?: unknown }).cause ?? err));
      }
    }
    assert.deepEqual(failures, []);
  });
});
