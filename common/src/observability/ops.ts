import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { SETTINGS } from '../config/settings.js';
import type { Logger } from '../logging/logger.js';
import type { Health } from './health.js';
import type { OrlojMetrics } from './metrics.js';

/** The paths every role answers: probes and metrics. Unauthenticated, never rate-limited. */
export const OPS_PATHS: ReadonlySet<string> = new Set(['/livez', '/readyz', '/metrics']);

/** Longer than a load balancer's idle timeout (often 60 s), so the proxy closes idle connections first (the api's server too). */
export const KEEP_ALIVE_TIMEOUT_MS = 65_000;

export interface OpsAnswer {
  status: number;
  contentType: string;
  body: string;
}

/**
 * The answer to a probe or a scrape, or undefined for any other path. Shared
 * by the api (on its own port) and the ops server of the other roles.
 */
export async function answerOps(method: string, path: string, deps: { health: Health; metrics: OrlojMetrics }): Promise<OpsAnswer | undefined> {
  if (!OPS_PATHS.has(path)) return undefined;
  if (method !== 'GET' && method !== 'HEAD') {
    return { status: 405, contentType: 'text/plain; charset=utf-8', body: `${method} is not allowed on ${path}; use GET\n` };
  }
  if (path === '/livez') return { status: 200, contentType: 'text/plain; charset=utf-8', body: 'ok\n' };
  if (path === '/readyz') {
    const report = await deps.health.readiness();
    return { status: report.ready ? 200 : 503, contentType: 'application/json', body: JSON.stringify(report) };
  }
  const { contentType, body } = await deps.metrics.render();
  return { status: 200, contentType, body };
}

/**
 * The HTTP server of a process without the api role (scheduler, runners,
 * log-ingest, notifier): /livez, /readyz and /metrics on OPS_PORT.
 */
export class OpsServer {
  private server: http.Server | undefined;
  private stopping: Promise<void> | undefined;

  constructor(private readonly deps: { host: string; port: number; health: Health; metrics: OrlojMetrics; logger: Logger }) {}

  async start(): Promise<AddressInfo> {
    const server = http.createServer((req, res) => void this.handle(req, res));
    server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;
    server.headersTimeout = SETTINGS.HTTP_HEADERS_TIMEOUT.default;
    this.server = server;
    await new Promise<void>((resolve, reject) => {
      server.once('error', (err: NodeJS.ErrnoException) =>
        reject(err.code === 'EADDRINUSE' || err.code === 'EACCES' ? new Error(`cannot listen on OPS_PORT ${this.deps.port} at ${this.deps.host} (${err.code}): give each process on this host its own OPS_PORT`) : err),
      );
      server.listen(this.deps.port, this.deps.host, () => {
        server.removeAllListeners('error');
        server.on('error', (err) => this.deps.logger.error({ err }, 'ops endpoints: server error'));
        resolve();
      });
    });
    const address = server.address() as AddressInfo;
    this.deps.logger.info({ host: address.address, port: address.port }, 'ops endpoints listening (/livez, /readyz, /metrics)');
    return address;
  }

  stop(): Promise<void> {
    this.stopping ??= new Promise<void>((resolve) => {
      const server = this.server;
      if (!server) return resolve();
      server.close(() => resolve());
      server.closeAllConnections();
    });
    return this.stopping;
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const path = new URL(req.url ?? '/', 'http://ops').pathname;
    let answer: OpsAnswer | undefined;
    try {
      answer = await answerOps(req.method ?? 'GET', path, this.deps);
    } catch (err) {
      this.deps.logger.error({ err, path }, 'ops endpoint failed');
      answer = { status: 500, contentType: 'text/plain; charset=utf-8', body: 'internal error\n' };
    }
    answer ??= { status: 404, contentType: 'text/plain; charset=utf-8', body: 'not found: this port serves /livez, /readyz and /metrics\n' };
    res.writeHead(answer.status, { 'Content-Type': answer.contentType, 'Cache-Control': 'no-store', 'Content-Length': Buffer.byteLength(answer.body) });
    res.end(req.method === 'HEAD' ? undefined : answer.body);
  }
}
