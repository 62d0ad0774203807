import { problemSchema } from './responses.js';
import { ref } from './components.js';
import { MAX_KEY_BYTES } from '../http/idempotency.js';
import type { Parameter, ResponseObject } from './operation.js';

/** Parameters, headers and responses that several resources' operations share. */
export const problem = (description: string): ResponseObject => ({ description, content: { 'application/problem+json': { schema: ref(problemSchema) } } });

export const rateLimited = {
  description: 'Rate limit exceeded (every route, checked before authentication).',
  headers: {
    'Retry-After': { description: 'Whole seconds until a request would be accepted.', required: true, schema: { type: 'integer', minimum: 1 } },
  },
  content: { 'application/problem+json': { schema: ref(problemSchema) } },
} as const;

export const setCookies = {
  'Set-Cookie': {
    description: 'The `session` and `csrf` cookies (HttpOnly, Path=/).',
    required: true,
    schema: { type: 'string' },
  },
} as const;

export const replayed = {
  'Idempotent-Replayed': {
    description: '`true` when this is the stored response of an earlier request with the same Idempotency-Key.',
    schema: { const: 'true' },
  },
} as const;

export const idempotencyKey: Parameter = {
  name: 'Idempotency-Key',
  in: 'header',
  required: true,
  description:
    `Valid UTF-8, 1 to ${MAX_KEY_BYTES} bytes after trimming outer ASCII spaces, no control characters. A retry with the same key and request replays the original response; the same key with a different request is 409. Keys are kept 24 hours.`,
  schema: { type: 'string', minLength: 1 },
};

export const cursorParam = {
  name: 'cursor',
  in: 'query',
  description: 'Opaque cursor from the previous page; empty or absent for the first page.',
  schema: { type: 'string', maxLength: 512 },
} as const;

/** The largest PostgreSQL integer, the column type of sequence numbers and intervals. */
export const INT32_MAX = 2_147_483_647;
