import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { needService } from '../../common/test/support/services.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const SCRIPT = path.join(ROOT, 'scripts/chaos.ts');

/**
 * scripts/chaos.ts with small settings: 3 scheduler and 2 runner processes on
 * real PostgreSQL and RabbitMQ, the leader and a runner SIGKILLed every few
 * seconds for 30 s (about 5 minutes of clock time at speed 10), then the
 * guarantees checked from the database (docs/chaos.md). The script exits 0
 * only when every check holds. The load stays modest: the machine is shared
 * with the database and the broker.
 */
describe('chaos: SIGKILLed scheduler leaders and runners on PostgreSQL and RabbitMQ', function () {
  this.timeout(180_000);
  let databaseUrl: string;
  let amqpUrl: string;
  let child: ChildProcess | undefined;

  before(function () {
    databaseUrl = needService(this, 'postgres');
    amqpUrl = needService(this, 'amqp');
  });

  after(async () => {
    // A timed-out run: SIGTERM lets the script kill its processes and drop its schema and queues.
    if (child && child.exitCode === null && child.signalCode === null) {
      const exited = once(child, 'exit');
      child.kill('SIGTERM');
      await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 20_000))]);
    }
  });

  it('keeps one job per slot, no overlaps, no misses and bounded attempts', async () => {
    const args = ['--workflows', '200', '--duration', '30', '--speed', '10', '--kill-every', '5', '--restart-after', '1'];
    child = spawn(process.execPath, ['--import', 'tsx', '--conditions=orloj-src', SCRIPT, ...args], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', TEST_DATABASE_URL: databaseUrl, TEST_AMQP_URL: amqpUrl },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
    const [code, signal] = (await once(child, 'exit')) as [number | null, string | null];
    assert.equal(code, 0, `chaos exited with ${signal ?? `code ${code}`}:\n${output}`);
    assert.match(output, /result\s+PASS/);
  });
});
