import crypto from 'node:crypto';
import type { Context } from 'koa';
import { canonicalJson, OrlojError, type Clock } from '@orloj/common/core';
import type { Store } from '@orloj/common/store';

/** How long an Idempotency-Key is remembered. */
export const IDEMPOTENCY_TTL_MS = 24 * 60 * 60_000;
export const MAX_KEY_BYTES = 255;
const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * The Idempotency-Key header, validated exactly as the contract says: valid
 * UTF-8, outer ASCII spaces (U+0020 only) trimmed, 1 to 255 bytes, no Unicode
 * control characters, sent once.
 */
export function readIdempotencyKey(ctx: Context): string {
  const raw: string[] = [];
  const headers = ctx.req.rawHeaders;
  for (let i = 0; i < headers.length; i += 2) {
    if (headers[i]!.toLowerCase() === 'idempotency-key') raw.push(headers[i + 1]!);
  }
  if (raw.length === 0) {
    throw new OrlojError('idempotency_key_missing', 'The Idempotency-Key header is required for this request.');
  }
  const invalid = (why: string) =>
    new OrlojError('idempotency_key_invalid', `The Idempotency-Key header is invalid: ${why}.`, {
      fields: [{ field: 'Idempotency-Key', message: why }],
    });
  if (raw.length > 1) throw invalid('it must be sent once');
  let key: string;
  try {
    // Node hands header values over as latin1; recover the bytes and decode them strictly.
    key = strictUtf8.decode(Buffer.from(raw[0]!, 'latin1'));
  } catch {
    throw invalid('it must be valid UTF-8');
  }
  key = key.replace(/^ +| +$/g, '');
  const bytes = Buffer.byteLength(key, 'utf8');
  if (bytes < 1 || bytes > MAX_KEY_BYTES) throw invalid(`it must be 1 to ${MAX_KEY_BYTES} bytes after trimming spaces`);
  if (/\p{Cc}/u.test(key)) throw invalid('it must not contain control characters');
  return key;
}

export interface IdempotentResponse {
  status: number;
  /** JSON-serialisable body, or undefined for no body. */
  body?: unknown;
}

/**
 * Runs `change` at most once per (user, Idempotency-Key): the key is claimed in
 * the same transaction as the change and stores its response, so a retry gets
 * the original status and byte-identical body; the same key on a different
 * request (method, path or body) is 409. A change that throws rolls back its
 * claim too, so a failed request can be retried with the same key.
 */
export class IdempotencyGuard {
  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
  ) {}

  async run(
    ctx: Context,
    userId: string,
    key: string,
    request: { scope: string; body: unknown },
    change: (tx: Store) => Promise<IdempotentResponse>,
  ): Promise<void> {
    const fingerprint = crypto
      .createHash('sha256')
      .update(`${request.scope}\n${canonicalJson(request.body ?? null)}`)
      .digest('base64url');
    const outcome = await this.store.transaction(async (tx) => {
      const claim = await tx.idempotency.claim(userId, key, fingerprint, this.clock.now(), IDEMPOTENCY_TTL_MS);
      if (claim.outcome === 'conflict') {
        throw new OrlojError('idempotency_key_reused', 'This Idempotency-Key was already used for a different request.');
      }
      if (claim.outcome === 'replay') return { status: claim.status, text: claim.body, replayed: true };
      const response = await change(tx);
      const text = response.body === undefined ? null : JSON.stringify(response.body);
      await tx.idempotency.complete(userId, key, response.status, text);
      return { status: response.status, text, replayed: false };
    });
    ctx.status = outcome.status;
    if (outcome.replayed) ctx.set('Idempotent-Replayed', 'true');
    if (outcome.text !== null) {
      ctx.type = 'application/json';
      ctx.body = outcome.text;
    }
  }
}
