import type { Middleware } from 'koa';

/**
 * CORS for the configured origins only, with credentials. Requests from other
 * origins get no CORS headers (the browser then withholds the response).
 */
export function corsMiddleware(allowedOrigins: readonly string[]): Middleware {
  const allowed = new Set(allowedOrigins);
  return async (ctx, next) => {
    ctx.vary('Origin');
    const origin = ctx.get('Origin');
    if (!origin || !allowed.has(origin)) return next();
    ctx.set('Access-Control-Allow-Origin', origin);
    ctx.set('Access-Control-Allow-Credentials', 'true');
    if (ctx.method === 'OPTIONS' && ctx.get('Access-Control-Request-Method')) {
      ctx.set('Access-Control-Allow-Methods', 'GET, POST, PUT, PATCH, DELETE');
      ctx.set('Access-Control-Allow-Headers', 'Content-Type, Idempotency-Key, X-CSRF-Token, Last-Event-ID');
      ctx.set('Access-Control-Max-Age', '600');
      ctx.status = 204;
      return;
    }
    ctx.set('Access-Control-Expose-Headers', 'Retry-After, Content-Disposition');
    return next();
  };
}
