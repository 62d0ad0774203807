import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import type { FieldError } from '../core/errors.js';

/**
 * JSON schema validation with bounded work (issue 29). ajv reports every
 * error only with `allErrors`, and has no limit on how many it collects: a
 * body with 300,000 unknown keys made 300,000 errors. So each schema is
 * compiled twice: collecting every error (a form learns of all its mistakes
 * at once) for values small enough to be valid, and stopping at the first
 * error for anything larger, which no schema of orloj admits anyway.
 */

/**
 * Values (objects, arrays, members, items, scalars) beyond which every error
 * is no longer collected. The largest valid bodies and payloads hold fewer
 * than half of it: 1,000 notification ids; a payload's 256 `env` entries, 256
 * `cmd` items and 64 headers.
 */
export const FULL_REPORT_MAX_VALUES = 2_000;

/** Whether `value` holds more than `max` values; a walk that stops once it has seen that many. */
export function holdsMoreValuesThan(value: unknown, max: number): boolean {
  let seen = 0;
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const v = stack.pop();
    if (++seen > max) return true;
    if (v !== null && typeof v === 'object') for (const item of Object.values(v)) stack.push(item);
  }
  return false;
}

/**
 * Compiles schemas into validators returning their field errors (named below
 * a prefix), none when the value is valid. `extend` adds formats or keywords.
 */
export class SchemaValidators {
  private readonly everyError = new Ajv({ allErrors: true, strict: true });
  private readonly firstError = new Ajv({ strict: true });

  constructor(extend?: (ajv: Ajv) => void) {
    extend?.(this.everyError);
    extend?.(this.firstError);
  }

  /**
   * Each form is compiled on its first use: compiling every schema twice took
   * half a second of a start (issue 33), most of it for the first-error form
   * that only an oversized value needs. The schemas' own mistakes still show
   * at once, since the api suite sends every route a value.
   */
  compile(schema: object, prefix = ''): (value: unknown) => FieldError[] {
    let all: ValidateFunction | undefined;
    let first: ValidateFunction | undefined;
    return (value) => {
      const validate = holdsMoreValuesThan(value, FULL_REPORT_MAX_VALUES)
        ? (first ??= this.firstError.compile(schema))
        : (all ??= this.everyError.compile(schema));
      return validate(value) ? [] : ajvErrorsToFields(validate.errors, prefix);
    };
  }
}

const TYPE_WORDS: Record<string, string> = {
  integer: 'a whole number',
  number: 'a number',
  string: 'text',
  boolean: 'true or false',
  object: 'a JSON object',
  array: 'a list',
};

/** ajv's schema wording ("must NOT have fewer than 1 characters") said for people; undefined keeps ajv's own. */
function plainMessage(e: ErrorObject): string | undefined {
  const p = e.params as Record<string, unknown>;
  switch (e.keyword) {
    case 'minLength':
      return p.limit === 1 ? 'must not be empty' : `must be at least ${String(p.limit)} characters long`;
    case 'maxLength':
      return `must be at most ${String(p.limit)} characters long`;
    case 'pattern':
      return p.pattern === '\\S' ? 'must not be blank' : 'is not in the expected format';
    case 'minimum':
      return `must be at least ${String(p.limit)}`;
    case 'maximum':
      return `must be at most ${String(p.limit)}`;
    case 'type': {
      const types = String(p.type).split(',');
      return `must be ${types.map((t) => TYPE_WORDS[t] ?? t).join(' or ')}`;
    }
    case 'minItems':
      return p.limit === 1 ? 'must not be empty' : `must have at least ${String(p.limit)} items`;
    case 'maxItems':
      return `must have at most ${String(p.limit)} items`;
    default:
      return undefined;
  }
}

/**
 * ajv's errors as field errors, one per field (the first ajv found), in
 * ajv's order; linear in the errors.
 */
export function ajvErrorsToFields(errors: ErrorObject[] | null | undefined, prefix = ''): FieldError[] {
  const out: FieldError[] = [];
  const seen = new Set<string>();
  for (const e of errors ?? []) {
    // propertyNames reports the key's own failure too; the propertyNames error names the field once.
    if ((e as { propertyName?: string }).propertyName !== undefined) continue;
    let path = e.instancePath
      .split('/')
      .slice(1)
      .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'))
      .join('.');
    let message = e.message ?? 'is invalid';
    if (e.keyword === 'required') {
      const missing = (e.params as { missingProperty: string }).missingProperty;
      path = path ? `${path}.${missing}` : missing;
      message = 'is required';
    } else if (e.keyword === 'additionalProperties') {
      const extra = (e.params as { additionalProperty: string }).additionalProperty;
      path = path ? `${path}.${extra}` : extra;
      message = 'is not a known field';
    } else if (e.keyword === 'enum') {
      message = `must be one of ${(e.params as { allowedValues: unknown[] }).allowedValues.map(String).join(', ')}`;
    } else if (e.keyword === 'propertyNames') {
      message = 'has an invalid key';
    } else {
      message = plainMessage(e) ?? message;
    }
    const field = prefix + path || prefix.replace(/\.$/, '') || 'body';
    // One message per field, the first ajv found: a blank name is "must not be empty", not that and a pattern.
    if (!seen.has(field)) {
      seen.add(field);
      out.push({ field, message });
    }
  }
  return out;
}
