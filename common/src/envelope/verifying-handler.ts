/**
 * From a bus message to a handler: verified, unpacked when it is a batch,
 * decoded by its type's decoder, and refused in one place when it cannot be
 * handled (docs/bus.md, "Signed envelope").
 */
import { DeadLetterError, type Delivery, type MessageHandler } from '../bus/bus.js';
import type { Logger, RequestContext } from '../logging/logger.js';
import type { MessageTable } from '../messages/table.js';
import { BATCH_TYPE, unpack } from './batch.js';
import type { Envelope, EnvelopeVerifier, RejectionReason } from './envelope.js';

/**
 * What the signed bus counts, and nothing more: observability's `OrlojMetrics` fits it,
 * so the envelope needs no import from the concern above it (ARCHITECTURE.md).
 */
export interface RefusalMetrics {
  readonly busRefused: { inc(labels: { queue: string; reason: RejectionReason }): void };
}

export type EnvelopeHandler<E extends Envelope = Envelope> = (envelope: E, delivery: Delivery) => Promise<void> | void;

/** Rejections that mean a sender without the right key (or a forgery), not a late or repeated message. */
const SIGNATURE_FAILURES: ReadonlySet<RejectionReason> = new Set(['unsigned', 'bad_signature', 'wrong_producer']);

export interface VerifyingOptions {
  verifier: EnvelopeVerifier;
  logger: Logger;
  scope: string;
  onRefused?: ((reason: RejectionReason) => void) | undefined;
  /** Decodes each verified body with its type's decoder; a type it lacks passes as it is. */
  messages?: MessageTable | undefined;
  /** The message types this consumer takes; another is refused as malformed. Absent: any. */
  accept?: readonly string[] | undefined;
  /** Told of each body refused as malformed (a role's own tally). */
  onMalformed?: ((problem: string, envelope: Envelope) => void) | undefined;
  /** Told of each message's signature check: passed, or failed (unsigned, bad signature, wrong producer). */
  onSignatureCheck?: ((passed: boolean) => void) | undefined;
  /** Runs the handler inside the envelope's request id, so its log lines carry `reqId`. */
  requestContext?: RequestContext | undefined;
}

/**
 * Wraps a handler so only verified, decoded envelopes reach it. A message
 * that fails its signature check (unsigned, bad signature, a role signing
 * what it may not) is logged at error level with the role it claims to come
 * from and dead-lettered (DeadLetterError): never acked into nothing, so
 * whoever watches `<queue>.dead` (the scheduler, for jobs) learns of it at
 * once. An expired or replayed message, and an authentic one whose body its
 * type's decoder refuses (malformed: the one place bodies are refused), is
 * logged and acked (dropped): redelivering it would fail the same way. A
 * handler failure still redelivers, and the id is recorded only after
 * success, so the redelivery is not called a replay. A batch envelope is
 * verified once and its items handled each as an envelope of its own: a
 * failed signature check refuses the batch (every item it carries, nothing
 * else), a malformed item only itself.
 */
export function verifyingHandler(options: VerifyingOptions, handler: EnvelopeHandler): MessageHandler {
  const { verifier, logger, scope, onRefused } = options;
  return async (message, delivery) => {
    const result = verifier.verify(message, { scope, remember: false });
    if (!result.ok) {
      onRefused?.(result.reason);
      const fields = { reason: result.reason, detail: result.detail, claimed: result.claimed, claimedRole: result.claimed.producer, scope };
      if (SIGNATURE_FAILURES.has(result.reason)) {
        options.onSignatureCheck?.(false);
        logger.error(fields, 'rejected a bus message that failed its signature check (are the sender\'s and this process\'s keys the same pair?)');
        throw new DeadLetterError(`bus message rejected: ${result.reason}`);
      }
      logger.warn(fields, 'dropped a bus message that failed verification');
      return;
    }
    options.onSignatureCheck?.(true);
    const { envelope } = result;
    if (envelope.type === BATCH_TYPE) await handleBatch(unpack(envelope), (item) => handleItem(item, delivery, options, handler));
    else await handleOne(envelope, delivery, options, handler);
    verifier.remember(envelope, scope);
  };
}

/**
 * A batch's items, all handed to the handler at once, in order, as the batch
 * arrives: before anything delivered after it (a runner's job.started in a
 * batch, then its job.finished alone), as separate messages would have
 * reached it. The consumer's prefetch bounds the broker messages in hand, a
 * batch counting once: the handlers of batched queues gather what they get
 * into transactions of their own (Batcher). A failed item fails the batch
 * once the rest are done, so the broker redelivers it; the items handled
 * meanwhile are remembered, and the redelivery runs only the others here
 * (another process runs them all: handlers are idempotent, delivery is at
 * least once).
 */
async function handleBatch(items: readonly Envelope[], handle: (item: Envelope) => Promise<void>): Promise<void> {
  const outcomes = await Promise.allSettled(items.map(handle));
  const failed = outcomes.find((o) => o.status === 'rejected');
  if (failed) throw failed.reason;
}

async function handleItem(item: Envelope, delivery: Delivery, options: VerifyingOptions, handler: EnvelopeHandler): Promise<void> {
  const { verifier, scope } = options;
  if (verifier.handledBefore(item, scope)) return;
  await handleOne(item, delivery, options, handler);
  verifier.remember(item, scope);
}

/** Decodes one authentic message and runs the handler on it: a body its decoder refuses is dropped (malformed). */
async function handleOne(envelope: Envelope, delivery: Delivery, options: VerifyingOptions, handler: EnvelopeHandler): Promise<void> {
  const { verifier, logger, scope, onRefused } = options;
  const read = decodeBody(envelope, options);
  if (!read.ok) {
    verifier.rejected.malformed += 1;
    onRefused?.('malformed');
    options.onMalformed?.(read.problem, envelope);
    logger.warn(
      { reason: 'malformed', detail: read.problem, type: envelope.type, envelopeId: envelope.id, producer: envelope.producer, scope },
      'dropped a bus message whose body its consumer cannot use',
    );
    return;
  }
  const { requestContext } = options;
  const reqId = read.envelope.req_id;
  await (requestContext && reqId !== undefined ? requestContext.run(reqId, () => handler(read.envelope, delivery)) : handler(read.envelope, delivery));
}

function decodeBody(envelope: Envelope, options: VerifyingOptions): { ok: true; envelope: Envelope } | { ok: false; problem: string } {
  if (options.accept && !options.accept.includes(envelope.type)) return { ok: false, problem: `${envelope.type} messages are not taken here` };
  const spec = options.messages && Object.hasOwn(options.messages, envelope.type) ? options.messages[envelope.type] : undefined;
  if (!spec) return { ok: true, envelope };
  const body = spec.decode(envelope.body);
  return body.ok ? { ok: true, envelope: { ...envelope, body: body.value } } : body;
}

