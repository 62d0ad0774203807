/**
 * The signed envelope, from sealing to a handler. The signer and
 * verifier (shape, signature, producer policy, expiry, replay), and the
 * SignedBus and verifying handler that put them on the bus and decode each
 * body once by the message table (docs/bus.md, "Signed envelope").
 */
import { sign, verify, type KeyObject } from 'node:crypto';
import type { Clock } from '../core/clock.js';
import { canonicalJson, isPlainObject } from '../core/canonical-json.js';
import { newId, isRequestId, isUuid, REQUEST_ID_PATTERN } from '../core/ids.js';
import type { Logger, RequestContext } from '../logging/logger.js';
import type { OrlojMessages } from '../messages/index.js';
import { DeadLetterError, deadLetterQueue, misuse, type Bus, type ConsumeOptions, type Subscription } from '../bus/bus.js';
import { BATCH_TYPE, digestOf, readBatch, DIGESTS_TYPE, signedDigests, signedWithProblem, type BatchItem, type BatchMode, type SignedWith } from './batch.js';
import { PublishBatches } from './publish-batches.js';
import { verifyingHandler, type EnvelopeHandler, type RefusalMetrics, type VerifyingOptions } from './verifying-handler.js';
import { isProducerRole, type MessageTable, type MessageType, type ProducerPolicy, type ReadBody, type WireBody, type ProducerRole } from '../messages/table.js';

export type { ProducerPolicy } from '../messages/table.js';

/**
 * A bus message with its provenance: who produced it, when, on whose behalf
 * (subject), signed with the producer role's Ed25519 key over the canonical
 * JSON of every other field.
 */
export interface Envelope<B = unknown, T extends string = string> {
  readonly id: string;
  readonly type: T;
  readonly producer: ProducerRole;
  /** ms since the epoch */
  readonly issued_at: number;
  readonly expires_at: number;
  /** The user a command acts for. */
  readonly subject?: string;
  /**
   * The api request that caused the message (its X-Request-Id), signed with
   * the rest; absent when no request did (and on messages of older versions).
   * A consumer's log lines for handling it carry it as `reqId`.
   */
  readonly req_id?: string;
  readonly body: B;
  /** base64url Ed25519 signature, or `-` on the in-process bus (see `signatures`) */
  readonly sig: string;
  /** On a message signed together with others and sent apart: what `sig` signs (ADR 0024). */
  readonly batch?: SignedWith;
}

/** An envelope of type `K` of table `M`, its body as that type's decoder returned it. */
export type TypedEnvelope<M extends MessageTable, K extends MessageType<M>> = K extends unknown ? Envelope<ReadBody<M, K>, K> : never;

/** `malformed`: authentic, but its body failed its type's decoder (or the type is not one the consumer takes). */
export type RejectionReason = 'unsigned' | 'bad_signature' | 'wrong_producer' | 'expired' | 'replayed' | 'malformed';

export type VerifyResult<B = unknown> =
  | { readonly ok: true; readonly envelope: Envelope<B> }
  | {
      readonly ok: false;
      readonly reason: RejectionReason;
      readonly detail: string;
      /** As claimed by the message: unauthenticated, for logs only. */
      readonly claimed: { id?: string; type?: string; producer?: string };
    };

// Domain separation: a signature over an envelope can never pass for a signature over anything else.
const SIGNING_CONTEXT = 'orloj-envelope-v1\n';
const FIELDS = new Set(['id', 'type', 'producer', 'issued_at', 'expires_at', 'subject', 'req_id', 'body', 'sig', 'batch']);
const SIG_SHAPE = /^[A-Za-z0-9_-]{86}$/;
/** The `sig` of an envelope sealed without a signature (in-process bus only). */
const NO_SIGNATURE = '-';

/**
 * `required`: envelopes are signed and only signed ones are accepted.
 * `in-process`: for a bus that never leaves the process, where a signature
 * proves nothing (every role's key is in the same memory) and costs more CPU
 * than the job it carries (Ed25519 sign + verify, three messages a job):
 * envelopes are sealed unsigned; the producer policy, expiry and replay checks
 * still apply.
 */
export type SignatureMode = 'required' | 'in-process';

export interface SealOptions {
  subject?: string;
  ttlMs?: number;
  /** The request that caused the message; SignedBus fills it from its RequestContext. */
  reqId?: string | undefined;
}

/** The life an envelope claims when its publisher names none. */
const ENVELOPE_TTL_MS = 5 * 60_000;

