import type { FieldError } from '../core/errors.js';

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

/** At most this many fields are reported: the answer stays small whatever the body holds. */
const MAX_REPORTED = 20;

/**
 * The fields (dotted paths below `prefix`, `[i]` for array items) whose
 * string value or member name is ill-formed, as 400 field errors, in
 * document order. Iterative: a body may nest deeper than the call stack.
 */
export function illFormedFields(value: unknown, prefix = ''): FieldError[] {
  const fields: FieldError[] = [];
  const stack: [unknown, string][] = [[value, prefix]];
  while (stack.length > 0 && fields.length < MAX_REPORTED) {
    const [v, path] = stack.pop()!;
    if (typeof v === 'string') {
      if (!isWellFormedText(v)) fields.push({ field: path || 'body', message: 'must be well-formed Unicode (no lone surrogate such as \\udfff)' });
    } else if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) stack.push([v[i], `${path}[${i}]`]);
    } else if (v !== null && typeof v === 'object') {
      const entries = Object.entries(v);
      for (let i = entries.length - 1; i >= 0; i--) {
        const [k, item] = entries[i]!;
        const child = path ? `${path}.${k}` : k;
        stack.push([item, child]);
        if (!isWellFormedText(k)) stack.push([k, child]); // a name is reported like a value, before it
      }
    }
  }
  return fields;
}
