import type { FieldError } from '../core/errors.js';
import { parseDuration } from '../core/duration.js';
import type { ContainerPayload, HeartbeatPayload, WorkflowKind } from './workflow.js';
import { exceedsJsonValues, illFormedFields, tooManyJsonValues } from './well-formed.js';
import { SchemaValidators } from './schema-check.js';

/**
 * Validation of the kind-specific payload (a JSON object inside the `payload`
 * string). Returns the parsed, defaulted payload or the list of failing fields,
 * each prefixed with `payload.`.
 */
/** A payload's `timeout`: what it gets when it names none, and the most it may name. */
export const JOB_TIMEOUTS = {
  /** HEARTBEAT: 10 s when unnamed, at most 5 min. */
  heartbeatTimeoutMs: 10_000,
  heartbeatTimeoutMaxMs: 5 * 60_000,
  /** CONTAINER: 30 s when unnamed; at most 1 h in any installation (CONTAINER_MAX_TIMEOUT's ceiling). */
  containerTimeoutMs: 30_000,
  containerTimeoutMaxMs: 60 * 60_000,
} as const;

const { heartbeatTimeoutMs, heartbeatTimeoutMaxMs, containerTimeoutMs, containerTimeoutMaxMs } = JOB_TIMEOUTS;

const headerName = '^[!#$%&\'*+.^_`|~0-9A-Za-z-]{1,256}$';
// Reference grammar of the distribution spec: [registry[:port]/]path[:tag][@digest]
const IMAGE_REFERENCE =
  /^(?:(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*(?::[0-9]+)?\/)?[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:\/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*(?::[\w][\w.-]{0,127})?(?:@sha256:[a-f0-9]{64})?$/;

export const heartbeatPayloadSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['endpoint'],
  properties: {
    endpoint: { type: 'string', minLength: 1 },
    method: { enum: ['GET', 'HEAD', 'POST'] },
    expected_status_code: { type: 'integer', minimum: 100, maximum: 599 },
    headers: {
      type: 'object',
      propertyNames: { pattern: headerName },
      additionalProperties: { type: 'string', maxLength: 8192 },
      maxProperties: 64,
    },
    timeout: { type: 'string' },
    body: { type: 'string', maxLength: 65536 },
    body_contains: { type: 'string', minLength: 1, maxLength: 4096 },
  },
} as const;

export const containerPayloadSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['image'],
  properties: {
    image: { type: 'string', minLength: 1, maxLength: 512 },
    cmd: { type: 'array', items: { type: 'string', maxLength: 65536 }, maxItems: 256 },
    env: {
      type: 'object',
      propertyNames: { pattern: '^[A-Za-z_][A-Za-z0-9_]{0,255}$' },
      additionalProperties: { type: 'string', maxLength: 65536 },
      maxProperties: 256,
    },
    timeout: { type: 'string' },
    memory_mb: { type: 'integer', minimum: 6, maximum: 65536 },
    cpus: { type: 'number', exclusiveMinimum: 0, maximum: 64 },
    network: { enum: ['none', 'bridge'] },
  },
} as const;

const schemas = new SchemaValidators();
const validateHeartbeat = schemas.compile(heartbeatPayloadSchema, 'payload.');
const validateContainer = schemas.compile(containerPayloadSchema, 'payload.');

export type ParsedPayload =
  | { kind: 'HEARTBEAT'; payload: HeartbeatPayload }
  | { kind: 'CONTAINER'; payload: ContainerPayload };

export type PayloadResult = { ok: true; value: ParsedPayload } | { ok: false; errors: FieldError[] };

function durationField(value: unknown, field: string, fallbackMs: number, maxMs: number, errors: FieldError[]): number {
  if (value === undefined) return fallbackMs;
  const ms = parseDuration(value as string);
  if (ms === undefined) {
    errors.push({ field, message: 'must be a positive duration such as "10s" or "1m30s"' });
    return fallbackMs;
  }
  if (ms > maxMs) errors.push({ field, message: `must be at most ${maxMs / 1000}s` });
  return ms;
}

