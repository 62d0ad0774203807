import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { requireServices, needService } from '../../common/test/support/services.js';
import { ensureBroker, ensureDatabase, serviceControl, type ServiceControl } from '../../scripts/restart-services.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const SCRIPT = path.join(ROOT, 'scripts/restart.ts');

/**
 * scripts/restart.ts with the suite's settings: one api+scheduler+runners
 * process, one scheduler and one runner on real PostgreSQL and RabbitMQ, 50
 * one-minute HEARTBEAT workflows at speed 5; RabbitMQ is restarted
 * (rabbitmqctl stop_app, 3 s, start_app) and then PostgreSQL (pg_ctlcluster
 * stop, 3 s, start) while jobs run. The processes must ride out both on their
 * own; the script exits 0 only when every check holds (docs/chaos.md). It
 * restarts the shared services, so it needs them on this machine; whatever
 * happens, both run again when this suite ends.
 */
describe('restart: RabbitMQ and PostgreSQL restarted under orloj processes', function () {
  this.timeout(300_000);
  let databaseUrl: string;
  let amqpUrl: string;
  let control: ServiceControl | undefined;
  let child: ChildProcess | undefined;

  before(function () {
    databaseUrl = needService(this, 'postgres');
    amqpUrl = needService(this, 'amqp');
    const found = serviceControl(databaseUrl, amqpUrl);
    if (typeof found === 'string') {
      // Services elsewhere cannot be restarted from here; local ones without the tools are a broken setup.
      if (requireServices && !found.includes('not on this machine')) throw new Error(`REQUIRE_SERVICES=1 but ${found}`);
      this.skip();
    }
    control = found;
  });

  after(async function () {
    this.timeout(200_000);
    // A timed-out run: SIGTERM lets the script kill its processes, bring the services back and drop its schema and queues.
    if (child && child.exitCode === null && child.signalCode === null) {
      const exited = once(child, 'exit');
      child.kill('SIGTERM');
      await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 60_000))]);
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    }
    // Whatever happened, the services run and accept connections before the next suite.
    if (control) {
      await ensureBroker(amqpUrl);
      await ensureDatabase(databaseUrl, control);
    }
  });

  it('loses no accepted work and creates no duplicate jobs', async () => {
    const args = ['--workflows', '50', '--speed', '5', '--warmup', '15', '--run-on', '15', '--broker-outage', '3', '--db-outage', '3', '--settle-timeout', '60', '--exit-with-parent'];
    child = spawn(process.execPath, ['--import', 'tsx', '--conditions=orloj-src', SCRIPT, ...args], {
      cwd: ROOT,
      env: {
        PATH: process.env.PATH ?? '',
        HOME: process.env.HOME ?? '',
        TEST_DATABASE_URL: databaseUrl,
        TEST_AMQP_URL: amqpUrl,
        ...(process.env.ORLOJ_TEST_PG_CLUSTER ? { ORLOJ_TEST_PG_CLUSTER: process.env.ORLOJ_TEST_PG_CLUSTER } : {}),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
    const [code, signal] = (await once(child, 'exit')) as [number | null, string | null];
    assert.equal(code, 0, `restart exited with ${signal ?? `code ${code}`}:\n${output}`);
    assert.match(output, /result\s+PASS/);
  });
});
