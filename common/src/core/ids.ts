import { v7 as uuidv7, validate, version } from 'uuid';

/** Time-ordered identifiers (UUIDv7): newer rows sort after older ones. */
export function newId(): string {
  return uuidv7();
}

const UUID_SHAPE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/**
 * What a request id may be: 1-128 characters of `A-Z a-z 0-9 . _ : @ / + = -`.
 * The api takes a trusted proxy's X-Request-Id only in this shape (else it
 * makes a UUID); envelopes (`req_id`) and jobs carry only such ids.
 */
export const REQUEST_ID_PATTERN = /^[A-Za-z0-9._:@/+=-]{1,128}$/;

export function isRequestId(value: unknown): value is string {
  return typeof value === 'string' && REQUEST_ID_PATTERN.test(value);
}

/** Canonical lower-case UUID of any version; the store only ever sees these. */
export function isUuid(value: unknown): value is string {
  return typeof value === 'string' && UUID_SHAPE.test(value) && validate(value) && version(value) >= 0;
}
