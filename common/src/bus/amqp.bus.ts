import { EventEmitter } from 'node:events';
import amqp from 'amqplib';
import type { Channel, ChannelModel, ConfirmChannel, ConsumeMessage, Message, Options } from 'amqplib';
import type { Logger } from '../logging/logger.js';
import { tlsMaterial, type TlsFiles } from '../config/tls.js';
import { OrlojError } from '../errors.js';
import {
  busClosed,
  checkPrefetch,
  deadLetterQueue,
  DEFAULT_PREFETCH,
  encodeMessage,
  entryExchange,
  isDeadLetterQueue,
  logHandlerFailure,
  qualifiedName,
  resolveBusOptions,
  type BroadcastHandler,
  type Bus,
  type BusOptions,
  type ConsumeOptions,
  type Delivery,
  type MessageHandler,
  type PublishOptions,
  type ResolvedBusOptions,
  type Subscription,
} from './bus.js';

export interface AmqpBusOptions extends BusOptions {
  /** How long publish/broadcast/consume/subscribe wait for the broker before rejecting. Default 30 s. */
  operationTimeoutMs?: number;
  /** How long the first connection may take before AmqpBus.connect() rejects. Default 30 s. */
  connectTimeoutMs?: number;
  /** Reconnect backoff bounds (exponential, jittered). Default 100 ms to 5 s. */
  reconnectDelayMs?: { min: number; max: number };
  /**
   * amqps://: verify the broker against `caFile` and present `certFile`/`keyFile`.
   * With a certificate and no password in the URL the process logs in as its
   * certificate (SASL EXTERNAL: the broker takes the user name from it).
   */
  tls?: TlsFiles | undefined;
  /** Passed to amqplib's socket, after `tls`: further node:tls options. */
  socketOptions?: Record<string, unknown>;
  /** Shown in the broker's connection list. */
  connectionName?: string;
}

const BROADCAST_PREFETCH = 100;
const SEQ_HEADER = 'x-orloj-publish-seq';
const JSON_TYPE = 'application/json';

/**
 * RabbitMQ adapter. Work queues are quorum queues: the broker itself counts
 * deliveries, including those whose consumer died before acking, so a
 * message that crashes its consumer still reaches `<queue>.dead` after
 * maxDeliveries (a retry header written by the consumer could not count
 * crashes). Dead-lettering is at-least-once, so a poison message is never
 * dropped on its way to `.dead`. Needs RabbitMQ 3.10 or later.
 *
 * The connection heals itself: on loss it reconnects with backoff and
 * re-attaches every consumer and subscription; operations started during an
 * outage wait up to operationTimeoutMs. Emits 'connected' (after consumers
 * are re-attached) and 'disconnected'; never 'error'.
 */
export class AmqpBus extends EventEmitter implements Bus {
  private readonly options: ResolvedBusOptions;
  private readonly timeoutMs: number;
  private readonly backoff: { min: number; max: number };
  private readonly socketOptions: Record<string, unknown>;
  private current: ChannelModel | undefined;
  private pub: { conn: ChannelModel; channel: Promise<ConfirmChannel> } | undefined;
  /** Asserted on the current connection: declaring is idempotent but costs a round trip. */
  private readonly asserted = new Set<string>();
  /** Everything this instance ever declared, for destroy(). */
  private readonly declared = { queues: new Set<string>(), exchanges: new Set<string>() };
  private readonly subscriptions = new Set<AmqpSubscription>();
  private readonly host: SubscriptionHost;
  private readonly operations = new Set<Promise<unknown>>();
  private readonly channelErrors = new WeakMap<Channel, unknown>();
  private readonly returned = new Set<string>();
  private publishSeq = 0;
  private readonly waiters = new Set<() => void>();
  private reconnectTimer: NodeJS.Timeout | undefined;
  private connecting: Promise<void> | undefined;
  private attempts = 0;
  private lastError: unknown;
  private everConnected = false;
  /** Set when the first connection is refused for a reason retrying cannot fix. */
  private refusal: OrlojError | undefined;
  private isClosing = false;
  private closing: Promise<void> | undefined;

