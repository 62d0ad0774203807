import { ConfigError } from '../config/config.js';
import type { Bus } from './bus.js';
import { AmqpBus, type AmqpBusOptions } from './amqp.bus.js';
import { MemoryBus } from './memory.bus.js';

export type CreateBusOptions = AmqpBusOptions;

/**
 * The bus named by a URL: `memory:` for the in-process bus of the embedded
 * default, `amqp://` or `amqps://` for RabbitMQ (waits for the first
 * connection up to connectTimeoutMs). AMQP-only options are ignored by
 * the in-process bus.
 */
export async function createBus(url: string, options: CreateBusOptions): Promise<Bus> {
  const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(url)?.[1]?.toLowerCase();
  if (scheme === 'memory') return new MemoryBus(options);
  if (scheme === 'amqp' || scheme === 'amqps') return AmqpBus.connect(url, options);
  throw new ConfigError([`the bus URL must start with memory: or amqp:// or amqps:// (got scheme ${JSON.stringify(scheme ?? '')})`]);
}
