import Denque from 'denque';
import {
  busClosed,
  checkPrefetch,
  deadLetterQueue,
  DeadLetterError,
  DEFAULT_PREFETCH,
  encodeMessage,
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

/**
 * The in-process bus of the embedded default. It mimics RabbitMQ's observable
 * behaviour rather than taking shortcuts, so code tested against it does not
 * break when it meets the real broker: messages travel as JSON strings,
 * handlers run on a later turn of the event loop, prefetch, redelivery, the
 * delivery limit and dead-lettering work the same way. Nothing survives the
 * process; the store is the source of truth and the scheduler's sweeper
 * re-enqueues lost work.
 */
export class MemoryBus implements Bus {
  readonly inProcess = true;
  private readonly options: ResolvedBusOptions;
  private readonly queues = new Map<string, MemoryQueue>();
  private readonly topics = new Map<string, Set<MemorySubscriber>>();
  private closing: Promise<void> | undefined;

  constructor(options: BusOptions) {
    this.options = resolveBusOptions(options);
  }

  async publish(queue: string, message: unknown, _options?: PublishOptions): Promise<void> {
    this.assertOpen();
    this.queue(qualifiedName(this.options.prefix, queue)).push({ body: encodeMessage(message), deliveries: 0 });
  }

  async consume(queue: string, handler: MessageHandler, options: ConsumeOptions = {}): Promise<Subscription> {
    this.assertOpen();
    const prefetch = checkPrefetch(options.prefetch ?? DEFAULT_PREFETCH);
    return this.queue(qualifiedName(this.options.prefix, queue)).addConsumer(handler, prefetch);
  }

  async broadcast(topic: string, message: unknown): Promise<void> {
    this.assertOpen();
    const body = encodeMessage(message);
    for (const subscriber of this.topics.get(qualifiedName(this.options.prefix, topic)) ?? []) subscriber.push(body);
  }

  async subscribe(topic: string, handler: BroadcastHandler): Promise<Subscription> {
    this.assertOpen();
    const name = qualifiedName(this.options.prefix, topic);
    let subscribers = this.topics.get(name);
    if (!subscribers) this.topics.set(name, (subscribers = new Set()));
    const subscriber = new MemorySubscriber(name, handler, this.options, subscribers);
    subscribers.add(subscriber);
    return subscriber;
  }

  /** Messages waiting in a queue (not yet delivered), or undefined when nobody declared it. */
  async queueDepth(queue: string): Promise<number | undefined> {
    return this.queues.get(qualifiedName(this.options.prefix, queue))?.depth;
  }

  close(): Promise<void> {
    this.closing ??= Promise.allSettled([
      ...[...this.queues.values()].flatMap((q) => [...q.consumers].map((c) => c.cancel())),
      ...[...this.topics.values()].flatMap((set) => [...set].map((s) => s.cancel())),
    ]).then(() => undefined);
    return this.closing;
  }

  private assertOpen(): void {
    if (this.closing) throw busClosed();
  }

  private queue(name: string): MemoryQueue {
    let queue = this.queues.get(name);
    if (!queue) {
      const dead = isDeadLetterQueue(name) ? undefined : this.queue(deadLetterQueue(name));
      this.queues.set(name, (queue = new MemoryQueue(name, dead, this.options)));
    }
    return queue;
  }
}

interface Stored {
  readonly body: string;
  deliveries: number;
}

class MemoryQueue {
  readonly consumers: MemoryConsumer[] = [];
  /**
   * A double-ended queue, not an array: Array#shift copies the whole array once
   * it is too large to trim in place (about 16,000 messages: a backlog when the
   * runners fall behind), which made each delivery slower the longer the
   * backlog grew, at the moment the process could least afford it.
   */
  private readonly ready = new Denque<Stored>();
  private turn = 0;
  private scheduled = false;

  constructor(
    readonly name: string,
    private readonly dead: MemoryQueue | undefined,
    private readonly options: ResolvedBusOptions,
  ) {}

  get depth(): number {
    return this.ready.length;
  }

  push(message: Stored, first = false): void {
    if (first) this.ready.unshift(message);
    else this.ready.push(message);
    this.schedule();
  }

  addConsumer(handler: MessageHandler, prefetch: number): MemoryConsumer {
    const consumer = new MemoryConsumer(this, handler, prefetch);
    this.consumers.push(consumer);
    this.schedule();
    return consumer;
  }

  removeConsumer(consumer: MemoryConsumer): void {
    const i = this.consumers.indexOf(consumer);
    if (i >= 0) this.consumers.splice(i, 1);
  }

  /** Like a quorum queue: a failed message goes back to the head, or to `.dead` after the limit. */
  failed(message: Stored, delivery: Delivery, err: unknown): void {
    if (this.dead && err instanceof DeadLetterError) {
      this.dead.push({ body: message.body, deliveries: 0 });
      return;
    }
    logHandlerFailure(this.options.log, this.name, delivery, this.options.maxDeliveries, err);
    if (this.dead && message.deliveries >= this.options.maxDeliveries) this.dead.push({ body: message.body, deliveries: 0 });
    else this.push(message, true);
  }

  // Delivering on a later macrotask keeps handlers off the publisher's stack,
  // as a network round trip would.
  schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.pump();
    });
  }

  private pump(): void {
    while (this.ready.length > 0) {
      const consumer = this.nextWithRoom();
      if (!consumer) return;
      consumer.deliver(this.ready.shift()!);
    }
  }

  private nextWithRoom(): MemoryConsumer | undefined {
    for (let i = 0; i < this.consumers.length; i++) {
      const consumer = this.consumers[(this.turn + i) % this.consumers.length];
      if (consumer?.hasRoom()) {
        this.turn = (this.turn + i + 1) % this.consumers.length;
        return consumer;
      }
    }
    return undefined;
  }
}