  /**
   * Connects, retrying until connectTimeoutMs; afterwards the bus reconnects on
   * its own. A first connection the broker refuses for good (a certificate it
   * does not accept or this side does not trust, a login it denies) rejects at
   * once instead of retrying.
   */
  static async connect(url: string, options: AmqpBusOptions): Promise<AmqpBus> {
    const bus = new AmqpBus(url, options);
    bus.connecting = bus.connectOnce();
    try {
      const ms = options.connectTimeoutMs ?? 30_000;
      await bus.untilConnected(Date.now() + ms, () => bus.unavailable('connect', ms));
    } catch (err) {
      await bus.close();
      throw err;
    }
    return bus;
  }

  private constructor(
    private readonly url: string,
    options: AmqpBusOptions,
  ) {
    super();
    this.options = resolveBusOptions(options);
    this.timeoutMs = options.operationTimeoutMs ?? 30_000;
    this.backoff = options.reconnectDelayMs ?? { min: 100, max: 5_000 };
    const tls = options.tls ? tlsMaterial(options.tls) : {};
    this.socketOptions = {
      // connection establishment only; amqplib lifts it once the connection is open
      timeout: 10_000,
      ...tls,
      ...(tls.cert && !hasPassword(url) ? { credentials: amqp.credentials.external() } : {}),
      ...options.socketOptions,
      clientProperties: { connection_name: options.connectionName ?? `orloj ${this.options.prefix}` },
    };
    this.host = {
      log: this.options.log,
      maxDeliveries: this.options.maxDeliveries,
      current: () => this.current,
      closing: () => this.isClosing,
      delay: (attempt) => this.delay(attempt),
      declareQueue: (ch, name) => this.declareQueue(ch, name),
      declareExchange: (ch, name) => this.declareExchange(ch, name),
      forget: (sub) => void this.subscriptions.delete(sub),
      invalidate: (name) => void this.asserted.delete(name),
    };
  }

  get connected(): boolean {
    return this.current !== undefined;
  }

  async publish(queue: string, message: unknown, options: PublishOptions = {}): Promise<void> {
    const body = Buffer.from(encodeMessage(message));
    const name = qualifiedName(this.options.prefix, queue);
    const properties: Options.Publish = { persistent: true, contentType: JSON_TYPE, mandatory: true };
    if (options.messageId !== undefined) properties.messageId = options.messageId;
    if (options.type !== undefined) properties.type = options.type;
    await this.operation(`publish to ${name}`, (conn) =>
      this.onPublishChannel(conn, async (ch) => {
        // The declared-queue cache can go stale (someone deleted the queue);
        // mandatory makes the broker return such a message instead of
        // confirming it into the void, and we declare again once.
        for (let attempt = 1; ; attempt++) {
          await this.declareQueue(ch, name);
          const seq = String(++this.publishSeq);
          await confirmed((done) => ch.publish(entryExchange(name), '', body, { ...properties, headers: { [SEQ_HEADER]: seq } }, done));
          // basic.return always precedes the confirm of the same message
          if (!this.returned.delete(seq)) return;
          this.asserted.delete(name);
          if (attempt === 2) throw new OrlojError('service_unavailable', `The broker could not route a message to ${name}.`, { kind: 'operational' });
        }
      }),
    );
  }

  async broadcast(topic: string, message: unknown): Promise<void> {
    const body = Buffer.from(encodeMessage(message));
    const name = qualifiedName(this.options.prefix, topic);
    await this.operation(`broadcast to ${name}`, (conn) =>
      this.onPublishChannel(conn, async (ch) => {
        await this.declareExchange(ch, name);
        await confirmed((done) => ch.publish(name, '', body, { contentType: JSON_TYPE }, done));
      }),
    );
  }

