import type { Channel, ChannelModel, ConsumeMessage } from 'amqplib';
import type { Logger } from '../logging/logger.js';
import { DeadLetterError, isDeadLetterQueue, logHandlerFailure, type BroadcastHandler, type Delivery, type MessageHandler, type Subscription } from './bus.js';
import { quietly } from './amqp-promises.js';

/**
 * The consuming side of the AMQP adapter: one consumer or subscriber per
 * AmqpSubscription, re-attached by the bus after each reconnect.
 */

export type Kind = 'queue' | 'topic';

export interface SubscriptionHost {
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
export class AmqpSubscription implements Subscription {
  /** The connection this subscription is attached or attaching to. */
  private conn: ChannelModel | undefined;
  private attaching: Promise<void> | undefined;
  private channel: Channel | undefined;
  private acks: BatchedAcks | undefined;
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
    this.acks?.flush();
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
      const acks = new BatchedAcks(ch, (fn) => this.settle(fn));
      const { consumerTag } = await ch.consume(queue, (msg) => this.receive(ch, acks, msg), { noAck: false });
      this.channel = ch;
      this.acks = acks;
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

  private receive(ch: Channel, acks: BatchedAcks, msg: ConsumeMessage | null): void {
    if (msg === null) {
      // The broker cancelled us (the queue was deleted): start over on a fresh channel.
      this.host.log.warn({ name: this.name }, 'the broker cancelled a consumer; re-attaching');
      this.host.invalidate(this.kind === 'queue' ? this.name : `exchange:${this.name}`);
      void quietly(() => ch.close());
      return;
    }
    const work = this.kind === 'queue' ? this.work(acks, msg) : this.fanout(ch, msg);
    this.inFlight.add(work);
    void work.then(() => this.inFlight.delete(work));
  }

  private async work(acks: BatchedAcks, msg: ConsumeMessage): Promise<void> {
    acks.received(msg);
    // set by the quorum queue on every return to the queue, crashes included
    const returned: unknown = msg.properties.headers?.['x-delivery-count'];
    const count = (typeof returned === 'number' && Number.isInteger(returned) && returned > 0 ? returned : 0) + 1;
    const delivery: Delivery = { redelivered: msg.fields.redelivered || count > 1, deliveryCount: count };
    let message: unknown;
    try {
      message = JSON.parse(msg.content.toString('utf8'));
    } catch (err) {
      this.host.log.error({ err, queue: this.name }, 'a message is not JSON; rejecting it to the dead-letter queue');
      acks.nack(msg, false);
      return;
    }
    try {
      await (this.handler as MessageHandler)(message, delivery);
    } catch (err) {
      if (err instanceof DeadLetterError && !isDeadLetterQueue(this.name)) {
        // requeue=false: the quorum queue dead-letters it to `<queue>.dead` now
        acks.nack(msg, false);
        return;
      }
      logHandlerFailure(this.host.log, this.name, delivery, this.host.maxDeliveries, err);
      acks.nack(msg, true);
      return;
    }
    acks.ack(msg);
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

/**
 * The acks of one consumer channel, sent by batch: at the end of an
 * event-loop turn, one `basic.ack` with multiple=true settles every message
 * handled below the oldest one still in hand, and the few handled above it
 * are acked each. A message is acked only once applied, as before, but the
 * broker settles a turn's worth in one command instead of one per message.
 * Nacks go at once, each.
 */
class BatchedAcks {
  private readonly inHand = new Set<number>();
  private done: ConsumeMessage[] = [];
  private flushing = false;

  constructor(
    private readonly ch: Channel,
    private readonly settle: (ackOrNack: () => void) => void,
  ) {}

  received(msg: ConsumeMessage): void {
    this.inHand.add(msg.fields.deliveryTag);
  }

  nack(msg: ConsumeMessage, requeue: boolean): void {
    this.inHand.delete(msg.fields.deliveryTag);
    this.settle(() => this.ch.nack(msg, false, requeue));
  }

  ack(msg: ConsumeMessage): void {
    this.inHand.delete(msg.fields.deliveryTag);
    this.done.push(msg);
    if (this.flushing) return;
    this.flushing = true;
    setImmediate(() => this.flush());
  }

  /** Sends the acks waiting (also before the channel closes). */
  flush(): void {
    this.flushing = false;
    const done = this.done;
    this.done = [];
    let oldestInHand = Number.POSITIVE_INFINITY;
    for (const tag of this.inHand) oldestInHand = Math.min(oldestInHand, tag);
    let upTo: ConsumeMessage | undefined;
    for (const msg of done) {
      const tag = msg.fields.deliveryTag;
      // multiple=true settles every unsettled tag up to this one: only those below every message still in hand
      if (tag >= oldestInHand) this.settle(() => this.ch.ack(msg));
      else if (!upTo || tag > upTo.fields.deliveryTag) upTo = msg;
    }
    if (upTo) {
      const last = upTo;
      this.settle(() => this.ch.ack(last, true));
    }
  }
}
