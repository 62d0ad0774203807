import getRawBody from 'raw-body';
import type { Context } from 'koa';
import type { Readable } from 'node:stream';
import { OrlojError, validationError } from '@orloj/common/core';
import { exceedsJsonValues, tooManyJsonValues } from '@orloj/common/domain';

export const MAX_BODY_BYTES = 4 * 1024 * 1024;
/** How much of a refused body is read and dropped before the answer (issue 30): bytes, and time. */
export const LINGER_MAX_BYTES = 64 * 1024 * 1024;
export const LINGER_MAX_MS = 10_000;

/**
 * Reads and drops what is left of a request body, until it ends, `maxBytes`
 * more have come, or `maxMs` have passed: nothing is kept, so memory does
 * not grow whatever the client sends.
 */
export function discardRest(req: Readable, maxBytes: number, maxMs: number): Promise<void> {
  if (req.readableEnded || req.destroyed) return Promise.resolve();
  return new Promise((resolve) => {
    let seen = 0;
    const done = () => {
      clearTimeout(timer);
      req.off('data', onData);
      req.off('end', done);
      req.off('error', done);
      req.off('close', done);
      req.pause();
      resolve();
    };
    const onData = (chunk: Buffer) => {
      seen += chunk.length;
      if (seen >= maxBytes) done();
    };
    const timer = setTimeout(done, maxMs);
    req.on('data', onData);
    req.once('end', done);
    req.once('error', done);
    req.once('close', done);
    req.resume();
  });
}

/**
 * Reads a JSON request body. Bodies over 4 MiB are refused before any parsing:
 * from Content-Length up front, or while streaming when it is absent.
 * Bodies of more than MAX_JSON_VALUES values are refused before parsing too.
 * Returns undefined for an empty body.
 */
export async function readJsonBody(ctx: Context): Promise<unknown> {
  const declared = ctx.request.length;
  const tooLarge = async () => {
    // Lingering close (as nginx's): a client that sends its whole body before reading (fetch,
    // without Expect: 100-continue) gets a reset, not the answer, if the connection closes
    // while its bytes are still arriving. So the rest is read and dropped first, within bounds.
    await discardRest(ctx.req, LINGER_MAX_BYTES, LINGER_MAX_MS);
    // Closing the connection stops a client whose body went past the bounds.
    ctx.set('Connection', 'close');
    return new OrlojError('body_too_large', 'The request body exceeds the 4 MiB limit.');
  };
  if (declared !== undefined && declared > MAX_BODY_BYTES) throw await tooLarge();
  let bytes: Buffer;
  try {
    bytes = await getRawBody(ctx.req, { length: declared, limit: MAX_BODY_BYTES });
  } catch (err) {
    if ((err as { type?: string }).type === 'entity.too.large') throw await tooLarge();
    throw new OrlojError('malformed_json', 'The request body could not be read.');
  }
  let text: string;
  try {
    // Fatal: invalid UTF-8 would otherwise be stored as U+FFFD. A BOM stays (and JSON refuses it, as before).
    text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes);
  } catch {
    throw new OrlojError('malformed_json', 'The request body is not valid UTF-8.');
  }
  if (text.trim() === '') return undefined;
  if (!ctx.is('application/json', '+json')) {
    throw new OrlojError('unsupported_media_type', 'The request body must be JSON sent with Content-Type: application/json.');
  }
  // Counted before parsing: 300,000 unknown keys would otherwise cost a parse and a validation error each (issue 29).
  if (exceedsJsonValues(text)) throw validationError([tooManyJsonValues('body')], 'The request body holds too many JSON values.');
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new OrlojError('malformed_json', 'The request body is not valid JSON.');
  }
}