  async consume(queue: string, handler: MessageHandler, options: ConsumeOptions = {}): Promise<Subscription> {
    const prefetch = checkPrefetch(options.prefetch ?? DEFAULT_PREFETCH);
    return this.attachNew('queue', qualifiedName(this.options.prefix, queue), handler, prefetch);
  }

  async subscribe(topic: string, handler: BroadcastHandler): Promise<Subscription> {
    return this.attachNew('topic', qualifiedName(this.options.prefix, topic), handler, BROADCAST_PREFETCH);
  }

  close(): Promise<void> {
    if (!this.closing) {
      this.isClosing = true;
      this.closing = this.shutdown();
    }
    return this.closing;
  }

  /**
   * For tests: close(), then delete every queue and exchange this instance
   * declared, over a short-lived connection of its own.
   */
  async destroy(): Promise<void> {
    await this.close();
    if (this.declared.queues.size === 0 && this.declared.exchanges.size === 0) return;
    const conn = await amqp.connect(this.url, this.socketOptions);
    conn.on('error', () => {});
    try {
      const ch = await conn.createChannel();
      for (const queue of this.declared.queues) await ch.deleteQueue(queue);
      for (const exchange of this.declared.exchanges) await ch.deleteExchange(exchange);
    } finally {
      await quietly(() => conn.close());
    }
  }

  private async shutdown(): Promise<void> {
    clearTimeout(this.reconnectTimer);
    this.wake();
    await this.connecting;
    await Promise.allSettled([...this.subscriptions].map((s) => s.cancel()));
    await Promise.allSettled([...this.operations]);
    const conn = this.current;
    this.current = undefined;
    this.pub = undefined;
    if (conn) await quietly(() => conn.close());
    this.options.log.info('bus closed');
  }

  private async connectOnce(): Promise<void> {
    if (this.isClosing) return;
    let conn: ChannelModel;
    try {
      conn = await amqp.connect(this.url, this.socketOptions);
    } catch (err) {
      this.lastError = err;
      const refused = this.everConnected ? undefined : refusal(err);
      if (refused) {
        const broker = redact(this.url);
        const reason = err instanceof Error ? err.message : String(err);
        this.refusal = new OrlojError(
          'service_unavailable',
          `${refused === 'untrusted' ? `This process does not trust the message broker at ${broker}` : `The message broker at ${broker} refused this process`}: ${reason}. ` +
            'Retrying cannot help: check BUS_URL, BUS_TLS_CA_FILE, BUS_TLS_CERT_FILE and BUS_TLS_KEY_FILE, and that the broker has a user for this certificate (deploy/README.md).',
          { kind: 'operational', cause: err },
        );
        this.wake();
        return;
      }
      this.options.log.warn({ err, broker: redact(this.url), attempt: this.attempts + 1 }, 'cannot reach the message broker; retrying');
      this.scheduleReconnect();
      return;
    }
    if (this.isClosing) {
      await quietly(() => conn.close());
      return;
    }
    // Without an 'error' listener an EventEmitter error kills the process;
    // 'close' always follows and drives the reconnect.
    conn.on('error', (err: unknown) => {
      this.lastError = err;
      this.options.log.warn({ err }, 'message broker connection error');
    });
    conn.on('close', () => this.lost(conn));
    conn.on('blocked', (reason: unknown) => this.options.log.warn({ reason }, 'the broker blocks publishing (resource alarm); publishes wait'));
    conn.on('unblocked', () => this.options.log.info('the broker accepts publishes again'));
    this.current = conn;
    this.everConnected = true;
    this.asserted.clear();
    this.attempts = 0;
    this.lastError = undefined;
    await Promise.all(
      [...this.subscriptions].map((s) =>
        s.attach(conn).catch((err: unknown) => {
          this.options.log.error({ err, name: s.name }, 'cannot re-attach a consumer; retrying');
          s.retryLater();
        }),
      ),
    );
    if (this.current !== conn) return;
    this.options.log.info({ broker: redact(this.url) }, 'connected to the message broker');
    this.emit('connected');
    this.wake();
  }

