import assert from 'node:assert/strict';
import { once } from 'node:events';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { newId } from '@orloj/common/core';
import { openDatabase, Store } from '@orloj/common/store';
import { until } from '@orloj/common/test-support';
import { orloj, waitForLine } from './support/cli.js';
import { insertDueWorkflows, slowTarget } from './support/slow-target.js';

/** Resolves with the exit code, or with undefined if the child still runs after `ms`. */
async function exitWithin(child: ReturnType<typeof orloj>, ms: number): Promise<number | null | undefined> {
  if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<undefined>((resolve) => (timer = setTimeout(resolve, ms, undefined))); // bounds the wait: the exit event comes first
  const exited = once(child, 'exit').then(([code]) => code as number | null);
  const result = await Promise.race([exited, timeout]);
  clearTimeout(timer);
  return result;
}

/**
 * Issue 30: a process whose output pipe is gone (a log shipper or a `| tee`
 * that exited) still stops on SIGTERM: the signal handler's log line failing
 * with EPIPE must not keep the shutdown from starting.
 */
describe('signals: a process whose output pipe is closed', function () {
  this.timeout(120_000);
  let dir: string;
  let child: ReturnType<typeof orloj> | undefined;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'orloj-signals-'));
  });
  afterEach(() => {
    if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('ends on SIGTERM after its stdout and stderr readers went away', async () => {
    child = orloj(['start'], { DATA_DIR: dir, PORT: '0', LOG_LEVEL: 'info' });
    await waitForLine(child, /orloj is running/);
    child.stdout!.destroy();
    child.stderr!.destroy();
    // A log line written while the reader is gone meets EPIPE before the signal does.
    child.kill('SIGTERM');
    // Generous for a busy machine: the ordered shutdown of an idle process takes well under a second.
    const code = await exitWithin(child, 30_000);
    assert.notEqual(code, undefined, 'still running 30 s after SIGTERM');
    assert.equal(code, 0);
  });

  it('exits at once on a second SIGTERM while the first one waits for a running job', async () => {
    // Never answers within the test: the running job holds the runners' drain (RUNNER_SHUTDOWN_GRACE).
    const target = await slowTarget(600_000);
    const database = openDatabase(`sqlite:${path.join(dir, 'orloj.db')}`);
    try {
      await database.migrate();
      const store = Store.fromHandle(database);
      const userId = newId();
      const now = Date.now();
      await store.users.insert({ id: userId, email: `${userId}@example.com`, passwordHash: 'x', notificationPreference: 'NONE', createdAt: now, updatedAt: now });
      await insertDueWorkflows(store, userId, target.url, now, 1);
      child = orloj(['start'], { DATA_DIR: dir, PORT: '0', LOG_LEVEL: 'info', RUNNER_ALLOW_TARGETS: '127.0.0.0/8', RUNNER_SHUTDOWN_GRACE: '10m', DOCKER_HOST: 'unix:///nonexistent.sock' });
      const line = await waitForLine(child, /orloj is running/);
      const port = Number(/listening on [^:]+:(\d+)/.exec(line)![1]);
      await until(() => store.db.selectFrom('jobs').select('id').where('status', '=', 'RUNNING').executeTakeFirst(), (row) => row !== undefined, 'the job to start', 60_000, { everyMs: 100 });
      child.stdout!.destroy();
      child.stderr!.destroy();
      child.kill('SIGTERM');
      // The ordered shutdown closes the api first: once it refuses connections, the first signal was taken.
      const answers = () => fetch(`http://127.0.0.1:${port}/livez`).then(() => true, () => false);
      await until(answers, (up) => !up, 'the api to refuse connections after SIGTERM', 30_000, { everyMs: 50 });
      assert.equal(await exitWithin(child, 1_000), undefined, 'the first SIGTERM waits for the running job');
      child.kill('SIGTERM');
      // "At once", allowing for a busy machine: the drain itself would take ten minutes.
      const code = await exitWithin(child, 10_000);
      assert.equal(code, 130, 'the second SIGTERM forces the exit');
    } finally {
      await database.close();
      target.close();
    }
  });
});
