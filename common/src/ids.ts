import { v7 as uuidv7, validate, version } from 'uuid';

/** Time-ordered identifiers (UUIDv7): newer rows sort after older ones. */
export function newId(): string {
  return uuidv7();
}

const UUID_SHAPE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** Canonical lower-case UUID of any version; the store only ever sees these. */
export function isUuid(value: unknown): value is string {
  return typeof value === 'string' && UUID_SHAPE.test(value) && validate(value) && version(value) >= 0;
}
