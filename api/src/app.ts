import Koa from 'koa';
import Router from '@koa/router';
import { OrlojError, type Clock } from '@orloj/common/core';
import type { ResolvedConfig } from '@orloj/common/config';
import type { Logger, RequestContext } from '@orloj/common/logging';
import type { SignedBus } from '@orloj/common/envelope';
import type { Health, OrlojMetrics } from '@orloj/common/observability';
import type { Store } from '@orloj/common/store';
import type { ApiDeps } from './deps.js';
import { errorMiddleware, sendProblem, withHeaders } from './http/problem.js';
import { corsMiddleware } from './http/cors.js';
import { ClientAddressResolver } from './http/client-address.js';
import { RateLimiter } from './http/rate-limit.js';
import { SessionManager } from './http/session.js';
import { IdempotencyGuard } from './http/idempotency.js';
import { ListPageCache } from './http/list-pages.js';
import { HeavyRequests } from './http/heavy-requests.js';
import { LiveTailHub, type LiveTailSettings } from './http/live-tail.js';
import { mountOperations } from './contract/operation.js';
import { API_OPERATIONS } from './openapi.js';
import { dashboardMiddleware, SECURITY_HEADERS } from './http/dashboard.js';
import { hostCheckMiddleware } from './http/host-check.js';
import { observeMiddleware, opsMiddleware } from './http/observe.js';

export interface AppOptions {
  store: Store;
  config: ResolvedConfig;
  clock: Clock;
  logger: Logger;
  /**
   * The bus as the api role (`roleBus({ bus, role: 'api', … })`): live tails
   * then get lines from log-ingest's broadcasts. Without it they poll the store.
   */
  bus?: SignedBus | undefined;
  /** Live tail timings and limits (tests shorten them). */
  liveTail?: Partial<LiveTailSettings> | undefined;
  /** The tails registry; ApiServer passes its own so stop() can end open streams. */
  tails?: LiveTailHub | undefined;
  /** A built dashboard (index.html and assets/) to serve at `/`; none when undefined. */
  dashboardDir?: string | undefined;
  /** The process's metrics: HTTP durations are recorded there, and /metrics serves them (with `health`). */
  metrics?: OrlojMetrics | undefined;
  /** The process's readiness: with `metrics`, /livez, /readyz and /metrics answer on the api's port. */
  health?: Health | undefined;
  /** Carries the request id into every log line a request causes. */
  requestContext?: RequestContext | undefined;
  /** The places for heavy requests; ApiServer passes its own so its metrics can read them. */
  heavy?: HeavyRequests | undefined;
}

/** How long a heavy request waits for its turn before it is answered 503. */
const HEAVY_WAIT_MS = 30_000;

/** The places for heavy requests an app built with `config` has. */
export function createHeavyRequests(config: ResolvedConfig): HeavyRequests {
  return new HeavyRequests({ max: config.http.maxHeavyRequests, perUser: config.http.maxHeavyRequestsPerUser, waitMs: HEAVY_WAIT_MS });
}

/** The live tails of an app built from these options. */
export function createLiveTailHub(options: AppOptions): LiveTailHub {
  return new LiveTailHub({
    store: options.store,
    clock: options.clock,
    logger: options.logger,
    bus: options.bus,
    // With in-process limits off, the ingress enforces the per-address stream limit too; no ingress knows users.
    settings: {
      maxStreamsPerUser: options.config.http.maxStreamsPerUser,
      holdAfterEndMs: options.config.liveTailHoldAfterEndMs,
      ...(options.config.rateLimit.enabled ? {} : { maxStreamsPerClient: 0 }),
      ...options.liveTail,
    },
  });
}

/** The production ingress serves every route below this prefix; orloj serves both forms. */
export const API_PREFIX = '/api';

const AUTH_RATE_LIMITED = new Set(API_OPERATIONS.filter((op) => op.authRateLimited).map((op) => op.path));

