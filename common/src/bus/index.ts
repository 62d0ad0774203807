export type {
  Bus,
  BusOptions,
  BroadcastHandler,
  ConsumeOptions,
  Delivery,
  MessageHandler,
  PublishOptions,
  Subscription,
} from './bus.js';
export { DEAD_LETTER_SUFFIX, DEFAULT_MAX_DELIVERIES, DEFAULT_PREFETCH, DEFAULT_BUS_PREFIX, deadLetterQueue, entryExchange } from './bus.js';
export { MemoryBus } from './memory.bus.js';
export { AmqpBus, type AmqpBusOptions } from './amqp.bus.js';
export { createBus, type CreateBusOptions } from './create-bus.js';
