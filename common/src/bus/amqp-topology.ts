import type { Channel, ChannelModel } from 'amqplib';
import { deadLetterQueue, entryExchange, isDeadLetterQueue } from './bus.js';

/**
 * The queues and exchanges the AMQP adapter declares: what is asserted on the
 * current connection (declaring is idempotent but costs a round trip), and
 * everything ever declared, for destroy().
 */
export class AmqpTopology {
  private readonly asserted = new Set<string>();
  private readonly declared = { queues: new Set<string>(), exchanges: new Set<string>() };

  constructor(private readonly maxDeliveries: number) {}

  /** A new connection, or a channel error that may mean something asserted was deleted: declare again. */
  forgetAsserted(): void {
    this.asserted.clear();
  }

  /** The broker may have lost this queue (or `exchange:<name>`): declare it again next time. */
  invalidate(key: string): void {
    this.asserted.delete(key);
  }

  get isEmpty(): boolean {
    return this.declared.queues.size === 0 && this.declared.exchanges.size === 0;
  }

  /** Deletes every queue and exchange declared through this topology, over `conn`. */
  async deleteAll(conn: ChannelModel): Promise<void> {
    const ch = await conn.createChannel();
    for (const queue of this.declared.queues) await ch.deleteQueue(queue);
    for (const exchange of this.declared.exchanges) await ch.deleteExchange(exchange);
  }

  /**
   * A work queue with its entry exchange, and (for a queue that is not itself
   * a dead-letter queue) `<queue>.dead` with its own, which is the queue's
   * dead-letter exchange. Messages never go through the default exchange, so
   * broker permissions on the entry exchanges decide who may publish where.
   */
  async declareQueue(ch: Channel, name: string): Promise<void> {
    if (this.asserted.has(name)) return;
    if (isDeadLetterQueue(name)) {
      await this.declareQuorumQueue(ch, name, {});
    } else {
      const dead = deadLetterQueue(name);
      await this.declareQuorumQueue(ch, dead, {});
      await this.declareQuorumQueue(ch, name, {
        // the broker dead-letters once a message was returned more than this many times
        'x-delivery-limit': this.maxDeliveries - 1,
        'x-dead-letter-exchange': entryExchange(dead),
        // at-least-once dead-lettering requires reject-publish overflow
        'x-dead-letter-strategy': 'at-least-once',
        'x-overflow': 'reject-publish',
      });
    }
    this.asserted.add(name);
  }

  async declareExchange(ch: Channel, name: string): Promise<void> {
    if (this.asserted.has(`exchange:${name}`)) return;
    // durable and never auto-deleted: a vanished exchange would turn the next broadcast into a channel error
    await ch.assertExchange(name, 'fanout', { durable: true });
    this.declared.exchanges.add(name);
    this.asserted.add(`exchange:${name}`);
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
}
