import fs from 'node:fs';
import path from 'node:path';
import { send } from '@koa/send';
import type { Context, Middleware } from 'koa';

const YEAR_MS = 365 * 24 * 60 * 60 * 1000;

/**
 * The dashboard document's policy: everything from this origin only, no inline
 * script or style, not framed. The built app needs nothing else.
 */
export const DASHBOARD_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'self'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

/**
 * Every response's headers (API answers and dashboard files alike): no
 * sniffing, no framing, no referrer beyond this origin, and a CSP that lets a
 * response opened as a document do nothing. HTML documents of the dashboard
 * replace the CSP with DASHBOARD_CSP.
 */
export const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'Content-Security-Policy': "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
  'X-Content-Type-Options': 'nosniff',
  'X-Frame-Options': 'DENY',
  'Referrer-Policy': 'same-origin',
  'Cross-Origin-Opener-Policy': 'same-origin',
};

/** Marks a response that is a dashboard HTML document. */
function asDashboardDocument(ctx: Context): void {
  ctx.set(SECURITY_HEADERS);
  ctx.set('Content-Security-Policy', DASHBOARD_CSP);
}

/** Whether a directory holds a built dashboard (its index.html). */
export function isDashboardDir(dir: string): boolean {
  return fs.existsSync(path.join(dir, 'index.html'));
}

/** Only a browser navigating asks for HTML by name; fetch, curl and EventSource do not. */
function wantsHtml(ctx: Context): boolean {
  return /(^|,)\s*text\/html\b/i.test(ctx.get('Accept'));
}

/** Sends a file below root; false when there is none (or the path is refused), so the API answers instead. */
async function trySend(ctx: Context, file: string, options: Parameters<typeof send>[2]): Promise<boolean> {
  try {
    // The build writes a .br and a .gz beside each text file (dashboard/vite.config.ts); the
    // answer differs by Accept-Encoding, which caches in front must know.
    ctx.vary('Accept-Encoding');
    return (await send(ctx, file, { ...options, index: false, hidden: false, brotli: true, gzip: true })) !== undefined;
  } catch (err) {
    const status = (err as { status?: unknown }).status;
    if (typeof status === 'number' && status < 500) return false;
    throw err;
  }
}

/**
 * Serves the built single-page app on the API's origin, so its cookies and
 * CSRF work without CORS. Routes answer both at `/` and below `prefix`, and a
 * browser path such as `/workflows/<id>` is also an API path, so:
 * - anything below `prefix` is left to the API (the dashboard calls it there);
 * - `/assets/*` are Vite's content-hashed files: cached for a year, immutable;
 * - a file at the top of the build (favicon) is served when it exists;
 * - any other GET or HEAD whose Accept names text/html gets index.html
 *   (history fallback; the app's router picks the page);
 * - everything else (API clients send Accept: application/json or star/star)
 *   goes on to the API routes unchanged.
 */
export function dashboardMiddleware(dir: string, prefix: string): Middleware {
  const root = path.resolve(dir);
  return async (ctx, next) => {
    if ((ctx.method !== 'GET' && ctx.method !== 'HEAD') || ctx.path === prefix || ctx.path.startsWith(`${prefix}/`)) return next();
    if (ctx.path.startsWith('/assets/')) {
      if (await trySend(ctx, ctx.path, { root, immutable: true, maxage: YEAR_MS })) return;
      return next();
    }
    const last = ctx.path.slice(ctx.path.lastIndexOf('/') + 1);
    if (last.includes('.')) {
      if (ctx.path.indexOf('/', 1) === -1 && (await trySend(ctx, ctx.path, { root }))) {
        ctx.set('Cache-Control', 'no-cache');
        // /index.html by name is the same document as the fallback below.
        if (ctx.response.is('html')) asDashboardDocument(ctx);
        return;
      }
      return next();
    }
    if (!wantsHtml(ctx)) return next();
    if (!(await trySend(ctx, 'index.html', { root }))) return next();
    // Revalidated on every load, so a new build is picked up at once.
    ctx.set('Cache-Control', 'no-cache');
    asDashboardDocument(ctx);
  };
}
