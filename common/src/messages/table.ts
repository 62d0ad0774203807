/** The roles that sign bus messages, each with its own Ed25519 key pair. */
export const PRODUCER_ROLES = ['api', 'scheduler', 'runners', 'log-ingest', 'notifier'] as const;
export type ProducerRole = (typeof PRODUCER_ROLES)[number];

export function isProducerRole(value: unknown): value is ProducerRole {
  return typeof value === 'string' && (PRODUCER_ROLES as readonly string[]).includes(value);
}

/**
 * The shape of a message table: each message type maps to the roles that may
 * produce it and the decoder its consumers' bodies go through. orloj's own
 * table is MESSAGES (messages/index.ts); SignedBus is typed by a table, so
 * `publish` takes the body of the type it is given and a handler gets the body
 * its decoder returned, with no casts.
 */

/** What a decoder made of a body: a typed value, or why it is unusable. */
export type Decoded<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly problem: string };

export interface MessageSpec<Wire, Read = Wire> {
  /** The roles whose key may sign it; a type missing from the table is accepted from nobody. */
  readonly producers: readonly ProducerRole[];
  /**
   * Checks a verified body: the envelope proves who sent it, not that its
   * producer (perhaps another version) sent the shape expected. May normalise
   * (a default, an unpacked form): consumers get what it returns.
   */
  readonly decode: (body: unknown) => Decoded<Read>;
  /** Type only, never set: the body producers publish. */
  readonly wire?: Wire;
}

export type MessageTable = { readonly [type: string]: MessageSpec<any, any> };

/** A table that types nothing: any message type, bodies unknown (tests of the envelope layer). */
export type UntypedMessages = { readonly [type: string]: MessageSpec<unknown, unknown> };

export type MessageType<M extends MessageTable> = keyof M & string;
/** The body a producer of `K` publishes. */
export type WireBody<M extends MessageTable, K extends keyof M> = M[K] extends MessageSpec<infer W, any> ? W : never;
/** The body a consumer of `K` gets (what its decoder returned). */
export type ReadBody<M extends MessageTable, K extends keyof M> = M[K] extends MessageSpec<any, infer R> ? R : never;

/** message type → the roles allowed to produce it; a type missing here is accepted from nobody. */
export type ProducerPolicy = Readonly<Record<string, readonly ProducerRole[]>>;

/** One entry of a table. `Wire` is named; `Read` comes from the decoder. */
export function messageSpec<Wire, Read = Wire>(producers: readonly ProducerRole[], decode: (body: unknown) => Decoded<Read>): MessageSpec<Wire, Read> {
  return { producers, decode };
}

export function producerPolicy(table: MessageTable): ProducerPolicy {
  return Object.fromEntries(Object.entries(table).map(([type, spec]) => [type, spec.producers]));
}

export function decoded<T>(value: T): Decoded<T> {
  return { ok: true, value };
}

export function unusable(problem: string): { readonly ok: false; readonly problem: string } {
  return { ok: false, problem };
}
