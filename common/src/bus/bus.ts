import { SETTINGS } from '../config/settings.js';
import type { Logger } from '../logging/logger.js';
import { OrlojError } from '../core/errors.js';

/**
 * The message bus port. Two adapters: MemoryBus (embedded default) and
 * AmqpBus (RabbitMQ). Both pass the same conformance suite
 * (common/test/bus.test.ts); docs/bus.md describes the guarantees.
 */
export interface Bus {
  /**
   * Messages never leave this process (the in-process bus): producer and
   * consumer share one memory, so there is no one to authenticate and
   * envelopes travel unsigned (see roleBus).
   */
  readonly inProcess?: boolean;
  /** Resolves once the broker holds the message (publisher confirm). */
  publish(queue: string, message: unknown, options?: PublishOptions): Promise<void>;
  /**
   * Competing consumers with manual ack: the handler resolving acks, throwing
   * redelivers; after maxDeliveries the message moves to `<queue>.dead`.
   */
  consume(queue: string, handler: MessageHandler, options?: ConsumeOptions): Promise<Subscription>;
  /** Every current subscriber gets the message; absent ones miss it. */
  broadcast(topic: string, message: unknown): Promise<void>;
  subscribe(topic: string, handler: BroadcastHandler): Promise<Subscription>;
  /** Idempotent: stops consuming, waits for in-flight handlers and publishes. */
  close(): Promise<void>;
}

export interface Delivery {
  /** The message was delivered before: a handler threw or its consumer died. */
  readonly redelivered: boolean;
  /** 1 on the first delivery. */
  readonly deliveryCount: number;
}

export type MessageHandler = (message: unknown, delivery: Delivery) => Promise<void> | void;
/** Broadcast handlers run one message at a time per subscription; a throw is logged, never retried. */
export type BroadcastHandler = (message: unknown) => Promise<void> | void;

export interface PublishOptions {
  /**
   * AMQP message-id and type properties: shown by broker tooling. The AMQP
   * adapter names a message the broker returns (unroutable) by its id, so
   * each publish should have its own (SignedBus gives the envelope's).
   */
  messageId?: string;
  type?: string;
}

export interface ConsumeOptions {
  /** Most unacked messages this consumer holds at once (DEFAULT_PREFETCH unless set). */
  prefetch?: number;
}

export interface Subscription {
  /** Stops new deliveries and waits for the handlers already running. */
  cancel(): Promise<void>;
}

export interface BusOptions {
  logger: Logger;
  /** Prepended to every queue and exchange name (BUS_PREFIX's default unless set). */
  prefix?: string;
  /**
   * Deliveries before a message is dead-lettered (DEFAULT_MAX_DELIVERIES unless set). Part of the
   * queue's declaration, so every process must agree on it.
   */
  maxDeliveries?: number;
}

export const DEFAULT_BUS_PREFIX = SETTINGS.BUS_PREFIX.default;
/** Part of every queue's declaration, so every process must agree on it. */
export const DEFAULT_MAX_DELIVERIES = 5;
export const DEFAULT_PREFETCH = 1;
export const DEAD_LETTER_SUFFIX = '.dead';

export interface ResolvedBusOptions {
  log: Logger;
  prefix: string;
  maxDeliveries: number;
}

export function resolveBusOptions(options: BusOptions): ResolvedBusOptions {
  const prefix = options.prefix ?? DEFAULT_BUS_PREFIX;
  if (prefix !== '' && !NAME.test(prefix)) throw misuse(`bus prefix ${JSON.stringify(prefix)} may only contain letters, digits and . _ : -`);
  const maxDeliveries = options.maxDeliveries ?? DEFAULT_MAX_DELIVERIES;
  if (!Number.isInteger(maxDeliveries) || maxDeliveries < 1) throw misuse(`maxDeliveries must be a positive integer, got ${maxDeliveries}`);
  return { log: options.logger.child({ component: 'bus' }), prefix, maxDeliveries };
}

const NAME = /^[A-Za-z0-9._:-]+$/;
// AMQP names are at most 255 bytes; leave room for the prefix and `.dead`.
const MAX_NAME = 200;

/** The broker-side name of a queue or exchange. */
export function qualifiedName(prefix: string, name: string): string {
  if (!NAME.test(name) || name.length > MAX_NAME) {
    throw misuse(`bus name ${JSON.stringify(name)} must be 1-${MAX_NAME} letters, digits or . _ : -`);
  }
  return prefix + name;
}

