import type { FieldError } from '../errors.js';

/** A lone (unpaired) surrogate: in `u` mode a paired one is a single code point, not Cs. */
const LONE_SURROGATE = /\p{Cs}/u;

/**
 * Whether a string is well-formed Unicode. JSON's `\udfff` escapes can make
 * strings no UTF-8 encoder can write: storing one silently turns it into
 * U+FFFD, so such input is refused instead.
 */
export function isWellFormedText(text: string): boolean {
  return !LONE_SURROGATE.test(text);
}

/**
 * The fields (dotted paths below `prefix`, `[i]` for array items) whose
 * string value or member name is ill-formed, as 400 field errors.
 */
export function illFormedFields(value: unknown, prefix = ''): FieldError[] {
  const fields: FieldError[] = [];
  const walk = (v: unknown, path: string): void => {
    if (typeof v === 'string') {
      if (!isWellFormedText(v)) fields.push({ field: path || 'body', message: 'must be well-formed Unicode (no lone surrogate such as \\udfff)' });
    } else if (Array.isArray(v)) {
      v.forEach((item, i) => walk(item, `${path}[${i}]`));
    } else if (v !== null && typeof v === 'object') {
      for (const [k, item] of Object.entries(v)) {
        const child = path ? `${path}.${k}` : k;
        if (!isWellFormedText(k)) fields.push({ field: child, message: 'must have a well-formed Unicode name (no lone surrogate)' });
        walk(item, child);
      }
    }
  };
  walk(value, prefix);
  return fields;
}
