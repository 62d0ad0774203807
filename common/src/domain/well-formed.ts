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
export const MAX_REPORTED_FIELDS = 20;

/**
 * The most values (objects, arrays, members, items, scalars) a request body or
 * a workflow payload may hold. The largest valid ones hold a few hundred (a
 * payload's 256 `env` entries and 256 `cmd` items, 1,000 notification ids);
 * bounding the count before parsing bounds everything after it — JSON.parse,
 * the walks below and the schema validator, which reports one error per
 * unknown key — to linear work on a small tree.
 */
export const MAX_JSON_VALUES = 10_000;

/**
 * Whether JSON text holds more than `max` values, counted without parsing:
 * one, plus one per comma and per opening bracket outside strings (an upper
 * bound on the values JSON.parse would build from valid text). One pass over
 * the characters, ending at the first value past `max`; 300,000 unknown keys
 * (3.5 MB) are refused in milliseconds instead of being parsed, validated and
 * reported one by one (issue 29).
 */
export function exceedsJsonValues(text: string, max = MAX_JSON_VALUES): boolean {
  let count = 1;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++; // a backslash escapes the next character (a quote included)
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) {
      inString = true;
    } else if ((c === 0x2c || c === 0x5b || c === 0x7b) && ++count > max) {
      return true;
    }
  }
  return false;
}

/** The 400 field error for text over MAX_JSON_VALUES. */
export function tooManyJsonValues(field: string): FieldError {
  return { field, message: `must hold at most ${MAX_JSON_VALUES} JSON values` };
}

const ILL_FORMED = 'must be well-formed Unicode (no lone surrogate such as \\udfff)';
const HOLDS_NUL = 'must not contain NUL (U+0000) characters';

/** Why a string cannot be stored as it is, if it cannot: a lone surrogate, or U+0000 (no PostgreSQL text column holds it). */
function textProblem(text: string): string | undefined {
  if (!isWellFormedText(text)) return ILL_FORMED;
  if (text.includes('\u0000')) return HOLDS_NUL;
  return undefined;
}

/**
 * The fields (dotted paths below `prefix`, `[i]` for array items) whose
 * string value or member name cannot be stored as it is — ill-formed
 * Unicode, or holding U+0000 — as 400 field errors, in document order, at
 * most MAX_REPORTED_FIELDS. Iterative: a body may nest deeper than the call stack.
 */
export function illFormedFields(value: unknown, prefix = ''): FieldError[] {
  const fields: FieldError[] = [];
  const stack: [unknown, string][] = [[value, prefix]];
  while (stack.length > 0 && fields.length < MAX_REPORTED_FIELDS) {
    const [v, path] = stack.pop()!;
    if (typeof v === 'string') {
      const problem = textProblem(v);
      if (problem) fields.push({ field: path || 'body', message: problem });
    } else if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) stack.push([v[i], `${path}[${i}]`]);
    } else if (v !== null && typeof v === 'object') {
      const entries = Object.entries(v);
      for (let i = entries.length - 1; i >= 0; i--) {
        const [k, item] = entries[i]!;
        const child = path ? `${path}.${k}` : k;
        stack.push([item, child]);
        if (textProblem(k)) stack.push([k, child]); // a name is reported like a value, before it
      }
    }
  }
  return fields;
}