  private lost(conn: ChannelModel): void {
    if (conn !== this.current) return;
    this.current = undefined;
    this.pub = undefined;
    if (this.isClosing) return;
    this.options.log.warn('lost the message broker connection; reconnecting');
    this.emit('disconnected');
    this.scheduleReconnect();
  }

  private scheduleReconnect(): void {
    if (this.isClosing || this.reconnectTimer) return;
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = undefined;
      this.connecting = this.connectOnce();
    }, this.delay(this.attempts++));
  }

  /** Exponential with jitter, so a fleet does not reconnect in lockstep after a broker restart. */
  private delay(attempt: number): number {
    const cap = Math.min(this.backoff.max, this.backoff.min * 2 ** Math.min(attempt, 30));
    return cap / 2 + (Math.random() * cap) / 2;
  }

  private wake(): void {
    for (const waiter of [...this.waiters]) waiter();
  }

  private untilConnected(deadline: number, timedOut: () => Error): Promise<void> {
    return new Promise((resolve, reject) => {
      const done = (): void => {
        if (!this.isClosing && !this.current && !this.refusal) return;
        clearTimeout(timer);
        this.waiters.delete(done);
        if (this.refusal) reject(this.refusal);
        else if (this.isClosing) reject(busClosed());
        else resolve();
      };
      const timer = setTimeout(() => {
        this.waiters.delete(done);
        reject(timedOut());
      }, Math.max(0, deadline - Date.now()));
      this.waiters.add(done);
      if (this.current || this.isClosing || this.refusal) done();
    });
  }

  private unavailable(what: string, ms = this.timeoutMs): OrlojError {
    const last = this.lastError instanceof Error ? ` (last error: ${this.lastError.message})` : '';
    return new OrlojError(
      'service_unavailable',
      `The message bus could not ${what} within ${ms} ms: the broker was unreachable or did not confirm${last}.`,
      { kind: 'operational', cause: this.lastError },
    );
  }

  private operation<T>(what: string, fn: (conn: ChannelModel) => Promise<T>): Promise<T> {
    if (this.isClosing) return Promise.reject(busClosed());
    const op = this.withConnection(what, fn);
    this.operations.add(op);
    const forget = (): void => void this.operations.delete(op);
    op.then(forget, forget);
    return op;
  }

  /**
   * Runs fn on the live connection, waiting through outages until the
   * deadline. A failure is retried only when the connection died under it
   * (amqplib closes every channel and the connection in one synchronous
   * sweep, so by the time we catch, `current` has moved on); a failure on a
   * healthy connection (a channel error such as a queue declared with other
   * arguments) is the caller's to see. A retried publish may reach the broker
   * twice: delivery is at-least-once.
   */
  private async withConnection<T>(what: string, fn: (conn: ChannelModel) => Promise<T>): Promise<T> {
    const deadline = Date.now() + this.timeoutMs;
    for (;;) {
      if (this.isClosing && !this.current) throw busClosed();
      if (Date.now() >= deadline) throw this.unavailable(what);
      const conn = this.current;
      if (!conn) {
        await this.untilConnected(deadline, () => this.unavailable(what));
        continue;
      }
      try {
        return await beforeDeadline(fn(conn), deadline, () => this.unavailable(what));
      } catch (err) {
        if (this.current === conn || this.isClosing) throw err;
        this.lastError = err;
        this.options.log.debug({ err }, `connection lost during ${what}; retrying`);
      }
    }
  }

  /** One shared confirm channel; when the broker closes it, the next publish opens another. */
  private async onPublishChannel(conn: ChannelModel, fn: (ch: ConfirmChannel) => Promise<void>): Promise<void> {
    const ch = await this.publishChannel(conn);
    try {
      await fn(ch);
    } catch (err) {
      // pending confirms only hear "channel closed"; the broker's reason came with the 'error' event
      throw this.channelErrors.get(ch) ?? err;
    }
  }

  private publishChannel(conn: ChannelModel): Promise<ConfirmChannel> {
    if (this.pub?.conn === conn) return this.pub.channel;
    const channel = conn.createConfirmChannel().then((ch) => {
      ch.on('error', (err: unknown) => {
        this.channelErrors.set(ch, err);
        this.options.log.warn({ err }, 'publish channel closed by the broker');
      });
      ch.on('return', (msg: Message) => {
        const seq: unknown = msg.properties.headers?.[SEQ_HEADER];
        if (typeof seq === 'string') this.returned.add(seq);
      });
      ch.on('close', () => {
        if (this.pub?.channel !== channel) return;
        this.pub = undefined;
        // a channel error may mean something we asserted was deleted
        this.asserted.clear();
      });
      return ch;
    });
    channel.catch(() => {
      if (this.pub?.channel === channel) this.pub = undefined;
    });
    this.pub = { conn, channel };
    return channel;
  }

  private async attachNew(kind: Kind, name: string, handler: MessageHandler | BroadcastHandler, prefetch: number): Promise<Subscription> {
    if (this.isClosing) throw busClosed();
    const sub = new AmqpSubscription(this.host, kind, name, handler, prefetch);
    // Registered first, so a reconnect or close() during the attach sees it.
    this.subscriptions.add(sub);
    try {
      await this.withConnection(`${kind === 'queue' ? 'consume from' : 'subscribe to'} ${name}`, (conn) => sub.attach(conn));
    } catch (err) {
      await sub.cancel();
      throw err;
    }
    return sub;
  }

  /**
   * A work queue with its entry exchange, and (for a queue that is not itself
   * a dead-letter queue) `<queue>.dead` with its own, which is the queue's
   * dead-letter exchange. Messages never go through the default exchange, so
   * broker permissions on the entry exchanges decide who may publish where.
   */
  private async declareQueue(ch: Channel, name: string): Promise<void> {
    if (this.asserted.has(name)) return;
    if (isDeadLetterQueue(name)) {
      await this.declareQuorumQueue(ch, name, {});
    } else {
      const dead = deadLetterQueue(name);
      await this.declareQuorumQueue(ch, dead, {});
      await this.declareQuorumQueue(ch, name, {
        // the broker dead-letters once a message was returned more than this many times
        'x-delivery-limit': this.options.maxDeliveries - 1,
        'x-dead-letter-exchange': entryExchange(dead),
        // at-least-once dead-lettering requires reject-publish overflow
        'x-dead-letter-strategy': 'at-least-once',
        'x-overflow': 'reject-publish',
      });
    }
    this.asserted.add(name);
  }

  private async declareQuorumQueue(ch: Channel, name: string, args: Record<string, unknown>): Promise<void> {
    const entry = entryExchange(name);
    // the exchange first: a queue whose dead-letter exchange is missing would drop dead letters
    await ch.assertExchange(entry, 'fanout', { durable: true });
    this.declared.exchanges.add(entry);
    await ch.assertQueue(name, { durable: true, arguments: { 'x-queue-type': 'quorum', ...args } });
    this.declared.queues.add(name);
    await ch.bindQueue(name, entry, '');
  }

  private async declareExchange(ch: Channel, name: string): Promise<void> {
    if (this.asserted.has(`exchange:${name}`)) return;
    // durable and never auto-deleted: a vanished exchange would turn the next broadcast into a channel error
    await ch.assertExchange(name, 'fanout', { durable: true });
    this.declared.exchanges.add(name);
    this.asserted.add(`exchange:${name}`);
  }
}