function checkEndpoint(endpoint: string, errors: FieldError[]): void {
  if (Buffer.byteLength(endpoint, 'utf8') > 2048) {
    errors.push({ field: 'payload.endpoint', message: 'must be at most 2048 bytes' });
    return;
  }
  let url: URL;
  try {
    url = new URL(endpoint);
  } catch {
    errors.push({ field: 'payload.endpoint', message: 'must be an absolute http or https URL' });
    return;
  }
  if ((url.protocol !== 'http:' && url.protocol !== 'https:') || url.hostname === '') {
    errors.push({ field: 'payload.endpoint', message: 'must be an absolute http or https URL' });
  } else if (url.username || url.password) {
    errors.push({ field: 'payload.endpoint', message: 'must not contain credentials; use headers instead' });
  }
}

const flagged = (errors: readonly FieldError[], field: string): boolean => errors.some((e) => e.field === field);

/** Parses and validates a payload string for the given kind. */
export function parsePayload(kind: WorkflowKind, text: string): PayloadResult {
  // Before parsing: the count bounds the parse, the walks and the schema's errors (well-formed.ts).
  if (exceedsJsonValues(text)) return { ok: false, errors: [tooManyJsonValues('payload')] };
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return { ok: false, errors: [{ field: 'payload', message: 'must be a string holding a JSON object' }] };
  }
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    return { ok: false, errors: [{ field: 'payload', message: 'must be a string holding a JSON object' }] };
  }
  // The payload's own JSON may spell lone surrogates as escapes (they would reach targets as U+FFFD), and NUL as `\u0000` (no text column stores it).
  const illFormed = illFormedFields(raw, 'payload');
  if (illFormed.length) return { ok: false, errors: illFormed };
  const errors: FieldError[] = [];
  if (kind === 'HEARTBEAT') {
    // Schema errors do not stop the checks below on the fields the schema let through: every mistake is reported at once.
    errors.push(...validateHeartbeat(raw));
    const schemaOk = errors.length === 0;
    const p = raw as Record<string, unknown> & { endpoint: string };
    if (typeof p.endpoint === 'string' && !flagged(errors, 'payload.endpoint')) checkEndpoint(p.endpoint, errors);
    const method = (p.method as HeartbeatPayload['method'] | undefined) ?? 'GET';
    if (schemaOk && p.body !== undefined && method !== 'POST') {
      errors.push({ field: 'payload.body', message: 'is only allowed with method POST' });
    }
    if (schemaOk && p.body_contains !== undefined && method === 'HEAD') {
      errors.push({ field: 'payload.body_contains', message: 'cannot be checked with method HEAD' });
    }
    const timeout = flagged(errors, 'payload.timeout') ? 0 : durationField(p.timeout, 'payload.timeout', heartbeatTimeoutMs, heartbeatTimeoutMaxMs, errors);
    if (errors.length) return { ok: false, errors };
    const payload: HeartbeatPayload = {
      endpoint: p.endpoint,
      method,
      expected_status_code: (p.expected_status_code as number | undefined) ?? 200,
      headers: (p.headers as Record<string, string> | undefined) ?? {},
      timeout,
    };
    if (typeof p.body === 'string') payload.body = p.body;
    if (typeof p.body_contains === 'string') payload.body_contains = p.body_contains;
    return { ok: true, value: { kind, payload } };
  }
  errors.push(...validateContainer(raw));
  const p = raw as Record<string, unknown> & { image: string };
  if (typeof p.image === 'string' && !flagged(errors, 'payload.image') && !IMAGE_REFERENCE.test(p.image)) {
    errors.push({ field: 'payload.image', message: 'must be a valid image reference such as "alpine:3.20"' });
  }
  const timeout = flagged(errors, 'payload.timeout') ? 0 : durationField(p.timeout, 'payload.timeout', containerTimeoutMs, containerTimeoutMaxMs, errors);
  if (errors.length) return { ok: false, errors };
  const payload: ContainerPayload = {
    image: p.image,
    env: (p.env as Record<string, string> | undefined) ?? {},
    timeout,
    network: (p.network as ContainerPayload['network'] | undefined) ?? 'none',
  };
  if (Array.isArray(p.cmd)) payload.cmd = p.cmd as string[];
  if (typeof p.memory_mb === 'number') payload.memory_mb = p.memory_mb;
  if (typeof p.cpus === 'number') payload.cpus = p.cpus;
  return { ok: true, value: { kind, payload } };
}
