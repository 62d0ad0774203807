// In core because two concerns need the same bytes: the envelope signs them and the api's
// idempotency fingerprints them (a retried request must match however its JSON was written).
import { OrlojError } from './errors.js';

/**
 * JSON with object keys sorted at every level, so a signature survives any
 * re-serialization on the way. Throws for anything JSON cannot carry.
 */
export function canonicalJson(value: unknown): string {
  return canonical(value, new Set());
}

function canonical(value: unknown, ancestors: Set<object>): string {
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return JSON.stringify(value);
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw misuse(`${value} cannot be signed`);
    return JSON.stringify(value);
  }
  if (typeof value !== 'object') throw misuse(`a ${typeof value} cannot be signed`);
  if (ancestors.has(value)) throw misuse('a circular structure cannot be signed');
  ancestors.add(value);
  let out: string;
  if (Array.isArray(value)) {
    // A column of plain values (a log batch's messages and timestamps) is
    // already canonical as JSON.stringify writes it: one native call.
    out = value.every(isCanonicalScalar) ? JSON.stringify(value) : `[${value.map((item) => canonical(item, ancestors)).join(',')}]`;
  } else {
    if (!isPlainObject(value)) throw misuse('only plain objects can be signed');
    const entries = Object.keys(value)
      .filter((k) => value[k] !== undefined)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical(value[k], ancestors)}`);
    out = `{${entries.join(',')}}`;
  }
  ancestors.delete(value);
  return out;
}

/** A value JSON.stringify writes exactly as canonical() does. */
function isCanonicalScalar(value: unknown): boolean {
  return value === null || typeof value === 'string' || typeof value === 'boolean' || (typeof value === 'number' && Number.isFinite(value));
}

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const proto: unknown = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

function misuse(message: string): OrlojError {
  return new OrlojError('internal_error', message, { kind: 'unexpected' });
}