/**
 * Builds the Koa application without listening, so tests drive it in-process.
 * Routes answer both at `/` and at `/api`.
 */
export function createApp(options: AppOptions): Koa {
  const { config, clock, logger } = options;
  const deps: ApiDeps = {
    ...options,
    tails: options.tails ?? createLiveTailHub(options),
    sessions: new SessionManager(options.store, config, clock),
    idempotency: new IdempotencyGuard(options.store, clock),
    listPages: new ListPageCache(config.listCacheBytes),
    heavy: options.heavy ?? createHeavyRequests(config),
  };
  const app = new Koa();
  app.silent = true;

  const clientAddress = new ClientAddressResolver(config.trustedProxies);
  const limits = config.rateLimit;
  const authLimiter = new RateLimiter(limits.authPerMinute / 60, limits.authBurst, () => clock.now());
  const apiLimiter = new RateLimiter(limits.apiPerSecond, limits.apiBurst, () => clock.now());

  app.use(observeMiddleware({ logger, clientAddress, metrics: options.metrics, requestContext: options.requestContext }));
  app.use(errorMiddleware(logger));
  // On every response, refusals included; the dashboard's HTML replaces the CSP with its own.
  app.use(async (ctx, next) => {
    ctx.set(SECURITY_HEADERS);
    await next();
  });
  // A request for a name this service does not serve (DNS rebinding) gets nothing else.
  app.use(hostCheckMiddleware(config, API_PREFIX));
  // Probes and scrapes: after the host check (it lets probes through whatever the Host; /metrics only for IP hosts and known names), before the dashboard, the rate limits and sessions.
  if (options.health && options.metrics) app.use(opsMiddleware({ health: options.health, metrics: options.metrics }));
  // Before the rate limits: build assets are exempt from them (the contract's Limits).
  if (options.dashboardDir) app.use(dashboardMiddleware(options.dashboardDir, API_PREFIX));
  app.use(async (ctx, next) => {
    ctx.set('Cache-Control', 'no-store');
    if (ctx.path === API_PREFIX || ctx.path.startsWith(`${API_PREFIX}/`)) ctx.path = ctx.path.slice(API_PREFIX.length) || '/';
    await next();
  });
  app.use(corsMiddleware(config.allowedOrigins));
  const router = new Router();
  if (limits.enabled) {
    app.use(async (ctx, next) => {
      // The route that will answer, however the path is spelled (the router ignores case
      // and a trailing slash): asked of the router itself, for any method, so a 405 there counts too.
      const matched = router.match(ctx.path, ctx.method).path;
      const limiter = matched.some((layer) => layer.methods.length > 0 && typeof layer.path === 'string' && AUTH_RATE_LIMITED.has(layer.path)) ? authLimiter : apiLimiter;
      const decision = limiter.take(ctx.state.clientAddress as string);
      if (!decision.allowed) {
        throw withHeaders(new OrlojError('rate_limited', 'Too many requests from this address; slow down.'), {
          'Retry-After': String(decision.retryAfterSeconds),
        });
      }
      await next();
    });
  }

  mountOperations(router, API_OPERATIONS, deps);
  app.use(router.routes());
  const allowed = router.allowedMethods();
  // After the routes: OPTIONS answers 204 with Allow, a known path with a wrong
  // method 405 with Allow, anything else 404 — the last two as problem documents.
  app.use(async (ctx) => {
    await allowed(ctx as Parameters<typeof allowed>[0], async () => {});
    if (ctx.method === 'OPTIONS' && ctx.status === 200) {
      ctx.status = 204;
      ctx.body = null;
    } else if (ctx.status === 405 || ctx.status === 501) {
      sendProblem(ctx, new OrlojError('method_not_allowed', `${ctx.method} is not allowed on ${ctx.path}.`));
      ctx.status = 405;
    } else if (ctx.body === undefined && ctx.status === 404) {
      sendProblem(ctx, new OrlojError('route_not_found', `There is no route ${ctx.method} ${ctx.path}.`));
    }
  });
  return app;
}