export class EnvelopeSigner {
  readonly role: ProducerRole;
  private readonly privateKey: KeyObject;
  private readonly clock: Clock;
  private readonly ttlMs: number;
  private readonly signatures: SignatureMode;

  constructor(options: { role: ProducerRole; privateKey: KeyObject; clock: Clock; ttlMs?: number; signatures?: SignatureMode }) {
    this.role = options.role;
    this.privateKey = options.privateKey;
    this.clock = options.clock;
    this.ttlMs = options.ttlMs ?? ENVELOPE_TTL_MS;
    this.signatures = options.signatures ?? 'required';
  }

  seal<B, T extends string = string>(type: T, body: B, options: SealOptions = {}): Envelope<B, T> {
    const ttlMs = this.checkTtl(options.ttlMs);
    checkMessage(type, body, options);
    return this.signed({ id: newId(), type, producer: this.role, ...this.window(ttlMs), ...onBehalfOf(options), body }) as Envelope<B, T>;
  }

  /**
   * Checks one message of a batch and gives it its id: a misuse throws here,
   * to the publisher that made it, never to the others of its batch.
   */
  item(type: string, body: unknown, options: SealOptions = {}): BatchItem {
    checkMessage(type, body, options);
    return { id: newId(), type, ...onBehalfOf(options), body };
  }

  /** Several messages in one envelope, one signature for all (`item` made each): its body is their JSON text. */
  sealBatch(items: readonly BatchItem[], ttlMs?: number): Envelope<string, typeof BATCH_TYPE> {
    const window = this.window(this.checkTtl(ttlMs));
    return this.signed({ id: newId(), type: BATCH_TYPE, producer: this.role, ...window, body: JSON.stringify(items) }) as Envelope<string, typeof BATCH_TYPE>;
  }

  /**
   * Several messages each in an envelope of its own, under one signature over
   * the list of their digests (`item` made each): for a queue where one
   * broker message must stay one message (ADR 0024).
   */
  sealApart(items: readonly BatchItem[], ttlMs?: number): Envelope[] {
    const window = this.window(this.checkTtl(ttlMs));
    const batch: SignedWith = { id: newId(), digests: items.map(digestOf) };
    const { sig } = this.signed({ id: batch.id, type: DIGESTS_TYPE, producer: this.role, ...window, body: batch.digests });
    return items.map(({ id, type, ...rest }) => ({ id, type, producer: this.role, ...window, ...rest, sig, batch }) as Envelope);
  }

  checkTtl(ttlMs: number | undefined): number {
    const ms = ttlMs ?? this.ttlMs;
    if (!Number.isSafeInteger(ms) || ms <= 0) throw misuse(`envelope ttlMs must be a positive integer, got ${ms}`);
    return ms;
  }

  private window(ttlMs: number): { issued_at: number; expires_at: number } {
    const issuedAt = this.clock.now();
    return { issued_at: issuedAt, expires_at: issuedAt + ttlMs };
  }

  private signed(unsigned: Record<string, unknown>): Envelope {
    const sig = this.signatures === 'in-process' ? NO_SIGNATURE : sign(null, signingInput(unsigned), this.privateKey).toString('base64url');
    return { ...unsigned, sig } as unknown as Envelope;
  }
}

function checkMessage(type: string, body: unknown, options: SealOptions): void {
  if (typeof type !== 'string' || type === '' || type === BATCH_TYPE) throw misuse('an envelope needs a message type');
  if (body === undefined) throw misuse('an envelope needs a body (null is fine)');
  if (options.reqId !== undefined && !isRequestId(options.reqId)) throw misuse(`an envelope's request id must match ${REQUEST_ID_PATTERN}, got ${JSON.stringify(options.reqId)}`);
}

/** The subject and request id a message carries, when it has them. */
function onBehalfOf(options: SealOptions): { subject?: string; req_id?: string } {
  return {
    ...(options.subject === undefined ? {} : { subject: options.subject }),
    ...(options.reqId === undefined ? {} : { req_id: options.reqId }),
  };
}

/** How far an envelope's issue time may lie in the future (clock skew between hosts). */
const MAX_CLOCK_SKEW_MS = 30_000;
/** The longest life an envelope may claim. */
const MAX_TTL_MS = 60 * 60_000;
/** Signed lists of digests a verifier remembers as checked: a hand-out pass's messages arrive within moments. */
const MAX_SIGNED_LISTS = 1_024;
/** Envelope ids a verifier remembers against replays; beyond it the oldest are forgotten. */
const MAX_SEEN_IDS = 100_000;

