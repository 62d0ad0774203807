import type { Bus, BroadcastHandler, ConsumeOptions, MessageHandler, PublishOptions, Subscription } from '../bus/bus.js';
import { DEFAULT_MAX_DELIVERIES, isDeadLetterQueue } from '../bus/bus.js';
import type { OrlojMetrics } from './metrics.js';

/** What the bus adapters can tell beyond the Bus port, for probes and metrics. */
export interface BusIntrospection {
  /** False while the broker connection is down (consumers are re-attached before it turns true). */
  readonly connected?: boolean;
  /** Messages ready in a queue (unprefixed name), or undefined when the queue does not exist. */
  queueDepth?(queue: string): Promise<number | undefined>;
}

/**
 * A Bus that counts what passes through it into the process's metrics:
 * published, consumed, redelivered and dead-lettered messages by queue. The
 * queue label is orloj's own queue name (a fixed set, see QUEUES).
 */
export class InstrumentedBus implements Bus, BusIntrospection {
  readonly inProcess: boolean;

  constructor(
    private readonly bus: Bus & BusIntrospection,
    private readonly metrics: OrlojMetrics,
    private readonly maxDeliveries = DEFAULT_MAX_DELIVERIES,
  ) {
    this.inProcess = bus.inProcess === true;
  }

  get connected(): boolean {
    return this.bus.connected ?? true;
  }

  queueDepth(queue: string): Promise<number | undefined> {
    return this.bus.queueDepth ? this.bus.queueDepth(queue) : Promise.resolve(undefined);
  }

  async publish(queue: string, message: unknown, options?: PublishOptions): Promise<void> {
    await this.bus.publish(queue, message, options);
    this.metrics.busPublished.inc({ queue });
  }

  consume(queue: string, handler: MessageHandler, options?: ConsumeOptions): Promise<Subscription> {
    const { busConsumed, busRedelivered, busDeadLettered } = this.metrics;
    return this.bus.consume(
      queue,
      async (message, delivery) => {
        if (delivery.redelivered) busRedelivered.inc({ queue });
        try {
          await handler(message, delivery);
        } catch (err) {
          if (!isDeadLetterQueue(queue) && delivery.deliveryCount >= this.maxDeliveries) busDeadLettered.inc({ queue });
          throw err;
        }
        busConsumed.inc({ queue });
      },
      options,
    );
  }

  broadcast(topic: string, message: unknown): Promise<void> {
    return this.bus.broadcast(topic, message);
  }

  subscribe(topic: string, handler: BroadcastHandler): Promise<Subscription> {
    return this.bus.subscribe(topic, handler);
  }

  close(): Promise<void> {
    return this.bus.close();
  }
}