class MemoryConsumer implements Subscription {
  private readonly inFlight = new Set<Promise<void>>();
  private cancelling: Promise<void> | undefined;

  constructor(
    private readonly queue: MemoryQueue,
    private readonly handler: MessageHandler,
    private readonly prefetch: number,
  ) {}

  hasRoom(): boolean {
    return !this.cancelling && this.inFlight.size < this.prefetch;
  }

  deliver(message: Stored): void {
    message.deliveries += 1;
    const delivery: Delivery = { redelivered: message.deliveries > 1, deliveryCount: message.deliveries };
    const run = (async () => {
      try {
        await this.handler(JSON.parse(message.body), delivery);
      } catch (err) {
        this.queue.failed(message, delivery, err);
      }
    })();
    this.inFlight.add(run);
    void run.then(() => {
      this.inFlight.delete(run);
      this.queue.schedule();
    });
  }

  cancel(): Promise<void> {
    if (!this.cancelling) {
      this.queue.removeConsumer(this);
      this.cancelling = Promise.all(this.inFlight).then(() => undefined);
    }
    return this.cancelling;
  }
}

class MemorySubscriber implements Subscription {
  private chain: Promise<void> = Promise.resolve();
  private cancelling: Promise<void> | undefined;

  constructor(
    private readonly topic: string,
    private readonly handler: BroadcastHandler,
    private readonly options: ResolvedBusOptions,
    private readonly siblings: Set<MemorySubscriber>,
  ) {}

  push(body: string): void {
    this.chain = this.chain.then(nextMacrotask).then(async () => {
      if (this.cancelling) return;
      try {
        await this.handler(JSON.parse(body));
      } catch (err) {
        this.options.log.warn({ err, topic: this.topic }, 'broadcast handler failed; the message is dropped');
      }
    });
  }

  cancel(): Promise<void> {
    if (!this.cancelling) {
      this.siblings.delete(this);
      this.cancelling = this.chain;
    }
    return this.cancelling;
  }
}

function nextMacrotask(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
