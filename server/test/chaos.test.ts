import { needService } from '../../common/test/support/services.js';
import { HarnessScript } from './support/harness-script.js';

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
  let script: HarnessScript | undefined;

  before(function () {
    databaseUrl = needService(this, 'postgres');
    amqpUrl = needService(this, 'amqp');
  });

  // A timed-out run: SIGTERM lets the script kill its processes and drop its schema and queues.
  after(() => script?.stop(20_000));

  it('keeps one job per slot, no overlaps, no misses and bounded attempts', async () => {
    const args = ['--workflows', '200', '--duration', '30', '--speed', '10', '--kill-every', '5', '--restart-after', '1'];
    script = new HarnessScript('chaos', args, { databaseUrl, amqpUrl });
    await script.assertPasses();
  });
});