export interface VerifierOptions {
  publicKeys: Partial<Record<ProducerRole, KeyObject>>;
  policy: ProducerPolicy;
  clock: Clock;
  /** How far a producer's clock may run ahead (MAX_CLOCK_SKEW_MS unless set). */
  maxClockSkewMs?: number;
  /** Longest validity window accepted; it bounds how long ids must be remembered (MAX_TTL_MS unless set). */
  maxTtlMs?: number;
  /** Most ids remembered for replay detection (MAX_SEEN_IDS unless set). */
  maxSeen?: number;
  /** Default `required`; `in-process` accepts envelopes without a signature. */
  signatures?: SignatureMode;
}

/**
 * Checks envelopes: shape and signature first, so the policy, expiry and
 * replay counters only ever count authentic messages.
 *
 * Replay detection is per process and per scope (a queue or a
 * subscription): the same envelope may legitimately reach two queues. Ids
 * are forgotten once expired, when a replay would fail the expiry check anyway.
 */
export class EnvelopeVerifier {
  /**
   * Rejections by this verifier so far, by reason, for its own callers and
   * tests. What a process exports is `orloj_bus_messages_refused_total`,
   * counted by SignedBus by queue and reason: the one count of refused
   * messages (SignedBus keeps no tally of its own).
   */
  readonly rejected: Record<RejectionReason, number> = { unsigned: 0, bad_signature: 0, wrong_producer: 0, expired: 0, replayed: 0, malformed: 0 };
  private readonly publicKeys: Partial<Record<ProducerRole, KeyObject>>;
  private readonly policy: ProducerPolicy;
  private readonly clock: Clock;
  private readonly maxClockSkewMs: number;
  private readonly maxTtlMs: number;
  private readonly maxSeen: number;
  private readonly signatures: SignatureMode;
  /** scope + id → expires_at. */
  private readonly seen = new Map<string, number>();
  /**
   * The keys of `seen` in arrival order (close to expiry order: most
   * envelopes share a TTL) from `head` on. Not the Map's own order: a Map
   * whose oldest entries are deleted keeps holes at its front, and every
   * iteration from the start walks over them; at maxSeen that made each
   * message cost 20 µs and more, growing by the minute (the embedded
   * scheduler fell behind at 100,000 workflows).
   */
  private order: string[] = [];
  private head = 0;
  /** sig → the signing input it was verified over, for messages sent apart (the oldest forgotten first). */
  private readonly signedLists = new Map<string, string>();

  constructor(options: VerifierOptions) {
    this.publicKeys = options.publicKeys;
    this.policy = options.policy;
    this.clock = options.clock;
    this.maxClockSkewMs = options.maxClockSkewMs ?? MAX_CLOCK_SKEW_MS;
    this.maxTtlMs = options.maxTtlMs ?? MAX_TTL_MS;
    this.maxSeen = options.maxSeen ?? MAX_SEEN_IDS;
    this.signatures = options.signatures ?? 'required';
  }

  /**
   * With `remember: false` the id is not recorded: a consumer records it with
   * remember() once the message was handled, so a broker redelivery after a
   * failed attempt is not mistaken for a replay.
   */
  verify(value: unknown, options: { scope?: string; remember?: boolean } = {}): VerifyResult {
    const result = this.check(value, options.scope ?? '');
    if (!result.ok) this.rejected[result.reason] += 1;
    else if (options.remember !== false) this.remember(result.envelope, options.scope);
    return result;
  }

  remember(envelope: Envelope, scope = ''): void {
    this.forgetExpired();
    const key = seenKey(scope, envelope.id);
    if (!this.seen.has(key)) this.order.push(key);
    this.seen.set(key, envelope.expires_at);
    // Bounded even under a flood: the oldest id goes first.
    while (this.seen.size > this.maxSeen) this.seen.delete(this.order[this.head++]!);
    this.compact();
  }

