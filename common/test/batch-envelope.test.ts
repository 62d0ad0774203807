import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { MemoryBus, type Bus } from '../src/bus/index.js';
import { ManualClock } from '../src/core/clock.js';
import { BATCH_TYPE, EnvelopeSigner, EnvelopeVerifier, PRODUCER_ROLES, type Envelope } from '../src/envelope/index.js';
import { roleBus } from '../src/envelope/role-bus.js';
import { silentLogger } from '../src/logging/logger.js';
import { MESSAGE_TYPES, PRODUCER_POLICY, QUEUES, type JobRunMessage, type JobStartedMessage } from '../src/messages/index.js';
import { deferred, Inbox, waitFor } from './support/async.js';

const pairs = Object.fromEntries(PRODUCER_ROLES.map((role) => [role, crypto.generateKeyPairSync('ed25519')]));
const keys = {
  privateKeys: Object.fromEntries(PRODUCER_ROLES.map((r) => [r, pairs[r]!.privateKey])),
  publicKeys: Object.fromEntries(PRODUCER_ROLES.map((r) => [r, pairs[r]!.publicKey])),
};
const started = (job_id: string): JobStartedMessage => ({ job_id, attempt: 1, runner_id: 'r1', started_at: 1 });
const jobRun = (job_id: string): JobRunMessage => ({ job_id, workflow_id: 'w', attempt: 1, kind: 'HEARTBEAT', payload: '{}', log_retention: false });

type Envelopes = Envelope & { body: unknown };

/**
 * A bus that is not in-process (so roles sign and batch) over a MemoryBus,
 * recording what goes over the wire.
 */
function remoteBus(): { bus: Bus; wire: Map<string, Envelopes[]>; memory: MemoryBus } {
  const memory = new MemoryBus({ logger: silentLogger, prefix: 'test.' });
  const wire = new Map<string, Envelopes[]>();
  const bus: Bus = {
    publish: (queue, message, options) => {
      wire.set(queue, [...(wire.get(queue) ?? []), JSON.parse(JSON.stringify(message)) as Envelopes]);
      return memory.publish(queue, message, options);
    },
    consume: (...a) => memory.consume(...a),
    broadcast: (...a) => memory.broadcast(...a),
    subscribe: (...a) => memory.subscribe(...a),
    close: () => memory.close(),
  };
  return { bus, wire, memory };
}

