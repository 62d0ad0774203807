/**
 * The OpenAPI document's frame: what it says of the whole API, the responses
 * every operation of a kind gives, and the builder that describes each
 * operation the resource files declare (routes/*.routes.ts). The router is
 * mounted from the same declarations (app.ts), and api/test/openapi.test.ts
 * checks both ways that they match and that real responses conform.
 */
import type { Context } from 'koa';
import { components, json } from './contract/components.js';
import { pathParameters, type Operation } from './contract/operation.js';
import { problem, rateLimited } from './contract/shared.js';
import { uuid } from './contract/responses.js';
import { RESOURCE_OPERATIONS } from './routes/index.js';

/** Responses every operation of a kind gives; an operation's own of the same status replace them. */
function kindResponses(op: Operation): Record<string, object> {
  const readsInput = pathParameters(op.path).length > 0 || (op.parameters?.length ?? 0) > 0 || op.body !== undefined;
  const session = op.access === 'session';
  return {
    ...(readsInput ? { '400': problem('Invalid input; every offending field is listed in `errors`.') } : {}),
    ...(session ? { '401': problem('Missing, expired or revoked session.') } : {}),
    ...(session && op.method !== 'get' ? { '403': problem('Missing or invalid CSRF cookie, or a cross-site origin.') } : {}),
    ...(op.body ? { '413': problem('Body over 4 MiB.') } : {}),
    '429': rateLimited,
  };
}

function describe(op: Operation): object {
  return {
    summary: op.summary,
    ...(op.description !== undefined ? { description: op.description } : {}),
    ...(op.access === 'session' ? { security: [op.method === 'get' ? { session: [] } : { session: [], csrf: [] }] } : {}),
    ...(op.parameters?.length ? { parameters: op.parameters } : {}),
    ...(op.body ? { requestBody: { required: op.body.required, content: json(op.body.schema) } } : {}),
    responses: { ...kindResponses(op), ...op.responses },
  };
}

function paths(operations: readonly Operation[]): Record<string, Record<string, object>> {
  const out: Record<string, Record<string, object>> = {};
  for (const op of operations) {
    const names = pathParameters(op.path);
    out[op.path] ??= names.length ? { parameters: names.map((name) => ({ name, in: 'path', required: true, schema: uuid })) } : {};
    if (out[op.path]![op.method]) throw new Error(`${op.method.toUpperCase()} ${op.path} is declared twice`);
    out[op.path]![op.method] = describe(op);
  }
  return out;
}

const documentOperation: Operation = {
  method: 'get',
  path: '/openapi.json',
  summary: 'This document',
  access: 'public',
  responses: {
    '200': {
      description: 'OpenAPI 3.1 document.',
      content: json({ type: 'object', required: ['openapi', 'info', 'paths'], properties: { openapi: { const: '3.1.0' } } }),
    },
  },
  handler: (_deps: unknown, ctx: Context) => {
    ctx.set('Cache-Control', 'public, max-age=300');
    ctx.body = openApiDocument;
  },
};

/** Every operation the api serves, this document's own included. */
export const API_OPERATIONS: readonly Operation[] = [...RESOURCE_OPERATIONS, documentOperation];

/** The OpenAPI 3.1 description of every operation, served at /openapi.json. */
export const openApiDocument = {
  openapi: '3.1.0',
  info: {
    title: 'orloj',
    version: '0.1.0',
    description:
      'Self-hosted workflow scheduling. Every route is also served below /api. Authentication is by the `session` cookie; mutating routes also need the `csrf` cookie.',
  },
  servers: [{ url: '/' }, { url: '/api' }],
  components: {
    securitySchemes: {
      session: { type: 'apiKey', in: 'cookie', name: 'session' },
      csrf: { type: 'apiKey', in: 'cookie', name: 'csrf' },
    },
    schemas: components(),
  },
  paths: paths(API_OPERATIONS),
};