  private check(value: unknown, scope: string): VerifyResult {
    if (!isPlainObject(value)) return reject('unsigned', 'not an envelope', {});
    const sig = value.sig;
    if (typeof sig !== 'string' || sig === '') return reject('unsigned', 'the envelope has no signature', claimedBy(value));
    // `sig` is one of FIELDS: the shape of the rest is checked without copying it out.
    const problem = shapeProblem(value);
    if (problem) return reject('bad_signature', `malformed envelope: ${problem}`, claimedBy(value));
    const envelope = value as unknown as Envelope;
    if (this.signatures === 'required') {
      const key = this.publicKeys[envelope.producer];
      if (!key) return reject('bad_signature', `no public key is configured for producer ${envelope.producer}`, claimedBy(value));
      const { sig: _sig, batch, ...fields } = value;
      // Sent apart: the signature covers the list of digests, which must hold this message's.
      const signed = batch === undefined ? fields : signedDigests(fields, batch as SignedWith);
      if (!signed || !SIG_SHAPE.test(sig) || !(batch === undefined ? verifies(signed, sig, key) : this.verifiesOnce(signed, sig, key))) {
        return reject('bad_signature', 'the signature does not match', claimedBy(value));
      }
    }

    let read = envelope;
    if (envelope.type === BATCH_TYPE) {
      // Authentic, so its items are what the producer sent: one it may not produce refuses the envelope that carries it.
      const batch = readBatch(envelope.body);
      if ('problem' in batch) return reject('bad_signature', `malformed batch: ${batch.problem}`, claimedBy(value));
      const refused = batch.items.find((item) => !this.mayProduce(envelope.producer, item.type));
      if (refused) return reject('wrong_producer', `${envelope.producer} may not produce ${refused.type} messages`, claimedBy(value));
      read = { ...envelope, body: batch.items };
    } else if (!this.mayProduce(envelope.producer, envelope.type)) {
      return reject('wrong_producer', `${envelope.producer} may not produce ${envelope.type} messages`, claimedBy(value));
    }
    const now = this.clock.now();
    if (envelope.expires_at <= envelope.issued_at || envelope.expires_at - envelope.issued_at > this.maxTtlMs) {
      return reject('expired', `the validity window must be 1 ms to ${this.maxTtlMs} ms`, claimedBy(value));
    }
    if (envelope.issued_at > now + this.maxClockSkewMs) return reject('expired', 'issued in the future', claimedBy(value));
    if (now >= envelope.expires_at) return reject('expired', `expired ${now - envelope.expires_at} ms ago`, claimedBy(value));

    this.forgetExpired();
    if (this.seen.has(seenKey(scope, envelope.id))) return reject('replayed', 'this envelope was accepted before', claimedBy(value));
    return { ok: true, envelope: read };
  }

  /**
   * True when a message of a verified batch was handled in this scope
   * before: a batch comes again when a handler failed on another of its
   * messages, and runs again only those. Not a refusal: a batch sent again
   * whole is refused as a replay by its own id.
   */
  handledBefore(item: Envelope, scope = ''): boolean {
    this.forgetExpired();
    return this.seen.has(seenKey(scope, item.id));
  }

  /**
   * One Ed25519 check for every message sent apart under one signature: the
   * check costs more than the rest of a message's handling together. A
   * signature is remembered with the exact text it was found to sign.
   */
  private verifiesOnce(signed: Record<string, unknown>, sig: string, key: KeyObject): boolean {
    let text: string;
    try {
      text = SIGNING_CONTEXT + canonicalJson(signed);
    } catch {
      return false; // not canonicalizable: cannot be what was signed
    }
    if (this.signedLists.get(sig) === text) return true;
    if (!verify(null, Buffer.from(text, 'utf8'), key, Buffer.from(sig, 'base64url'))) return false;
    this.signedLists.set(sig, text);
    if (this.signedLists.size > MAX_SIGNED_LISTS) this.signedLists.delete(this.signedLists.keys().next().value!);
    return true;
  }

  private mayProduce(producer: ProducerRole, type: string): boolean {
    const allowed = Object.hasOwn(this.policy, type) ? this.policy[type] : undefined;
    return allowed?.includes(producer) === true;
  }

  private forgetExpired(): void {
    const now = this.clock.now();
    while (this.head < this.order.length) {
      const key = this.order[this.head]!;
      if ((this.seen.get(key) ?? 0) > now) break;
      this.seen.delete(key);
      this.head += 1;
    }
    this.compact();
  }

  /** Drops the keys before `head` once they are most of `order`: amortized O(1) a message. */
  private compact(): void {
    if (this.head > 1024 && this.head * 2 > this.order.length) {
      this.order = this.order.slice(this.head);
      this.head = 0;
    }
  }
}

/** What a message claims to be (unauthenticated, for logs only): built only for a rejection, most messages pass. */
function claimedBy(value: Record<string, unknown>): { id?: string; type?: string; producer?: string } {
  return {
    ...(typeof value.id === 'string' ? { id: value.id } : {}),
    ...(typeof value.type === 'string' ? { type: value.type } : {}),
    ...(typeof value.producer === 'string' ? { producer: value.producer } : {}),
  };
}