type Kind = 'queue' | 'topic';

interface SubscriptionHost {
  log: Logger;
  maxDeliveries: number;
  current(): ChannelModel | undefined;
  closing(): boolean;
  delay(attempt: number): number;
  declareQueue(ch: Channel, name: string): Promise<void>;
  declareExchange(ch: Channel, name: string): Promise<void>;
  forget(sub: AmqpSubscription): void;
  /** The broker may have lost a queue or exchange we declared: declare it again next time. */
  invalidate(name: string): void;
}

/**
 * One consumer (queue) or subscriber (topic) with its own channel, so a
 * channel error or prefetch setting stays local to it. It survives
 * reconnects: the bus calls attach() with each new connection.
 */
class AmqpSubscription implements Subscription {
  /** The connection this subscription is attached or attaching to. */
  private conn: ChannelModel | undefined;
  private attaching: Promise<void> | undefined;
  private channel: Channel | undefined;
  private consumerTag: string | undefined;
  private readonly inFlight = new Set<Promise<void>>();
  private chain: Promise<void> = Promise.resolve();
  private retryTimer: NodeJS.Timeout | undefined;
  private retries = 0;
  private cancelling: Promise<void> | undefined;

  constructor(
    private readonly host: SubscriptionHost,
    private readonly kind: Kind,
    readonly name: string,
    private readonly handler: MessageHandler | BroadcastHandler,
    private readonly prefetch: number,
  ) {}