/**
 * The fanout exchange in front of a work queue (RabbitMQ): publishers write to
 * it rather than to the default exchange, so the broker's write permission on
 * it decides who may publish to that queue (docs/bus.md, "Permissions").
 */
export function entryExchange(queue: string): string {
  return queue + ENTRY_SUFFIX;
}

export const ENTRY_SUFFIX = '.in';

export function deadLetterQueue(queue: string): string {
  return queue + DEAD_LETTER_SUFFIX;
}

/** Dead-letter queues have no delivery limit and no dead-letter queue of their own. */
export function isDeadLetterQueue(queue: string): boolean {
  return queue.endsWith(DEAD_LETTER_SUFFIX);
}

export function checkPrefetch(prefetch: number): number {
  if (!Number.isInteger(prefetch) || prefetch < 1 || prefetch > 65535) throw misuse(`prefetch must be an integer from 1 to 65535, got ${prefetch}`);
  return prefetch;
}

/**
 * Serializes a message for the wire. Both adapters use it, so a value that
 * would not survive JSON (a Date, a Map, NaN, a bigint, a cycle) fails at
 * publish in the embedded default exactly as it would against RabbitMQ,
 * instead of silently changing shape on one of them.
 */
export function encodeMessage(message: unknown): string {
  checkJson(message);
  return JSON.stringify(message);
}

/** Throws as encodeMessage would, without writing the JSON: a message joining a batch is checked alone, so it fails only its own publish. */
export function checkJson(message: unknown): void {
  const problem = jsonProblem(message, []);
  if (problem !== undefined) throw notJson(`message${problem}`);
}

/**
 * Where `value` stops being plain JSON, as the rest of a sentence that
 * starts with its path (".body.at is a Date"), or undefined when it is plain
 * JSON. `walking`: the objects above `value` (to find cycles). The path is
 * written only on the way out of a problem: every message is checked, and
 * building it for each field cost more than the check.
 */
function jsonProblem(value: unknown, walking: object[]): string | undefined {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return undefined;
    case 'number':
      return Number.isFinite(value) ? undefined : ` is ${value}`;
    case 'object': {
      if (value === null) return undefined;
      if (walking.includes(value)) return ' is a circular reference';
      walking.push(value);
      const problem = Array.isArray(value) ? itemsProblem(value, walking) : fieldsProblem(value, walking);
      walking.pop();
      return problem;
    }
    default:
      return ` is ${typeof value === 'undefined' ? 'undefined' : `a ${typeof value}`}`;
  }
}

function itemsProblem(items: readonly unknown[], walking: object[]): string | undefined {
  for (let i = 0; i < items.length; i++) {
    const problem = jsonProblem(items[i], walking);
    if (problem !== undefined) return `[${i}]${problem}`;
  }
  return undefined;
}

function fieldsProblem(value: object, walking: object[]): string | undefined {
  const proto: unknown = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) {
    return ` is a ${(value as { constructor?: { name?: string } }).constructor?.name ?? 'non-plain object'}`;
  }
  for (const key of Object.keys(value)) {
    const item = (value as Record<string, unknown>)[key];
    // JSON drops undefined properties; optional fields are normal.
    if (item === undefined) continue;
    const problem = jsonProblem(item, walking);
    if (problem !== undefined) return `.${key}${problem}`;
  }
  return undefined;
}

function notJson(detail: string): OrlojError {
  return misuse(`bus messages must be plain JSON values: ${detail}`);
}

export function misuse(message: string): OrlojError {
  return new OrlojError('internal_error', message, { kind: 'unexpected' });
}

export function busClosed(): OrlojError {
  return new OrlojError('service_unavailable', 'The message bus is closed.', { kind: 'operational' });
}

/** Same wording on both adapters, so operators read one set of log lines. */
/**
 * Thrown by a handler for a message that no delivery could ever handle (it
 * failed its signature check): both adapters move it to `<queue>.dead` at
 * once instead of redelivering it, and without the handler-failure log (the
 * handler logged why). On a dead-letter queue it is an ordinary failure.
 */
export class DeadLetterError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'DeadLetterError';
  }
}

export function logHandlerFailure(log: Logger, queue: string, delivery: Delivery, maxDeliveries: number, err: unknown): void {
  const fields = { err, queue, deliveryCount: delivery.deliveryCount };
  if (isDeadLetterQueue(queue)) log.warn(fields, 'dead-letter handler failed; the message will be redelivered');
  else if (delivery.deliveryCount >= maxDeliveries) log.error(fields, `handler failed on the last delivery; the message moves to ${deadLetterQueue(queue)}`);
  else log.warn(fields, 'handler failed; the message will be redelivered');
}