function reject(reason: RejectionReason, detail: string, claimed: { id?: string; type?: string; producer?: string }): VerifyResult {
  return { ok: false, reason, detail, claimed };
}

function seenKey(scope: string, id: string): string {
  return `${scope}\u0000${id}`;
}

function shapeProblem(fields: Record<string, unknown>): string | undefined {
  const unknown = Object.keys(fields).find((k) => !FIELDS.has(k));
  if (unknown !== undefined) return `unknown field ${JSON.stringify(unknown)}`;
  if (!isUuid(fields.id)) return 'id must be a UUID';
  if (typeof fields.type !== 'string' || fields.type === '') return 'type must be a non-empty string';
  if (fields.type === DIGESTS_TYPE) return `${DIGESTS_TYPE} is not a message type`;
  if ('batch' in fields) {
    if (fields.type === BATCH_TYPE) return 'a batch envelope is not sent apart';
    const problem = signedWithProblem(fields.batch);
    if (problem) return problem;
  }
  if (!isProducerRole(fields.producer)) return 'producer must be a known role';
  if (!Number.isSafeInteger(fields.issued_at) || !Number.isSafeInteger(fields.expires_at)) return 'issued_at and expires_at must be integers';
  if ('subject' in fields && typeof fields.subject !== 'string') return 'subject must be a string';
  if ('req_id' in fields && !isRequestId(fields.req_id)) return 'req_id must be a request id';
  if (!('body' in fields)) return 'body is missing';
  return undefined;
}

function verifies(signed: Record<string, unknown>, sig: string, key: KeyObject): boolean {
  try {
    return verify(null, signingInput(signed), key, Buffer.from(sig, 'base64url'));
  } catch {
    return false; // not canonicalizable: cannot be what was signed
  }
}

function signingInput(fields: Record<string, unknown>): Buffer {
  return Buffer.from(SIGNING_CONTEXT + canonicalJson(fields), 'utf8');
}

// ---- the bus, with envelopes ------------------------------------------------

export async function sealAndPublish<B, T extends string>(bus: Bus, signer: EnvelopeSigner, queue: string, type: T, body: B, options: SealOptions = {}): Promise<Envelope<B, T>> {
  const envelope = signer.seal(type, body, options);
  await bus.publish(queue, envelope, { messageId: envelope.id, type });
  return envelope;
}

/** How a SignedBus consumer takes messages: which types (typing the handler), and a tally of refused bodies. */
export interface SignedConsumeOptions<K extends string = string> extends ConsumeOptions {
  /** The only message types handled here; any other is refused as malformed. Absent: every type of the table. */
  accept?: readonly K[];
  onMalformed?: (problem: string, envelope: Envelope) => void;
  /** Told of each message's signature check (a runner takes itself out after several failures in a row). */
  onSignatureCheck?: (passed: boolean) => void;
}

/**
 * A Bus through which a role sends and receives signed envelopes only, typed
 * by a message table (orloj's: MESSAGES, as roleBus builds it): `publish`
 * takes the body of the message type it is given, a handler gets the body its
 * type's decoder returned. Without `messages` nothing is decoded: tests that
 * look at the wire format consume that way.
 */
export class SignedBus<M extends MessageTable = OrlojMessages> {
  private readonly bus: Bus;
  private readonly signer: EnvelopeSigner | undefined;
  private readonly verifier: EnvelopeVerifier;
  private readonly log: Logger;
  private readonly metrics: RefusalMetrics | undefined;
  private readonly messages: M | undefined;
  private readonly requestContext: RequestContext | undefined;
  private readonly batched: Readonly<Record<string, BatchMode>>;
  private readonly batches: PublishBatches | undefined;

  /**
   * `metrics`: refused messages are counted there by queue (or topic) and reason.
   * `requestContext`: a message published inside a request carries its id,
   * and a handler runs inside the id of the message it handles.
   * `batched`: queues whose messages published in one turn are signed once,
   * and how they leave (PublishBatches); every consumer takes both forms.
   */
  constructor(options: {
    bus: Bus;
    verifier: EnvelopeVerifier;
    logger: Logger;
    signer?: EnvelopeSigner;
    metrics?: RefusalMetrics | undefined;
    messages?: M;
    requestContext?: RequestContext | undefined;
    batched?: Readonly<Record<string, BatchMode>> | undefined;
  }) {
    this.bus = options.bus;
    this.metrics = options.metrics;
    this.signer = options.signer;
    this.verifier = options.verifier;
    this.messages = options.messages;
    this.requestContext = options.requestContext;
    this.log = options.logger.child({ component: 'signed-bus' });
    this.batched = options.batched ?? {};
    this.batches = options.signer && Object.keys(this.batched).length > 0 ? new PublishBatches(this.bus, options.signer) : undefined;
  }