  attach(conn: ChannelModel): Promise<void> {
    if (this.cancelling) return Promise.resolve();
    if (this.conn === conn && this.attaching) return this.attaching;
    this.conn = conn;
    this.attaching = this.open(conn).catch((err: unknown) => {
      if (this.conn === conn) this.conn = undefined;
      throw err;
    });
    return this.attaching;
  }

  retryLater(): void {
    if (this.cancelling || this.retryTimer) return;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      const conn = this.host.current();
      // Without a connection the bus re-attaches everything once it reconnects.
      if (!conn || this.conn === conn) return;
      this.attach(conn).catch((err: unknown) => {
        this.host.log.error({ err, name: this.name }, 'cannot re-attach a consumer; retrying');
        this.retryLater();
      });
    }, this.host.delay(this.retries++));
  }

  cancel(): Promise<void> {
    this.cancelling ??= this.stop();
    return this.cancelling;
  }

  private async stop(): Promise<void> {
    clearTimeout(this.retryTimer);
    await this.attaching?.catch(() => {});
    const ch = this.channel;
    const tag = this.consumerTag;
    if (ch && tag) await quietly(() => ch.cancel(tag));
    // a delivery may still arrive between basic.cancel and its reply
    while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight]);
    if (ch) await quietly(() => ch.close());
    this.host.forget(this);
  }

  private async open(conn: ChannelModel): Promise<void> {
    const ch = await conn.createChannel();
    ch.on('error', (err: unknown) => {
      this.host.invalidate(this.kind === 'queue' ? this.name : `exchange:${this.name}`);
      this.host.log.warn({ err, name: this.name }, 'consumer channel closed by the broker');
    });
    ch.on('close', () => this.closed(ch));
    try {
      await ch.prefetch(this.prefetch);
      let queue = this.name;
      if (this.kind === 'queue') {
        await this.host.declareQueue(ch, this.name);
      } else {
        await this.host.declareExchange(ch, this.name);
        // exclusive, server-named: dies with this connection, so absent subscribers miss broadcasts
        queue = (await ch.assertQueue('', { exclusive: true, autoDelete: true, durable: false })).queue;
        await ch.bindQueue(queue, this.name, '');
      }
      const { consumerTag } = await ch.consume(queue, (msg) => this.receive(ch, msg), { noAck: false });
      this.channel = ch;
      this.consumerTag = consumerTag;
      this.retries = 0;
    } catch (err) {
      await quietly(() => ch.close());
      throw err;
    }
  }

  private closed(ch: Channel): void {
    if (ch !== this.channel) return;
    this.channel = undefined;
    this.consumerTag = undefined;
    this.conn = undefined;
    if (this.cancelling || this.host.closing()) return;
    this.retryLater();
  }

  private receive(ch: Channel, msg: ConsumeMessage | null): void {
    if (msg === null) {
      // The broker cancelled us (the queue was deleted): start over on a fresh channel.
      this.host.log.warn({ name: this.name }, 'the broker cancelled a consumer; re-attaching');
      this.host.invalidate(this.kind === 'queue' ? this.name : `exchange:${this.name}`);
      void quietly(() => ch.close());
      return;
    }
    const work = this.kind === 'queue' ? this.work(ch, msg) : this.fanout(ch, msg);
    this.inFlight.add(work);
    void work.then(() => this.inFlight.delete(work));
  }

  private async work(ch: Channel, msg: ConsumeMessage): Promise<void> {
    // set by the quorum queue on every return to the queue, crashes included
    const returned: unknown = msg.properties.headers?.['x-delivery-count'];
    const count = (typeof returned === 'number' && Number.isInteger(returned) && returned > 0 ? returned : 0) + 1;
    const delivery: Delivery = { redelivered: msg.fields.redelivered || count > 1, deliveryCount: count };
    let message: unknown;
    try {
      message = JSON.parse(msg.content.toString('utf8'));
    } catch (err) {
      this.host.log.error({ err, queue: this.name }, 'a message is not JSON; rejecting it to the dead-letter queue');
      this.settle(() => ch.nack(msg, false, false));
      return;
    }
    try {
      await (this.handler as MessageHandler)(message, delivery);
    } catch (err) {
      logHandlerFailure(this.host.log, this.name, delivery, this.host.maxDeliveries, err);
      this.settle(() => ch.nack(msg, false, true));
      return;
    }
    this.settle(() => ch.ack(msg));
  }

  // One broadcast at a time per subscriber keeps live log lines in order.
  private fanout(ch: Channel, msg: ConsumeMessage): Promise<void> {
    this.chain = this.chain.then(async () => {
      try {
        await (this.handler as BroadcastHandler)(JSON.parse(msg.content.toString('utf8')));
      } catch (err) {
        this.host.log.warn({ err, topic: this.name }, 'broadcast handler failed; the message is dropped');
      }
      this.settle(() => ch.ack(msg));
    });
    return this.chain;
  }

  private settle(ackOrNack: () => void): void {
    try {
      ackOrNack();
    } catch (err) {
      // The channel died with the connection; the broker redelivers the message.
      this.host.log.debug({ err, name: this.name }, 'cannot settle a message on a closed channel');
    }
  }
}