describe('batch envelopes', () => {
  const clock = new ManualClock();
  let remote: ReturnType<typeof remoteBus>;
  const as = (role: 'scheduler' | 'runners' | 'notifier') => roleBus({ bus: remote.bus, role, keys, clock, logger: silentLogger });

  /** What a role's consumer of the queue receives. */
  async function inbox(bus: ReturnType<typeof as>, queue: string): Promise<Inbox<Envelope>> {
    const received = new Inbox<Envelope>();
    await bus.consume(queue, (envelope) => received.push(envelope), { prefetch: 8 });
    return received;
  }

  beforeEach(() => {
    remote = remoteBus();
  });
  afterEach(() => remote.memory.close());

  it('sends what a role publishes together to a batched queue as one envelope, signed once; the consumer handles each message as its own', async () => {
    const runners = as('runners');
    const received = await inbox(as('scheduler'), QUEUES.jobEvents);
    const sent = await Promise.all(['a', 'b', 'c'].map((id) => runners.publish(QUEUES.jobEvents, MESSAGE_TYPES.jobStarted, started(id))));
    const [batch, ...more] = remote.wire.get(QUEUES.jobEvents)!;
    assert.equal(more.length, 0, 'one broker message');
    assert.equal(batch!.type, BATCH_TYPE);
    assert.equal(new Set(sent.map((e) => e.id)).size, 3);
    assert.deepEqual(
      (await received.take(3)).map((e) => [e.id, e.type, e.body]),
      sent.map((e) => [e.id, MESSAGE_TYPES.jobStarted, e.body]),
    );
  });

  it('sends only plain envelopes with batches turned off (BUS_BATCH=false)', async () => {
    const runners = roleBus({ bus: remote.bus, role: 'runners', keys, clock, logger: silentLogger, batch: false });
    await Promise.all(['a', 'b'].map((id) => runners.publish(QUEUES.jobEvents, MESSAGE_TYPES.jobStarted, started(id))));
    assert.deepEqual(
      remote.wire.get(QUEUES.jobEvents)!.map((m) => [m.type, 'batch' in m]),
      [
        [MESSAGE_TYPES.jobStarted, false],
        [MESSAGE_TYPES.jobStarted, false],
      ],
    );
  });

  it('sends a message published alone in the older form, which an older verifier takes', async () => {
    const runners = as('runners');
    const sent = await runners.publish(QUEUES.jobEvents, MESSAGE_TYPES.jobStarted, started('alone'));
    const [message] = remote.wire.get(QUEUES.jobEvents)!;
    assert.deepEqual(message, sent);
    assert.equal('batch' in message!, false);
    const older = new EnvelopeVerifier({ publicKeys: keys.publicKeys, policy: PRODUCER_POLICY, clock });
    assert.equal(older.verify(message).ok, true);
  });

  it('refuses a body its decoder cannot read alone, and handles the rest of its batch', async () => {
    const runners = as('runners');
    const scheduler = as('scheduler');
    const received = new Inbox<Envelope>();
    const malformed: string[] = [];
    await scheduler.consume(QUEUES.jobEvents, (envelope) => received.push(envelope), { prefetch: 8, onMalformed: (problem) => malformed.push(problem) });
    await Promise.all([
      runners.publish(QUEUES.jobEvents, MESSAGE_TYPES.jobStarted, started('first')),
      runners.publish(QUEUES.jobEvents, MESSAGE_TYPES.jobStarted, { job_id: 'bad' } as unknown as JobStartedMessage),
      runners.publish(QUEUES.jobEvents, MESSAGE_TYPES.jobStarted, started('last')),
    ]);
    assert.equal(remote.wire.get(QUEUES.jobEvents)!.length, 1);
    assert.deepEqual(
      (await received.take(2)).map((e) => (e.body as JobStartedMessage).job_id),
      ['first', 'last'],
    );
    assert.equal(malformed.length, 1);
    assert.equal(scheduler.rejected.malformed, 1);
  });

  it('dead-letters a batch that fails its signature check, and only that batch', async () => {
    const scheduler = as('scheduler');
    // A runner of another installation: its key is not the one the scheduler knows.
    const stranger = roleBus({ bus: remote.bus, role: 'runners', keys: { ...keys, privateKeys: { runners: crypto.generateKeyPairSync('ed25519').privateKey } }, clock, logger: silentLogger });
    const runners = as('runners');
    const received = await inbox(scheduler, QUEUES.jobEvents);
    const dead = new Inbox<unknown>();
    await scheduler.consumeDeadLetters(QUEUES.jobEvents, (message) => dead.push(message));
    await Promise.all(['x', 'y'].map((id) => stranger.publish(QUEUES.jobEvents, MESSAGE_TYPES.jobStarted, started(id))));
    const ok = await runners.publish(QUEUES.jobEvents, MESSAGE_TYPES.jobStarted, started('ok'));
    assert.equal(((await dead.next('the refused batch')) as Envelope).type, BATCH_TYPE);
    assert.equal((await received.next()).id, ok.id);
    assert.equal(scheduler.rejected.bad_signature, 1);
  });

  it('refuses as wrong_producer a batch holding a message its producer may not send', async () => {
    const scheduler = as('scheduler');
    const runnersSigner = new EnvelopeSigner({ role: 'runners', privateKey: keys.privateKeys.runners!, clock });
    const batch = runnersSigner.sealBatch([runnersSigner.item(MESSAGE_TYPES.jobStarted, started('s')), runnersSigner.item(MESSAGE_TYPES.jobRun, jobRun('forged'))]);
    const dead = new Inbox<unknown>();
    let handled = 0;
    await scheduler.consume(QUEUES.jobEvents, () => void (handled += 1), { prefetch: 8 });
    await scheduler.consumeDeadLetters(QUEUES.jobEvents, (message) => dead.push(message));
    await remote.bus.publish(QUEUES.jobEvents, batch);
    assert.deepEqual(await dead.next(), batch);
    assert.equal(handled, 0);
    assert.equal(scheduler.rejected.wrong_producer, 1);
  });

  it('runs again only the messages whose handler failed when a batch is redelivered', async () => {
    const runners = as('runners');
    const scheduler = as('scheduler');
    const handled: string[] = [];
    let failed = false;
    await scheduler.consume(
      QUEUES.jobEvents,
      (envelope) => {
        const id = (envelope.body as JobStartedMessage).job_id;
        if (id === 'b' && !failed) {
          failed = true;
          throw new Error('transient');
        }
        handled.push(id);
      },
      { prefetch: 8 },
    );
    await Promise.all(['a', 'b', 'c'].map((id) => runners.publish(QUEUES.jobEvents, MESSAGE_TYPES.jobStarted, started(id))));
    await waitFor(() => handled.includes('b'), 'the redelivered message');
    assert.deepEqual([...handled].sort(), ['a', 'b', 'c']);
    assert.equal(scheduler.rejected.replayed, 0, 'a redelivery is no replay');
  });

  it('hands a batch’s messages to the handler at once, in order, before anything delivered after it', async () => {
    const runners = as('runners');
    const scheduler = as('scheduler');
    const release = deferred();
    const order: string[] = [];
    await scheduler.consume(
      QUEUES.jobEvents,
      async (envelope) => {
        order.push(`${envelope.type === MESSAGE_TYPES.jobStarted ? 'started' : 'finished'} ${(envelope.body as JobStartedMessage).job_id}`);
        await release.promise;
      },
      { prefetch: 2 },
    );
    // A runner's starts of one turn go as one batch; a quick check's result follows alone, in a delivery of its own.
    await Promise.all(['a', 'b', 'c', 'd'].map((id) => runners.publish(QUEUES.jobEvents, MESSAGE_TYPES.jobStarted, started(id))));
    assert.equal(remote.wire.get(QUEUES.jobEvents)?.length, 1, 'the starts went as one batch');
    await runners.publish(QUEUES.jobEvents, MESSAGE_TYPES.jobFinished, { job_id: 'c', attempt: 1, runner_id: 'r1', status: 'COMPLETED', started_at: 1, finished_at: 2 });
    try {
      // Both deliveries in hand (the prefetch counts broker messages, the batch as one), none of them handled yet.
      await waitFor(() => order.length === 5, 'every message in hand');
      assert.deepEqual(order, ['started a', 'started b', 'started c', 'started d', 'finished c']);
    } finally {
      release.resolve();
    }
  });

  it('sends jobs apart, one broker message each under one signature over their digests, and refuses one altered on the way', async () => {
    const scheduler = as('scheduler');
    const received = await inbox(as('runners'), QUEUES.jobs);
    const sent = await Promise.all(['1', '2', '3'].map((id) => scheduler.publish(QUEUES.jobs, MESSAGE_TYPES.jobRun, jobRun(id))));
    const wire = remote.wire.get(QUEUES.jobs)!;
    assert.equal(wire.length, 3);
    assert.equal(new Set(wire.map((m) => m.sig)).size, 1, 'one signature');
    assert.ok(wire.every((m) => m.batch?.digests.length === 3));
    assert.deepEqual(
      (await received.take(3)).map((e) => e.id),
      sent.map((e) => e.id),
    );

    // The signature is known by now: an altered copy of one of them still fails, as does the signed list posing as a message.
    const verifier = new EnvelopeVerifier({ publicKeys: keys.publicKeys, policy: PRODUCER_POLICY, clock });
    assert.equal(verifier.verify(wire[0]).ok, true);
    const altered = { ...wire[1]!, id: crypto.randomUUID(), body: jobRun('other') };
    assert.deepEqual(verifier.verify(altered), { ok: false, reason: 'bad_signature', detail: 'the signature does not match', claimed: { id: altered.id, type: MESSAGE_TYPES.jobRun, producer: 'scheduler' } });
    const { batch, ...fields } = wire[2]!;
    const list = { ...fields, id: batch!.id, type: 'batch.digests', body: batch!.digests };
    const posing = verifier.verify(list);
    assert.equal(posing.ok, false);
    assert.equal(posing.ok ? undefined : posing.reason, 'bad_signature');
  });
});
