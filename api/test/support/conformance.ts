import assert from 'node:assert/strict';
import fs from 'node:fs';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { openApiDocument } from '@orloj/api';
import type { HttpResponse } from './client.js';

/**
 * Checks real HTTP responses against the published OpenAPI document: the
 * status is listed for the operation, the Content-Type is one it lists, the
 * body validates against its schema (JSON Schema 2020-12, components
 * resolvable) and every required response header is present.
 */
export const DOC_ID = 'urn:orloj:openapi';
export const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'] as const;

type JsonObject = Record<string, any>;

/** A plain JSON copy of the document (what GET /openapi.json serves). */
export const doc: JsonObject = JSON.parse(JSON.stringify(openApiDocument)) as JsonObject;

export function newAjv(): Ajv2020 {
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  (addFormats as unknown as (a: Ajv2020) => void)(ajv);
  // Used by the official OpenAPI 3.1 schema; not a JSON Schema format.
  ajv.addFormat('media-range', true);
  return ajv;
}

const ajv = newAjv();
ajv.addSchema({ ...doc, $id: DOC_ID });

/** A JSON pointer into the document, as a URI fragment. */
export function pointer(...segments: string[]): string {
  return `${DOC_ID}#/${segments.map((s) => encodeURIComponent(s.replace(/~/g, '~0').replace(/\//g, '~1'))).join('/')}`;
}

const compiled = new Map<string, ValidateFunction>();
/** Compiles the schema found at the given document pointer (refs resolve against the document). */
export function schemaAt(...segments: string[]): ValidateFunction {
  const id = pointer(...segments);
  let v = compiled.get(id);
  if (!v) {
    v = ajv.getSchema(id);
    if (!v) throw new Error(`no schema at ${id}`);
    compiled.set(id, v);
  }
  return v;
}

/** Each documented operation: path template, lower-case method, operation object. */
export function operations(): { template: string; method: string; op: JsonObject }[] {
  const out: { template: string; method: string; op: JsonObject }[] = [];
  for (const [template, item] of Object.entries(doc.paths as JsonObject)) {
    for (const method of METHODS) {
      const op = (item as JsonObject)[method] as JsonObject | undefined;
      if (op) out.push({ template, method, op });
    }
  }
  return out;
}

/** Fills every `{param}` of a template. */
export function fill(template: string, values: Record<string, string> = {}, fallback = '00000000-0000-4000-8000-000000000000'): string {
  return template.replace(/\{([^}]+)\}/g, (_, name: string) => encodeURIComponent(values[name] ?? fallback));
}

function errorsText(v: ValidateFunction): string {
  return JSON.stringify(v.errors, null, 1);
}

function headerValue(res: HttpResponse, name: string): string | undefined {
  const v = res.headers[name.toLowerCase()];
  return Array.isArray(v) ? v.join(', ') : v;
}

export class Conformance {
  /** `METHOD template status` of every checked response. */
  readonly seen = new Set<string>();

  /** Asserts that a real response is one the document describes for this operation. */
  expectConforms(method: string, template: string, res: HttpResponse): void {
    const m = method.toLowerCase();
    const where = `${method.toUpperCase()} ${template} → ${res.status}`;
    const op = (doc.paths as JsonObject)[template]?.[m] as JsonObject | undefined;
    assert.ok(op, `${method.toUpperCase()} ${template} is not in the OpenAPI document`);
    const status = String(res.status);
    const response = (op.responses[status] ?? op.responses.default) as JsonObject | undefined;
    assert.ok(
      response,
      `${where} is not documented (documented: ${Object.keys(op.responses).join(', ')}); body: ${res.text.slice(0, 500)}`,
    );
    for (const [name, header] of Object.entries((response.headers ?? {}) as JsonObject)) {
      const value = headerValue(res, name);
      if (header.required) assert.ok(value !== undefined, `${where}: documented header ${name} is missing`);
      if (value === undefined || !header.schema) continue;
      const schema = header.schema as JsonObject;
      const typed = schema.type === 'integer' && /^-?\d+$/.test(value) ? Number(value) : value;
      const v = schemaAt('paths', template, m, 'responses', op.responses[status] ? status : 'default', 'headers', name, 'schema');
      assert.ok(v(typed), `${where}: header ${name}: ${value} does not match its schema: ${errorsText(v)}`);
    }
    const content = response.content as JsonObject | undefined;
    if (!content) {
      assert.equal(res.text, '', `${where}: the document lists no body, but one was sent`);
    } else {
      const type = String(headerValue(res, 'content-type') ?? '')
        .split(';')[0]!
        .trim()
        .toLowerCase();
      assert.ok(type in content, `${where}: Content-Type ${type || '(none)'} is not one of ${Object.keys(content).join(', ')}`);
      if (content[type].schema) {
        let body: unknown;
        try {
          body = JSON.parse(res.text);
        } catch {
          assert.fail(`${where}: the ${type} body is not JSON: ${res.text.slice(0, 200)}`);
        }
        const v = schemaAt('paths', template, m, 'responses', op.responses[status] ? status : 'default', 'content', type, 'schema');
        assert.ok(v(body), `${where}: body does not match the documented schema: ${errorsText(v)}\nbody: ${res.text.slice(0, 1000)}`);
      }
    }
    this.seen.add(`${method.toUpperCase()} ${template} ${status}`);
  }

  /** Asserts that a request body the server accepted is valid for the documented request schema. */
  expectRequestConforms(method: string, template: string, body: unknown): void {
    const m = method.toLowerCase();
    const op = (doc.paths as JsonObject)[template]?.[m] as JsonObject | undefined;
    assert.ok(op?.requestBody, `${method.toUpperCase()} ${template} documents no request body`);
    const v = schemaAt('paths', template, m, 'requestBody', 'content', 'application/json', 'schema');
    assert.ok(v(body), `${method.toUpperCase()} ${template}: an accepted request body is invalid per the document: ${errorsText(v)}`);
  }

  /** Documented `METHOD template status` triples never checked against a real response. */
  unexercised(): string[] {
    const missing: string[] = [];
    for (const { template, method, op } of operations()) {
      for (const status of Object.keys(op.responses as JsonObject)) {
        const k = `${method.toUpperCase()} ${template} ${status}`;
        if (!this.seen.has(k)) missing.push(k);
      }
    }
    return missing;
  }
}

/** The official OpenAPI 3.1 document schema (vendored from spec.openapis.org, 2022-10-07). */
export function openApi31Validator(): ValidateFunction {
  const text = fs.readFileSync(new URL('./openapi-3.1.schema.json', import.meta.url), 'utf8');
  // Ajv mis-evaluates `$dynamicRef: #meta` together with unevaluatedProperties; with
  // the default dialect it names the same schema as a plain $ref, so use that.
  const schema = JSON.parse(text.replaceAll('"$dynamicRef": "#meta"', '"$ref": "#/$defs/schema"')) as JsonObject;
  return newAjv().compile(schema);
}
