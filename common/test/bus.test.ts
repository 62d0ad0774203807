import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { once } from 'node:events';
import net from 'node:net';
import amqp from 'amqplib';
import { AmqpBus, createBus, DeadLetterError, deadLetterQueue, type Bus, type CreateBusOptions, type Delivery } from '../src/bus/index.js';
import { OrlojError } from '../src/core/errors.js';
import { silentLogger } from '../src/logging/logger.js';
import { deferred, Inbox, waitFor, type Deferred } from './support/async.js';
import { recordingLogger } from './support/logger.js';
import { needService } from './support/services.js';

type Adapter = 'memory' | 'amqp';

/**
 * The conformance suite every Bus adapter passes. RabbitMQ runs get a random
 * name prefix, and every queue and exchange a test declared is deleted after it.
 */
function describeBus(adapter: Adapter): void {
  describe(`bus [${adapter}]`, function () {
    let url = 'memory:';
    const prefix = `orloj-test-${crypto.randomBytes(4).toString('hex')}.`;
    const buses: Bus[] = [];
    const proxies: TcpProxy[] = [];
    let counter = 0;
    const unique = (what: string): string => `${what}-${++counter}`;

    before(function () {
      if (adapter === 'amqp') url = needService(this, 'amqp');
    });

    afterEach(async () => {
      await Promise.all(buses.splice(0).map((bus) => (bus instanceof AmqpBus ? bus.destroy() : bus.close())));
      await Promise.all(proxies.splice(0).map((proxy) => proxy.close()));
    });

    async function open(options: Partial<CreateBusOptions> = {}, at = url): Promise<Bus> {
      const bus = await createBus(at, { logger: silentLogger, prefix, ...options });
      buses.push(bus);
      return bus;
    }

    it('delivers a published message to a consumer, flagged as a first delivery', async () => {
      const bus = await open();
      const queue = unique('work');
      const inbox = new Inbox<[unknown, Delivery]>();
      await bus.consume(queue, (message, delivery) => inbox.push([message, delivery]));
      await bus.publish(queue, { hello: 'world', n: 1 });
      assert.deepEqual(await inbox.next(), [{ hello: 'world', n: 1 }, { redelivered: false, deliveryCount: 1 }]);
    });

    it('redelivers a message with the redelivered flag when the handler throws, and not after it succeeds', async () => {
      const bus = await open();
      const queue = unique('work');
      const seen = new Inbox<[unknown, Delivery]>();
      let failures = 0;
      await bus.consume(queue, (message, delivery) => {
        seen.push([message, delivery]);
        if ((message as { n: number }).n === 1 && failures++ === 0) throw new Error('first attempt fails');
      });
      await bus.publish(queue, { n: 1 });
      assert.deepEqual(await seen.take(2), [
        [{ n: 1 }, { redelivered: false, deliveryCount: 1 }],
        [{ n: 1 }, { redelivered: true, deliveryCount: 2 }],
      ]);
      // prefetch 1: a third copy of n=1 would come before n=2
      await bus.publish(queue, { n: 2 });
      assert.deepEqual((await seen.next())[0], { n: 2 });
    });

    it('never has more than prefetch messages in flight', async () => {
      const bus = await open();
      const queue = unique('work');
      let inFlight = 0;
      let most = 0;
      let done = 0;
      const started = new Inbox<Deferred<void>>();
      await bus.consume(
        queue,
        async () => {
          most = Math.max(most, ++inFlight);
          const gate = deferred();
          started.push(gate);
          await gate.promise;
          inFlight -= 1;
          done += 1;
        },
        { prefetch: 2 },
      );
      for (let i = 0; i < 6; i++) await bus.publish(queue, { i });
      const gates = await started.take(2, 'two handlers in flight');
      for (let i = 2; i < 6; i++) {
        gates.shift()?.resolve();
        gates.push(await started.next(`handler ${i + 1}`));
      }
      for (const gate of gates) gate.resolve();
      await waitFor(() => done === 6, 'all six handlers');
      assert.equal(most, 2);
    });

    it('moves a message to <queue>.dead once it failed maxDeliveries times', async () => {
      const bus = await open({ maxDeliveries: 3 });
      const queue = unique('work');
      const attempts: Delivery[] = [];
      const dead = new Inbox<[unknown, Delivery]>();
      await bus.consume(queue, (_message, delivery) => {
        attempts.push(delivery);
        throw new Error('poison');
      });
      await bus.consume(deadLetterQueue(queue), (message, delivery) => dead.push([message, delivery]));
      await bus.publish(queue, { poison: true });
      const [message] = await dead.next('the dead-lettered message');
      assert.deepEqual(message, { poison: true });
      assert.deepEqual(
        attempts.map((d) => d.deliveryCount),
        [1, 2, 3],
      );
    });

    it('moves a message whose handler throws DeadLetterError to <queue>.dead at once', async () => {
      const bus = await open({ maxDeliveries: 5 });
      const queue = unique('refused');
      let attempts = 0;
      const dead = new Inbox<unknown>();
      await bus.consume(queue, () => {
        attempts += 1;
        throw new DeadLetterError('no delivery could handle it');
      });
      await bus.consume(deadLetterQueue(queue), (message) => dead.push(message));
      await bus.publish(queue, { forged: true });
      assert.deepEqual(await dead.next('the refused message'), { forged: true });
      assert.equal(attempts, 1);
    });

    it('broadcasts every message, in order, to every subscriber', async () => {
      const bus = await open();
      const topic = unique('news');
      const a = new Inbox<unknown>();
      const b = new Inbox<unknown>();
      await bus.subscribe(topic, a.push);
      await bus.subscribe(topic, b.push);
      for (let i = 1; i <= 3; i++) await bus.broadcast(topic, { i });
      const expected = [{ i: 1 }, { i: 2 }, { i: 3 }];
      assert.deepEqual(await a.take(3), expected);
      assert.deepEqual(await b.take(3), expected);
    });

    it('keeps delivering broadcasts to a subscriber whose handler threw', async () => {
      const bus = await open();
      const topic = unique('news');
      const seen = new Inbox<unknown>();
      await bus.subscribe(topic, (message) => {
        seen.push(message);
        throw new Error('handler bug');
      });
      await bus.broadcast(topic, { i: 1 });
      await bus.broadcast(topic, { i: 2 });
      assert.deepEqual(await seen.take(2), [{ i: 1 }, { i: 2 }]);
    });

    it('does not deliver broadcasts sent while a subscriber was away', async () => {
      const bus = await open();
      const topic = unique('news');
      const first = new Inbox<unknown>();
      const later = new Inbox<unknown>();
      const subscription = await bus.subscribe(topic, first.push);
      await bus.broadcast(topic, { i: 1 });
      assert.deepEqual(await first.next(), { i: 1 });
      await subscription.cancel();
      await bus.broadcast(topic, { i: 2 });
      await bus.subscribe(topic, later.push);
      await bus.broadcast(topic, { i: 3 });
      assert.deepEqual(await later.next(), { i: 3 });
      assert.deepEqual(first.all, [{ i: 1 }]);
    });

    it('hands every delivery its own JSON copy of the message', async () => {
      const bus = await open();
      const queue = unique('work');
      const copies = new Inbox<unknown>();
      await bus.consume(queue, (message, delivery) => {
        copies.push(message);
        if (delivery.deliveryCount === 1) {
          (message as { list: number[] }).list.push(3);
          throw new Error('try again');
        }
      });
      const original = { list: [1, 2], text: 'žluťoučký', nothing: null, gone: undefined };
      await bus.publish(queue, original);
      original.list.push(99);
      const [first, second] = await copies.take(2);
      assert.notEqual(first, second);
      assert.deepEqual(second, { list: [1, 2], text: 'žluťoučký', nothing: null });
    });

    it('rejects messages that are not plain JSON, as the wire would', async () => {
      const bus = await open();
      const queue = unique('work');
      const cycle: Record<string, unknown> = {};
      cycle.self = cycle;
      const bad: Array<[string, unknown]> = [
        ['a Date', { at: new Date() }],
        ['a bigint', { n: 1n }],
        ['NaN', { n: Number.NaN }],
        ['a function', { f: () => 1 }],
        ['a Map', new Map()],
        ['undefined', undefined],
        ['an undefined array item', [undefined]],
        ['a cycle', cycle],
      ];
      for (const [what, value] of bad) {
        await assert.rejects(bus.publish(queue, value), (err) => err instanceof OrlojError && /plain JSON/.test(err.message), what);
      }
      await assert.rejects(bus.broadcast(unique('news'), { at: new Date() }), /plain JSON/);
    });

    it('rejects names it cannot carry and prefetch values out of range', async () => {
      const bus = await open();
      await assert.rejects(bus.publish('has space', {}), /bus name/);
      await assert.rejects(bus.subscribe('', () => {}), /bus name/);
      await assert.rejects(bus.consume(unique('work'), () => {}, { prefetch: 0 }), /prefetch/);
    });

    it('waits for in-flight handlers when closing, then refuses new work', async () => {
      const bus = await open();
      const queue = unique('work');
      const started = deferred();
      const release = deferred();
      const order: string[] = [];
      await bus.consume(queue, async () => {
        started.resolve();
        await release.promise;
        order.push('handler finished');
      });
      await bus.publish(queue, {});
      await started.promise;
      const closing = bus.close();
      assert.equal(bus.close(), closing, 'close() is memoised');
      const closed = closing.then(() => order.push('closed'));
      await new Promise((resolve) => setImmediate(resolve));
      assert.deepEqual(order, []);
      release.resolve();
      await closed;
      assert.deepEqual(order, ['handler finished', 'closed']);
      await assert.rejects(bus.publish(queue, {}), /closed/);
      await assert.rejects(bus.consume(queue, () => {}), /closed/);
    });

    it('stops delivering to a cancelled consumer', async () => {
      const bus = await open();
      const queue = unique('work');
      const cancelled = new Inbox<unknown>();
      const active = new Inbox<unknown>();
      const subscription = await bus.consume(queue, cancelled.push);
      await subscription.cancel();
      await bus.consume(queue, active.push);
      await bus.publish(queue, { i: 1 });
      await bus.publish(queue, { i: 2 });
      assert.deepEqual(await active.take(2), [{ i: 1 }, { i: 2 }]);
      assert.deepEqual(cancelled.all, []);
    });

    if (adapter !== 'amqp') return;

    describe('with RabbitMQ', () => {
      async function proxy(): Promise<TcpProxy> {
        const p = await TcpProxy.start(url);
        proxies.push(p);
        return p;
      }

      it('fans broadcasts out to subscribers on other connections', async () => {
        const a = await open();
        const b = await open();
        const topic = unique('news');
        const onA = new Inbox<unknown>();
        const onB = new Inbox<unknown>();
        await a.subscribe(topic, onA.push);
        await b.subscribe(topic, onB.push);
        await a.broadcast(topic, { from: 'a' });
        assert.deepEqual(await onA.next(), { from: 'a' });
        assert.deepEqual(await onB.next(), { from: 'a' });
      });

      it('declares a queue again when someone deleted it, instead of publishing into the void', async () => {
        const bus = await open();
        const queue = unique('work');
        await bus.publish(queue, { n: 1 });
        const admin = await amqp.connect(url);
        await (await admin.createChannel()).deleteQueue(prefix + queue);
        await admin.close();
        await bus.publish(queue, { n: 2 });
        const inbox = new Inbox<unknown>();
        await bus.consume(queue, inbox.push);
        assert.deepEqual(await inbox.next(), { n: 2 });
      });

      /** A process whose connection the test cuts, and another that takes over its queue. */
      async function doomedAndSurvivor(): Promise<{ link: Awaited<ReturnType<typeof proxy>>; doomed: Bus; survivor: Bus; queue: string }> {
        const link = await proxy();
        // a long backoff keeps the "dead" process from reconnecting and taking the message back
        const doomed = await open({ reconnectDelayMs: { min: 60_000, max: 60_000 } }, link.url);
        return { link, doomed, survivor: await open(), queue: unique('work') };
      }

      it('redelivers to another process when a consumer dies before acking', async () => {
        const { link, doomed, survivor, queue } = await doomedAndSurvivor();
        const started = deferred();
        const release = deferred();
        await doomed.consume(queue, async () => {
          started.resolve();
          await release.promise;
        });
        await doomed.publish(queue, { job: 1 });
        await started.promise;
        const redelivered = new Inbox<[unknown, Delivery]>();
        await survivor.consume(queue, (message, delivery) => redelivered.push([message, delivery]));
        link.drop();
        assert.deepEqual(await redelivered.next('the redelivery'), [{ job: 1 }, { redelivered: true, deliveryCount: 2 }]);
        release.resolve();
      });

      it('acks handled messages by batch, never one still in hand: only those are redelivered when the consumer dies', async () => {
        const { link, doomed, survivor, queue } = await doomedAndSurvivor();
        const release = deferred();
        const arrived = new Inbox<number>();
        const held = new Set([1, 4, 5]);
        await doomed.consume(
          queue,
          async (message) => {
            const { n } = message as { n: number };
            arrived.push(n);
            if (held.has(n)) await release.promise;
          },
          { prefetch: 3 },
        );
        for (const n of [1, 2, 3, 4, 5]) await doomed.publish(queue, { n });
        // With 3 in hand at most, 4 and 5 arrive only once the broker settled 2 and 3 (while 1 is still in hand).
        assert.deepEqual((await arrived.take(5)).sort(), [1, 2, 3, 4, 5]);
        const redelivered = new Inbox<unknown>();
        await survivor.consume(queue, (message) => redelivered.push(message), { prefetch: 10 });
        link.drop();
        const again = (await redelivered.take(3, 'the messages in hand')).map((m) => (m as { n: number }).n);
        assert.deepEqual(again.sort(), [1, 4, 5]);
        // a marker behind the redeliveries: nothing acked came back before it
        await survivor.publish(queue, { n: 0 });
        assert.deepEqual(await redelivered.next('the marker'), { n: 0 });
        release.resolve();
      });

      it('reconnects after the connection drops, restores consumers and subscriptions, and holds publishes meanwhile', async () => {
        const link = await proxy();
        const bus = (await open({ reconnectDelayMs: { min: 10, max: 50 } }, link.url)) as AmqpBus;
        const queue = unique('work');
        const topic = unique('news');
        const work = new Inbox<unknown>();
        const news = new Inbox<unknown>();
        await bus.consume(queue, work.push);
        await bus.subscribe(topic, news.push);

        const disconnected = once(bus, 'disconnected');
        link.down();
        await disconnected;
        const held = bus.publish(queue, { sent: 'during the outage' });
        held.catch(() => {});
        await link.refused.next('a refused reconnect attempt');
        assert.equal(bus.connected, false);

        const connected = once(bus, 'connected');
        link.up();
        await connected;
        await held;
        assert.deepEqual(await work.next(), { sent: 'during the outage' });
        await bus.broadcast(topic, { sent: 'after reconnecting' });
        assert.deepEqual(await news.next(), { sent: 'after reconnecting' });
      });

      it('rejects a publish with a clear error when the broker stays unreachable', async () => {
        const link = await proxy();
        const bus = (await open({ operationTimeoutMs: 200, reconnectDelayMs: { min: 10, max: 50 } }, link.url)) as AmqpBus;
        const disconnected = once(bus, 'disconnected');
        link.down();
        await disconnected;
        await assert.rejects(
          bus.publish(unique('work'), {}),
          (err) => err instanceof OrlojError && err.code === 'service_unavailable' && /could not publish .* within 200 ms/.test(err.message),
        );
      });

      it('gives up connecting at startup after connectTimeoutMs', async () => {
        const link = await proxy();
        link.down();
        await assert.rejects(
          createBus(link.url, { logger: silentLogger, prefix, connectTimeoutMs: 200, reconnectDelayMs: { min: 10, max: 50 } }),
          (err) => err instanceof OrlojError && err.code === 'service_unavailable' && /could not connect/.test(err.message),
        );
      });

      it('refuses at once, without retrying, a login the broker denies', async () => {
        const denied = new URL(url);
        denied.username = 'orloj-nobody';
        denied.password = crypto.randomBytes(8).toString('hex');
        // A connect timeout longer than the test's: a bus that retried until it would fail the test by its timeout.
        const { logger, lines } = recordingLogger();
        await assert.rejects(
          createBus(denied.toString(), { logger, prefix, connectTimeoutMs: 10 * 60_000 }),
          (err) =>
            err instanceof OrlojError &&
            /refused this process: .*ACCESS-REFUSED.*Retrying cannot help/s.test(err.message) &&
            !err.message.includes(denied.password),
        );
        assert.deepEqual(lines.filter((l) => /retrying/.test(l.msg ?? '')), [], 'retried a denied login');
      });
    });
  });
}

