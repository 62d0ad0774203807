import type { ChannelModel, ConfirmChannel, Message, Options } from 'amqplib';
import type { Logger } from '../logging/logger.js';
import { OrlojError } from '../core/errors.js';
import { entryExchange } from './bus.js';
import { confirmed } from './amqp-promises.js';
import type { AmqpTopology } from './amqp-topology.js';

/**
 * The publishing side of the AMQP adapter: one shared confirm channel per
 * connection (when the broker closes it, the next publish opens another),
 * every publish confirmed, and a message the broker could not route
 * (basic.return) declared again and sent once more.
 */
export class AmqpPublisher {
  private pub: { conn: ChannelModel; channel: Promise<ConfirmChannel> } | undefined;
  private readonly channelErrors = new WeakMap<ConfirmChannel, unknown>();
  private readonly returned = new Set<string>();
  private publishSeq = 0;

  constructor(
    private readonly topology: AmqpTopology,
    private readonly log: Logger,
  ) {}

  /** The connection went away: its channel with it. */
  reset(): void {
    this.pub = undefined;
  }

  async publish(conn: ChannelModel, name: string, body: Buffer, properties: Options.Publish): Promise<void> {
    await this.onChannel(conn, async (ch) => {
      // The declared-queue cache can go stale (someone deleted the queue);
      // mandatory makes the broker return such a message instead of
      // confirming it into the void, and we declare again once.
      for (let attempt = 1; ; attempt++) {
        await this.topology.declareQueue(ch, name);
        // A return names its message by message-id: the caller's (SignedBus's is the envelope's id), else a sequence number.
        // No header of our own: every header costs the broker its decoding, on every message.
        const id = properties.messageId ?? `seq-${++this.publishSeq}`;
        await confirmed((done) => ch.publish(entryExchange(name), '', body, { ...properties, messageId: id }, done));
        // basic.return always precedes the confirm of the same message
        if (!this.returned.delete(id)) return;
        this.topology.invalidate(name);
        if (attempt === 2) throw new OrlojError('service_unavailable', `The broker could not route a message to ${name}.`, { kind: 'operational' });
      }
    });
  }

  async broadcast(conn: ChannelModel, name: string, body: Buffer, properties: Options.Publish): Promise<void> {
    await this.onChannel(conn, async (ch) => {
      await this.topology.declareExchange(ch, name);
      await confirmed((done) => ch.publish(name, '', body, properties, done));
    });
  }

  private async onChannel(conn: ChannelModel, fn: (ch: ConfirmChannel) => Promise<void>): Promise<void> {
    const ch = await this.channel(conn);
    try {
      await fn(ch);
    } catch (err) {
      // pending confirms only hear "channel closed"; the broker's reason came with the 'error' event
      throw this.channelErrors.get(ch) ?? err;
    }
  }

  private channel(conn: ChannelModel): Promise<ConfirmChannel> {
    if (this.pub?.conn === conn) return this.pub.channel;
    const channel = conn.createConfirmChannel().then((ch) => {
      ch.on('error', (err: unknown) => {
        this.channelErrors.set(ch, err);
        this.log.warn({ err }, 'publish channel closed by the broker');
      });
      ch.on('return', (msg: Message) => {
        const id: unknown = msg.properties.messageId;
        if (typeof id === 'string') this.returned.add(id);
      });
      ch.on('close', () => {
        if (this.pub?.channel !== channel) return;
        this.pub = undefined;
        // a channel error may mean something we asserted was deleted
        this.topology.forgetAsserted();
      });
      return ch;
    });
    channel.catch(() => {
      if (this.pub?.channel === channel) this.pub = undefined;
    });
    this.pub = { conn, channel };
    return channel;
  }
}
