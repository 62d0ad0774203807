import type { Ajv } from 'ajv';
import addFormats from 'ajv-formats';
import { OrlojError, validationError, type FieldError } from '@orloj/common/core';
import { illFormedFields, SchemaValidators } from '@orloj/common/domain';

const schemas = new SchemaValidators((ajv) => (addFormats as unknown as (a: Ajv) => void)(ajv));

/** Compiles a JSON schema into a function that returns the typed value or throws a 400 naming each field. */
export function bodyValidator<T>(schema: object): (body: unknown) => T {
  const validate = schemas.compile(schema);
  return (body) => {
    if (body === undefined) throw validationError([{ field: 'body', message: 'is required' }], 'A JSON body is required.');
    if (typeof body !== 'object' || body === null || Array.isArray(body)) {
      throw validationError([{ field: 'body', message: 'must be a JSON object' }]);
    }
    // Before the schema: a lone surrogate would otherwise be stored as U+FFFD, and no text column holds U+0000.
    const illFormed = illFormedFields(body);
    if (illFormed.length) throw validationError(illFormed);
    const errors = validate(body);
    if (errors.length) throw validationError(errors);
    return body as T;
  };
}

/** A declared integer query parameter (contract/operation.ts): its bounds are read from its schema. */
export interface IntegerParameter {
  readonly name: string;
  readonly schema: { readonly minimum: number; readonly maximum: number; readonly default?: number };
}

/** A declared text query parameter: its longest value is read from its schema. */
export interface TextParameter {
  readonly name: string;
  readonly schema: { readonly maxLength: number };
}

/**
 * Query-string parsing with exact rules: every parameter at most once,
 * booleans only `true`/`false`, integers only digits. Unknown parameters are
 * ignored (cache busters are common); known ones are strict.
 */
export class QueryReader {
  private readonly errors: FieldError[] = [];
  constructor(private readonly query: Record<string, string | string[] | undefined>) {}

  private one(name: string): string | undefined {
    const v = this.query[name];
    if (Array.isArray(v)) {
      this.errors.push({ field: name, message: 'must be given at most once' });
      return undefined;
    }
    return v;
  }

  string(name: string, maxLength = 1024): string | undefined {
    const v = this.one(name);
    if (v !== undefined && v.length > maxLength) {
      this.errors.push({ field: name, message: `must be at most ${maxLength} characters` });
      return undefined;
    }
    if (v?.includes('\u0000')) {
      this.errors.push({ field: name, message: 'must not contain NUL (U+0000) characters' });
      return undefined;
    }
    return v;
  }

  /** A text parameter at most as long as its declaration's `maxLength`. */
  text(p: TextParameter): string | undefined {
    return this.string(p.name, p.schema.maxLength);
  }

  enumOf<T extends string>(name: string, allowed: readonly T[]): T | undefined {
    const v = this.one(name);
    if (v === undefined) return undefined;
    if (!(allowed as readonly string[]).includes(v)) {
      this.errors.push({ field: name, message: `must be one of ${allowed.join(', ')}` });
      return undefined;
    }
    return v as T;
  }

  int(name: string, min: number, max: number): number | undefined {
    const v = this.one(name);
    if (v === undefined) return undefined;
    if (!/^\d{1,10}$/.test(v) || Number(v) < min || Number(v) > max) {
      this.errors.push({ field: name, message: `must be an integer from ${min} to ${max}` });
      return undefined;
    }
    return Number(v);
  }

  /** An integer parameter bounded as its declaration says (minimum, maximum, and the default when absent). */
  integer<P extends IntegerParameter>(p: P): P['schema'] extends { default: number } ? number : number | undefined {
    return (this.int(p.name, p.schema.minimum, p.schema.maximum) ?? p.schema.default) as P['schema'] extends { default: number } ? number : number | undefined;
  }

  bool(name: string): boolean | undefined {
    const v = this.one(name);
    if (v === undefined) return undefined;
    if (v !== 'true' && v !== 'false') {
      this.errors.push({ field: name, message: 'must be true or false' });
      return undefined;
    }
    return v === 'true';
  }

  fail(field: string, message: string): void {
    this.errors.push({ field, message });
  }

  /** Throws a 400 listing every bad parameter, if any. */
  done(): void {
    if (this.errors.length) {
      const named = this.errors.map((e) => `${e.field} ${e.message}`).join('; ');
      throw validationError(this.errors, `The query string is invalid: ${named}.`);
    }
  }
}

export function requireUuidParam(name: string, value: string | undefined, isUuid: (v: unknown) => boolean): string {
  if (!isUuid(value)) {
    throw new OrlojError('validation_failed', `The path parameter ${name} must be a UUID.`, {
      fields: [{ field: name, message: 'must be a UUID' }],
    });
  }
  return value as string;
}

/** Several UUID path parameters at once; the 400 names every one that is not a UUID. */
export function requireUuidParams<K extends string>(
  values: Record<K, string | undefined>,
  isUuid: (v: unknown) => boolean,
): Record<K, string> {
  const bad = (Object.keys(values) as K[]).filter((name) => !isUuid(values[name]));
  if (bad.length) {
    throw new OrlojError('validation_failed', `The path parameter${bad.length > 1 ? 's' : ''} ${bad.join(' and ')} must be a UUID.`, {
      fields: bad.map((field) => ({ field, message: 'must be a UUID' })),
    });
  }
  return values as Record<K, string>;
}
