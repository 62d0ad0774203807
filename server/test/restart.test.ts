import { requireServices, needService } from '@orloj/common/test-support';
import { ensureBroker, ensureDatabase, serviceControl, type ServiceControl } from '../../scripts/restart-services.js';
import { HarnessScript } from './support/harness-script.js';

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
  let script: HarnessScript | undefined;

  before(function () {
    databaseUrl = needService(this, 'postgres');
    amqpUrl = needService(this, 'amqp');
    const found = serviceControl(databaseUrl, amqpUrl);
    if (typeof found === 'string') {
      // Services elsewhere cannot be restarted from here; CI (REQUIRE_SERVICES=1) runs them on this machine, so a skip there hides the suite.
      if (requireServices) throw new Error(`REQUIRE_SERVICES=1 but ${found}`);
      this.skip();
    }
    control = found;
  });

  after(async function () {
    this.timeout(200_000);
    // A timed-out run: SIGTERM lets the script kill its processes, bring the services back and drop its schema and queues.
    await script?.stop(60_000, true);
    // Whatever happened, the services run and accept connections before the next suite.
    if (control) {
      await ensureBroker(amqpUrl);
      await ensureDatabase(databaseUrl, control);
    }
  });

  it('loses no accepted work and creates no duplicate jobs', async () => {
    const args = ['--workflows', '50', '--speed', '5', '--warmup', '15', '--run-on', '15', '--broker-outage', '3', '--db-outage', '3', '--settle-timeout', '60', '--exit-with-parent'];
    const more: Record<string, string> = process.env.ORLOJ_TEST_PG_CLUSTER ? { ORLOJ_TEST_PG_CLUSTER: process.env.ORLOJ_TEST_PG_CLUSTER } : {};
    script = new HarnessScript('restart', args, { databaseUrl, amqpUrl, more });
    await script.assertPasses();
  });
});