describeBus('memory');
describeBus('amqp');

describe('createBus', () => {
  it('refuses a URL that names no known bus', async () => {
    await assert.rejects(createBus('redis://localhost', { logger: silentLogger }), /memory: or amqp/);
  });
});

/**
 * A TCP relay in front of the broker, so a test can cut the network under a
 * live connection (drop) or make the broker unreachable (down) without
 * touching the broker other test runs share.
 */
class TcpProxy {
  readonly refused = new Inbox<void>();
  private readonly sockets = new Set<net.Socket>();
  private refusing = false;

  private constructor(
    private readonly server: net.Server,
    readonly url: string,
  ) {}

  static async start(brokerUrl: string): Promise<TcpProxy> {
    const target = new URL(brokerUrl);
    const server = net.createServer();
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const proxied = new URL(brokerUrl);
    proxied.hostname = '127.0.0.1';
    proxied.port = String((server.address() as net.AddressInfo).port);
    const proxy = new TcpProxy(server, proxied.toString());
    server.on('connection', (client) => proxy.relay(client, target.hostname, Number(target.port || 5672)));
    return proxy;
  }

  /** Cuts every open connection; new ones still get through. */
  drop(): void {
    for (const socket of this.sockets) socket.destroy();
  }

  down(): void {
    this.refusing = true;
    this.drop();
  }

  up(): void {
    this.refusing = false;
  }

  async close(): Promise<void> {
    this.drop();
    await new Promise((resolve) => this.server.close(resolve));
  }

  private relay(client: net.Socket, host: string, port: number): void {
    if (this.refusing) {
      client.destroy();
      this.refused.push();
      return;
    }
    const upstream = net.connect(port, host);
    for (const [socket, other] of [
      [client, upstream],
      [upstream, client],
    ] as const) {
      this.sockets.add(socket);
      socket.on('error', () => other.destroy());
      socket.on('close', () => {
        this.sockets.delete(socket);
        other.destroy();
      });
    }
    client.pipe(upstream);
    upstream.pipe(client);
  }
}
