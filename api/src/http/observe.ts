import crypto from 'node:crypto';
import type { Middleware } from 'koa';
import { isRequestId } from '@orloj/common/core';
import type { Logger, RequestContext } from '@orloj/common/logging';
import { answerOps, OPS_PATHS, type Health, type OrlojMetrics } from '@orloj/common/observability';
import type { ClientAddressResolver } from './client-address.js';

const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

export interface ObserveOptions {
  logger: Logger;
  clientAddress: ClientAddressResolver;
  metrics?: OrlojMetrics | undefined;
  requestContext?: RequestContext | undefined;
}

/**
 * Mounted first. Gives every request an id — the one a trusted proxy sent in
 * X-Request-Id, else a new UUID — returned in X-Request-Id on every response
 * and carried by every log line the request causes (RequestContext). When the
 * response is done, writes one access-log line (method, route template, path,
 * status, duration, request id, client address; never headers, cookies or
 * bodies) and observes orloj_http_request_duration_seconds. Probes and
 * scrapes are logged at debug: they come every few seconds.
 */
export function observeMiddleware(options: ObserveOptions): Middleware {
  const { logger, clientAddress, metrics, requestContext } = options;
  return async (ctx, next) => {
    const started = process.hrtime.bigint();
    const proposed = ctx.get('X-Request-Id');
    // A proposed id of another shape (isRequestId) is replaced.
    const reqId = proposed && isRequestId(proposed) && clientAddress.trusts(ctx.req.socket.remoteAddress) ? proposed : crypto.randomUUID();
    ctx.state.reqId = reqId;
    ctx.state.clientAddress = clientAddress.resolve(ctx.req.socket.remoteAddress, ctx.get('X-Forwarded-For') || undefined);
    ctx.set('X-Request-Id', reqId);
    const path = ctx.path;
    const done = () => {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      const matched = (ctx as { _matchedRoute?: unknown })._matchedRoute;
      const route = typeof matched === 'string' ? matched : OPS_PATHS.has(path) ? path : 'unmatched';
      const method = METHODS.has(ctx.method) ? ctx.method : 'OTHER';
      const status = ctx.status;
      metrics?.httpRequestDuration.observe({ method, route, status: String(status) }, seconds);
      const line = { reqId, method: ctx.method, route, path, status, durationMs: Math.round(seconds * 1e4) / 10, client: ctx.state.clientAddress as string };
      if (OPS_PATHS.has(path)) logger.debug(line, 'request');
      else logger.info(line, 'request');
    };
    // The response may still stream (a log download, an event stream): the line is written once it ends.
    ctx.res.once('close', done);
    await (requestContext ? requestContext.run(reqId, next) : next());
  };
}

/** /livez, /readyz and /metrics on the api's port: unauthenticated, before rate limits, sessions and the dashboard. */
export function opsMiddleware(deps: { health: Health; metrics: OrlojMetrics }): Middleware {
  return async (ctx, next) => {
    const answer = await answerOps(ctx.method, ctx.path, deps);
    if (!answer) return next();
    ctx.status = answer.status;
    ctx.type = answer.contentType;
    ctx.set('Cache-Control', 'no-store');
    ctx.body = answer.body;
  };
}
