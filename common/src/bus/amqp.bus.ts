import { EventEmitter } from 'node:events';
import amqp from 'amqplib';
import type { Channel, ChannelModel, Options } from 'amqplib';
import { tlsMaterial, type TlsFiles } from '../config/tls.js';
import { OrlojError } from '../core/errors.js';
import { backoffDelay, retryPolicies, type BackoffPolicy } from '../core/retry.js';
import {
  busClosed,
  checkPrefetch,
  DEFAULT_PREFETCH,
  encodeMessage,
  qualifiedName,
  resolveBusOptions,
  type BroadcastHandler,
  type Bus,
  type BusOptions,
  type ConsumeOptions,
  type MessageHandler,
  type PublishOptions,
  type ResolvedBusOptions,
  type Subscription,
} from './bus.js';
import { hasPassword, redact, refusal } from './amqp-broker-url.js';
import { beforeDeadline, quietly } from './amqp-promises.js';
import { AmqpPublisher } from './amqp-publisher.js';
import { AmqpSubscription, type Kind, type SubscriptionHost } from './amqp-subscription.js';
import { AmqpTopology } from './amqp-topology.js';

/** RabbitMQ: how long connecting, and each operation on the open connection, may take. */
const CONNECT_TIMEOUT_MS = 30_000;
const OPERATION_TIMEOUT_MS = 30_000;
/** RabbitMQ: the socket's timeout while the connection is being established. */
const SOCKET_TIMEOUT_MS = 10_000;

export interface AmqpBusOptions extends BusOptions {
  /** How long publish/broadcast/consume/subscribe wait for the broker before rejecting (OPERATION_TIMEOUT_MS unless set). */
  operationTimeoutMs?: number;
  /** How long the first connection may take before AmqpBus.connect() rejects (CONNECT_TIMEOUT_MS unless set). */
  connectTimeoutMs?: number;
  /** Reconnect backoff bounds (exponential, jittered; retryPolicies.busReconnect unless set). */
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
 *
 * This file holds the connection: connecting, reconnecting, and running
 * operations on whatever connection is live. Declaring queues and exchanges
 * is amqp-topology.ts, publishing with confirms amqp-publisher.ts, consuming
 * amqp-subscription.ts.
 */
export class AmqpBus extends EventEmitter implements Bus {
  private readonly options: ResolvedBusOptions;
  private readonly timeoutMs: number;
  private readonly backoff: BackoffPolicy;
  private readonly socketOptions: Record<string, unknown>;
  private current: ChannelModel | undefined;
  private readonly topology: AmqpTopology;
  private readonly publisher: AmqpPublisher;
  private readonly subscriptions = new Set<AmqpSubscription>();
  private readonly host: SubscriptionHost;
  private readonly operations = new Set<Promise<unknown>>();
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
      const ms = options.connectTimeoutMs ?? CONNECT_TIMEOUT_MS;
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
    this.timeoutMs = options.operationTimeoutMs ?? OPERATION_TIMEOUT_MS;
    const bounds = options.reconnectDelayMs;
    this.backoff = bounds ? { ...retryPolicies.busReconnect, initialMs: bounds.min, maxMs: bounds.max } : retryPolicies.busReconnect;
    this.topology = new AmqpTopology(this.options.maxDeliveries);
    this.publisher = new AmqpPublisher(this.topology, this.options.log);
    const tls = options.tls ? tlsMaterial(options.tls) : {};
    this.socketOptions = {
      // connection establishment only; amqplib lifts it once the connection is open
      timeout: SOCKET_TIMEOUT_MS,
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
      delay: (attempt) => backoffDelay(this.backoff, attempt),
      declareQueue: (ch, name) => this.topology.declareQueue(ch, name),
      declareExchange: (ch, name) => this.topology.declareExchange(ch, name),
      forget: (sub) => void this.subscriptions.delete(sub),
      invalidate: (name) => this.topology.invalidate(name),
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
    await this.operation(`publish to ${name}`, (conn) => this.publisher.publish(conn, name, body, properties));
  }

  async broadcast(topic: string, message: unknown): Promise<void> {
    const body = Buffer.from(encodeMessage(message));
    const name = qualifiedName(this.options.prefix, topic);
    await this.operation(`broadcast to ${name}`, (conn) => this.publisher.broadcast(conn, name, body, { contentType: JSON_TYPE }));
  }

  async consume(queue: string, handler: MessageHandler, options: ConsumeOptions = {}): Promise<Subscription> {
    const prefetch = checkPrefetch(options.prefetch ?? DEFAULT_PREFETCH);
    return this.attachNew('queue', qualifiedName(this.options.prefix, queue), handler, prefetch);
  }

  async subscribe(topic: string, handler: BroadcastHandler): Promise<Subscription> {
    return this.attachNew('topic', qualifiedName(this.options.prefix, topic), handler, BROADCAST_PREFETCH);
  }

  /**
   * Messages ready in a queue as the broker counts them (unacked ones not
   * included), or undefined when the queue does not exist or the broker is
   * unreachable. A channel of its own: checking a missing queue closes it.
   */
  async queueDepth(queue: string): Promise<number | undefined> {
    const conn = this.current;
    if (!conn || this.isClosing) return undefined;
    let ch: Channel;
    try {
      ch = await conn.createChannel();
    } catch {
      return undefined;
    }
    ch.on('error', () => {});
    try {
      return (await ch.checkQueue(qualifiedName(this.options.prefix, queue))).messageCount;
    } catch {
      return undefined;
    } finally {
      await quietly(() => ch.close());
    }
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
    if (this.topology.isEmpty) return;
    const conn = await amqp.connect(this.url, this.socketOptions);
    conn.on('error', () => {});
    try {
      await this.topology.deleteAll(conn);
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
    this.publisher.reset();
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
    this.topology.forgetAsserted();
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
    this.publisher.reset();
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
      // Jittered, so a fleet does not reconnect in lockstep after a broker restart.
    }, backoffDelay(this.backoff, this.attempts++));
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
}
