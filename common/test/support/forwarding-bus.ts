import type { BroadcastHandler, Bus, ConsumeOptions, MessageHandler, PublishOptions, Subscription } from '@orloj/common/bus';

/**
 * A bus in front of another that forwards every call: the base of the test buses that
 * record, hold or refuse some messages (a slow broker, an outage). A subclass overrides
 * the calls it changes and forwards the rest with `super`.
 */
export class ForwardingBus implements Bus {
  constructor(readonly inner: Bus) {}
  publish(queue: string, message: unknown, options?: PublishOptions): Promise<void> {
    return this.inner.publish(queue, message, options);
  }
  consume(queue: string, handler: MessageHandler, options?: ConsumeOptions): Promise<Subscription> {
    return this.inner.consume(queue, handler, options);
  }
  broadcast(topic: string, message: unknown): Promise<void> {
    return this.inner.broadcast(topic, message);
  }
  subscribe(topic: string, handler: BroadcastHandler): Promise<Subscription> {
    return this.inner.subscribe(topic, handler);
  }
  close(): Promise<void> {
    return this.inner.close();
  }
}
