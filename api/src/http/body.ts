import getRawBody from 'raw-body';
import type { Context } from 'koa';
import { OrlojError, validationError } from '@orloj/common/core';
import { exceedsJsonValues, tooManyJsonValues } from '@orloj/common/domain';

export const MAX_BODY_BYTES = 4 * 1024 * 1024;

/**
 * Reads a JSON request body. Bodies over 4 MiB are refused before any parsing:
 * from Content-Length up front, or while streaming when it is absent.
 * Bodies of more than MAX_JSON_VALUES values are refused before parsing too.
 * Returns undefined for an empty body.
 */
export async function readJsonBody(ctx: Context): Promise<unknown> {
  const declared = ctx.request.length;
  const tooLarge = () => {
    // The rest of the body is never read; closing the connection stops the client sending it.
    ctx.set('Connection', 'close');
    return new OrlojError('body_too_large', 'The request body exceeds the 4 MiB limit.');
  };
  if (declared !== undefined && declared > MAX_BODY_BYTES) throw tooLarge();
  let bytes: Buffer;
  try {
    bytes = await getRawBody(ctx.req, { length: declared, limit: MAX_BODY_BYTES });
  } catch (err) {
    if ((err as { type?: string }).type === 'entity.too.large') throw tooLarge();
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
