/**
 * The batch envelope's form: several messages to one queue in one envelope,
 * signed once (docs/adr/0024-batch-envelopes.md).
 */
import { createHash } from 'node:crypto';
import { canonicalJson, isPlainObject } from '../core/canonical-json.js';
import { isRequestId, isUuid } from '../core/ids.js';
import type { Envelope } from './envelope.js';

/**
 * The envelope type of a batch. On the wire its body is the JSON text of its
 * items, signed as it stands: the signature's canonical form of a string is
 * the string itself, so neither side walks the items to canonicalise them
 * (the verifier parses the text once it verified). Each item is handled as an
 * envelope of its own (`unpack`), with the batch's producer, issue and
 * expiry times.
 */
export const BATCH_TYPE = 'batch';

/** One message of a batch envelope: what an envelope of its own would carry besides producer, times and signature. */
export interface BatchItem {
  readonly id: string;
  readonly type: string;
  readonly subject?: string;
  readonly req_id?: string;
  readonly body: unknown;
}

const ITEM_FIELDS = new Set(['id', 'type', 'subject', 'req_id', 'body']);

function batchProblem(items: unknown): string | undefined {
  if (!Array.isArray(items) || items.length === 0) return 'the body must be a non-empty list of messages';
  for (const [i, item] of items.entries()) {
    if (!isPlainObject(item)) return `message ${i} is not an object`;
    const unknown = Object.keys(item).find((k) => !ITEM_FIELDS.has(k));
    if (unknown !== undefined) return `message ${i} has an unknown field ${JSON.stringify(unknown)}`;
    if (!isUuid(item.id)) return `message ${i}: id must be a UUID`;
    if (typeof item.type !== 'string' || item.type === '' || item.type === BATCH_TYPE) return `message ${i}: type must be a message type`;
    if ('subject' in item && typeof item.subject !== 'string') return `message ${i}: subject must be a string`;
    if ('req_id' in item && !isRequestId(item.req_id)) return `message ${i}: req_id must be a request id`;
    if (!('body' in item)) return `message ${i}: body is missing`;
  }
  return undefined;
}

/** The items of a verified batch envelope's body (the JSON text it was signed as), or what makes them unreadable. */
export function readBatch(body: unknown): { items: readonly BatchItem[] } | { problem: string } {
  if (typeof body !== 'string') return { problem: 'the body must be the JSON text of its messages' };
  let items: unknown;
  try {
    items = JSON.parse(body);
  } catch {
    return { problem: 'the body is not JSON' };
  }
  const problem = batchProblem(items);
  return problem ? { problem } : { items: items as readonly BatchItem[] };
}

/**
 * The messages an envelope carries, each as an envelope of its own: a batch's
 * items (its body as the verifier read it) with its producer, times and
 * signature (which covers the batch, not the item alone), or the envelope itself.
 */
export function unpack(envelope: Envelope): readonly Envelope[] {
  if (envelope.type !== BATCH_TYPE) return [envelope];
  return (envelope.body as readonly BatchItem[]).map((item) => itemEnvelope(item, envelope));
}

/** One item of a batch as an envelope of its own. */
export function itemEnvelope(item: BatchItem, batch: Pick<Envelope, 'producer' | 'issued_at' | 'expires_at' | 'sig'>): Envelope {
  const { producer, issued_at, expires_at, sig } = batch;
  return { ...item, producer, issued_at, expires_at, sig };
}


/**
 * How a queue's messages published together leave (ADR 0024): `together` in
 * one batch envelope, one broker message; `apart` each in a broker message of
 * its own, under one signature over all their digests (`SignedWith`).
 */
export type BatchMode = 'together' | 'apart';

/**
 * What one signature over several messages sent apart signs: the list of
 * their digests under this type. Never the type of a message: an envelope
 * that claims it is refused, so such a signature cannot pass for a message.
 */
export const DIGESTS_TYPE = 'batch.digests';

/**
 * On a message sent apart from the others it was signed with: the id of the
 * signed list and every message's digest (`digestOf`). The signature covers
 * the list; the list covers the message.
 */
export interface SignedWith {
  readonly id: string;
  readonly digests: readonly string[];
}

/** Most messages signed together and sent apart: each carries every digest (44 bytes of JSON each). */
export const MAX_SENT_APART = 64;

const DIGEST_SHAPE = /^[A-Za-z0-9_-]{43}$/;

/** SHA-256 of the canonical JSON of a message's own fields (`BatchItem`), base64url. */
export function digestOf(item: BatchItem): string {
  return createHash('sha256').update(canonicalJson(item)).digest('base64url');
}

/** What makes a `batch` field unreadable (as a sentence's end), or undefined. */
export function signedWithProblem(value: unknown): string | undefined {
  if (!isPlainObject(value)) return 'batch must be an object';
  if (Object.keys(value).some((k) => k !== 'id' && k !== 'digests')) return 'batch may hold only id and digests';
  if (!isUuid(value.id)) return 'batch.id must be a UUID';
  const { digests } = value;
  if (!Array.isArray(digests) || digests.length === 0 || digests.length > MAX_SENT_APART) return `batch.digests must list 1 to ${MAX_SENT_APART} digests`;
  if (!digests.every((d) => typeof d === 'string' && DIGEST_SHAPE.test(d))) return 'batch.digests must be SHA-256 digests';
  return undefined;
}

/**
 * What the signature of a message sent apart signs, given the message's
 * fields without `sig` and `batch`: the signed list of digests, or undefined
 * when the message's own digest is not on it.
 */
export function signedDigests(fields: Record<string, unknown>, batch: SignedWith): Record<string, unknown> | undefined {
  const { producer, issued_at, expires_at, ...item } = fields;
  if (!batch.digests.includes(digestOf(item as unknown as BatchItem))) return undefined;
  return { id: batch.id, type: DIGESTS_TYPE, producer, issued_at, expires_at, body: batch.digests };
}