function confirmed(send: (done: (err: unknown) => void) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    send((err) => (err ? reject(err instanceof Error ? err : new Error(String(err))) : resolve()));
  });
}

function beforeDeadline<T>(work: Promise<T>, deadline: number, error: () => Error): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(error()), Math.max(0, deadline - Date.now()));
  });
  work.catch(() => {}); // settles after the deadline: nobody is listening any more
  return Promise.race([work, expired]).finally(() => clearTimeout(timer));
}

async function quietly(fn: () => Promise<unknown>): Promise<void> {
  try {
    await fn();
  } catch {
    // already closed
  }
}

/**
 * Connection failures that the same attempt would meet again: this side not
 * trusting the broker's certificate ('untrusted'), or the broker rejecting
 * ours (a TLS alert) or denying the login or the vhost ('refused').
 */
function refusal(err: unknown): 'untrusted' | 'refused' | undefined {
  const code = (err as { code?: unknown } | undefined)?.code;
  if (typeof code === 'string' && TLS_VERIFY_ERRORS.has(code)) return 'untrusted';
  if (typeof code === 'string' && /^ERR_SSL_.*ALERT/.test(code)) return 'refused';
  const message = err instanceof Error ? err.message : '';
  return /\b(403 \(ACCESS-REFUSED\)|530 \(NOT-ALLOWED\))/.test(message) ? 'refused' : undefined;
}

const TLS_VERIFY_ERRORS = new Set([
  'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID',
  'CERT_UNTRUSTED',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'ERR_TLS_CERT_ALTNAME_INVALID',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
]);

function hasPassword(url: string): boolean {
  try {
    return new URL(url).password !== '';
  } catch {
    return false;
  }
}

function redact(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return '(unparseable url)';
  }
}
