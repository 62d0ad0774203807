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

/** A cursor's position and the list it names, before it is checked against a list. */
export interface ParsedCursor extends KeysetPosition {
  list: string;
}

function invalidCursor(): OrlojError {
  return new OrlojError('validation_failed', 'The cursor is not valid for this list.', {
    fields: [{ field: 'cursor', message: 'must be a cursor returned by this list' }],
  });
}

/**
 * Reads a cursor without knowing its list yet (for a query that learns the
 * list as it runs); undefined for the empty cursor, 400 for anything malformed.
 * Check it with `checkCursorList` before answering.
 */
export function parseCursor(cursor: string | undefined): ParsedCursor | undefined {
  if (cursor === undefined || cursor === '') return undefined;
  if (!/^[A-Za-z0-9_-]{1,512}$/.test(cursor)) throw invalidCursor();
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    throw invalidCursor();
  }
  if (typeof parsed !== 'object' || parsed === null) throw invalidCursor();
  const { l, k, i } = parsed as Record<string, unknown>;
  if (typeof l !== 'string' || typeof k !== 'number' || !Number.isSafeInteger(k) || k < 0 || !isUuid(i)) throw invalidCursor();
  return { list: l, k, id: i };
}

/** 400 unless the parsed cursor belongs to `list`. */
export function checkCursorList(list: string, cursor: ParsedCursor | undefined): void {
  if (cursor && cursor.list !== list) throw invalidCursor();
}

/** Returns undefined for the empty cursor (first page); throws 400 for anything malformed or foreign. */
export function decodeCursor(list: string, cursor: string | undefined): KeysetPosition | undefined {
  const parsed = parseCursor(cursor);
  if (!parsed) return undefined;
  checkCursorList(list, parsed);
  return { k: parsed.k, id: parsed.id };
}