  async publish<K extends MessageType<M>>(queue: string, type: K, body: WireBody<M, K>, options?: SealOptions): Promise<Envelope<WireBody<M, K>, K>> {
    const mode = Object.hasOwn(this.batched, queue) ? this.batched[queue] : undefined;
    if (this.batches && mode) return (await this.batches.publish(queue, mode, type, body, this.sealOptions(options))) as Envelope<WireBody<M, K>, K>;
    return sealAndPublish(this.bus, this.requireSigner(), queue, type, body, this.sealOptions(options));
  }

  async broadcast<K extends MessageType<M>>(topic: string, type: K, body: WireBody<M, K>, options?: SealOptions): Promise<Envelope<WireBody<M, K>, K>> {
    const envelope = this.requireSigner().seal(type, body, this.sealOptions(options));
    await this.bus.broadcast(topic, envelope);
    return envelope;
  }

  consume<K extends MessageType<M> = MessageType<M>>(queue: string, handler: EnvelopeHandler<TypedEnvelope<M, K>>, options: SignedConsumeOptions<K> = {}): Promise<Subscription> {
    const { accept, onMalformed, onSignatureCheck, ...consumeOptions } = options;
    // The one widening: the handler gets only envelopes of `accept`ed types whose bodies their decoder in `messages` returned.
    const verifying = verifyingHandler({ ...this.verifying(`queue:${queue}`, queue, accept, onMalformed), onSignatureCheck }, handler as EnvelopeHandler);
    return this.bus.consume(queue, verifying, consumeOptions);
  }

  subscribe<K extends MessageType<M> = MessageType<M>>(
    topic: string,
    handler: (envelope: TypedEnvelope<M, K>) => Promise<void> | void,
    options: { accept?: readonly K[] } = {},
  ): Promise<Subscription> {
    // Each subscription sees every broadcast once, so each gets its own replay scope.
    const scope = `topic:${topic}#${newId()}`;
    const verifying = verifyingHandler(this.verifying(scope, topic, options.accept, undefined), (envelope) => handler(envelope as TypedEnvelope<M, K>));
    return this.bus.subscribe(topic, async (message) => {
      try {
        await verifying(message, { redelivered: false, deliveryCount: 1 });
      } catch (err) {
        // A broadcast has no dead-letter queue: the rejection is logged and counted, the message dropped.
        if (!(err instanceof DeadLetterError)) throw err;
      }
    });
  }

  /** The bus never leaves this process (MemoryBus): its messages do not outlive it. */
  get inProcess(): boolean {
    return this.bus.inProcess === true;
  }

  /**
   * Consumes `<queue>.dead` as it is: a message lands there because no
   * consumer could verify or handle it, so it is handed over unverified
   * (what it claims is a hint to check against the store, never a command).
   */
  consumeDeadLetters(queue: string, handler: (message: unknown) => Promise<void> | void, options?: ConsumeOptions): Promise<Subscription> {
    return this.bus.consume(deadLetterQueue(queue), (message) => handler(message), options);
  }

  /** Messages this bus refused, by reason (a metrics layer reads it). */
  get rejected(): Readonly<Record<RejectionReason, number>> {
    return this.verifier.rejected;
  }

  private verifying(scope: string, name: string, accept: readonly string[] | undefined, onMalformed: SignedConsumeOptions['onMalformed']): VerifyingOptions {
    const counter = this.metrics?.busRefused;
    return {
      verifier: this.verifier,
      logger: this.log,
      scope,
      onRefused: counter ? (reason) => counter.inc({ queue: name, reason }) : undefined,
      messages: this.messages,
      accept,
      onMalformed,
      requestContext: this.requestContext,
    };
  }

  private sealOptions(options: SealOptions | undefined): SealOptions {
    if (options?.reqId !== undefined || !this.requestContext) return options ?? {};
    const reqId = this.requestContext.current();
    return reqId === undefined ? (options ?? {}) : { ...options, reqId };
  }

  private requireSigner(): EnvelopeSigner {
    if (!this.signer) throw misuse('this SignedBus has no signing key: it can only consume');
    return this.signer;
  }
}
