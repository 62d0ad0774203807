import { isUuid } from './ids.js';
import { OrlojError } from './errors.js';

/**
 * Opaque keyset cursors: base64url (no padding) of a small JSON document that
 * names the list it belongs to, so a cursor from one list is refused by another.
 */
export interface KeysetPosition {
  /** Sort key: a millisecond timestamp or a sequence number. */
  k: number;
  /** Tie-breaker: the row id. */
  id: string;
}

export function encodeCursor(list: string, position: KeysetPosition): string {
  return Buffer.from(JSON.stringify({ l: list, k: position.k, i: position.id }), 'utf8').toString('base64url');
}

/** Returns undefined for the empty cursor (first page); throws 400 for anything malformed or foreign. */
export function decodeCursor(list: string, cursor: string | undefined): KeysetPosition | undefined {
  if (cursor === undefined || cursor === '') return undefined;
  const invalid = () =>
    new OrlojError('validation_failed', 'The cursor is not valid for this list.', {
      fields: [{ field: 'cursor', message: 'must be a cursor returned by this list' }],
    });
  if (!/^[A-Za-z0-9_-]{1,512}$/.test(cursor)) throw invalid();
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    throw invalid();
  }
  if (typeof parsed !== 'object' || parsed === null) throw invalid();
  const { l, k, i } = parsed as Record<string, unknown>;
  if (l !== list || typeof k !== 'number' || !Number.isSafeInteger(k) || k < 0 || !isUuid(i)) throw invalid();
  return { k, id: i };
}
