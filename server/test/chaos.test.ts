import assert from 'node:assert/strict';
import { needService } from '@orloj/common/test-support';
import { HarnessScript } from './support/harness-script.js';

/**
 * scripts/chaos.ts with small settings, in both topologies (docs/chaos.md),
 * then the guarantees checked from the database; the script exits 0 only when
 * every check holds. The load stays modest: the machine is shared with the
 * database and the broker.
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
  afterEach(() => script?.stop(20_000));

  // 3 scheduler and 2 runner processes, the leader and a runner SIGKILLed every
  // few seconds for 20 s (about 3 minutes of clock time at speed 10), and a
  // runner with keys of its own refusing jobs for 5 s of it.
  it('keeps one job per slot, no overlaps, no misses and bounded attempts, and hands refused jobs out again', async () => {
    const args = ['--workflows', '200', '--duration', '20', '--speed', '10', '--kill-every', '5', '--restart-after', '1', '--wrong-keys', '5'];
    script = new HarnessScript('chaos', args, { databaseUrl, amqpUrl });
    await script.assertPasses();
    assert.match(script.output, /wrong keys .* refused [1-9]\d* job messages; the schedulers handed [1-9]\d* jobs out again/);
  });

  // The embedded server (every role, the in-process bus) restarted ~3 s after
  // it is up each time, for 24 s, SIGTERM and SIGKILL in turn, with jobs in
  // flight at a target that takes 200 ms to answer.
  it('keeps them across restarts of the embedded server, SIGTERM and SIGKILL, and resumes work at once', async () => {
    const args = ['--topology', 'embedded', '--workflows', '100', '--duration', '24', '--speed', '10', '--kill-every', '3', '--restart-after', '1', '--target-delay', '200'];
    script = new HarnessScript('chaos', args, { databaseUrl, amqpUrl });
    await script.assertPasses();
    assert.match(script.output, /restarts +\d+ \([1-9]\d* SIGTERM, [1-9]\d* SIGKILL/);
  });
});
