import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Clock, Logger, ResolvedConfig, Store } from '@orloj/common';
import { createApp } from './app.js';

const MAINTENANCE_EVERY_MS = 10 * 60 * 1000;

/**
 * Requests Node's HTTP parser refuses (bytes not allowed in a header, oversized
 * headers) never reach Koa; they still get a problem document, not a bare 400.
 */
function answerClientError(err: NodeJS.ErrnoException, socket: Duplex): void {
  if (!socket.writable || (err.code === 'ECONNRESET' && !socket.readable)) {
    socket.destroy();
    return;
  }
  const tooLarge = err.code === 'HPE_HEADER_OVERFLOW';
  const status = tooLarge ? 431 : 400;
  const body = JSON.stringify({
    type: 'urn:orloj:problem:malformed_request',
    title: tooLarge ? 'Request Header Fields Too Large' : 'Bad Request',
    status,
    detail: tooLarge ? 'The request headers are too large.' : 'The request could not be parsed: a header or the request line is malformed.',
    code: 'malformed_request',
  });
  socket.end(
    `HTTP/1.1 ${status} ${tooLarge ? 'Request Header Fields Too Large' : 'Bad Request'}\r\n` +
      `Content-Type: application/problem+json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}

/**
 * The api role: the HTTP server plus its housekeeping (expired idempotency
 * keys and sessions). start() listens; stop() is idempotent and lets
 * in-flight requests finish.
 */
export class ApiServer {
  private server: http.Server | undefined;
  private timer: NodeJS.Timeout | undefined;
  private stopping: Promise<void> | undefined;

  constructor(private readonly deps: { store: Store; config: ResolvedConfig; clock: Clock; logger: Logger }) {}

  async start(): Promise<AddressInfo> {
    const app = createApp(this.deps);
    const server = http.createServer(app.callback());
    server.keepAliveTimeout = 65_000;
    server.headersTimeout = 66_000;
    server.requestTimeout = 5 * 60_000;
    server.on('clientError', (err: NodeJS.ErrnoException, socket) => answerClientError(err, socket));
    this.server = server;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.deps.config.port, this.deps.config.host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    this.timer = setInterval(() => void this.maintain(), MAINTENANCE_EVERY_MS);
    this.timer.unref();
    const address = server.address() as AddressInfo;
    this.deps.logger.info({ host: address.address, port: address.port }, 'api listening');
    return address;
  }

  /** Deletes expired idempotency records and dead sessions. */
  async maintain(): Promise<void> {
    const now = this.deps.clock.now();
    try {
      await this.deps.store.idempotency.purgeExpired(now);
      await this.deps.store.sessions.purge(now - 24 * 60 * 60 * 1000);
    } catch (err) {
      this.deps.logger.warn({ err }, 'maintenance failed; will retry');
    }
  }

  stop(): Promise<void> {
    this.stopping ??= (async () => {
      if (this.timer) clearInterval(this.timer);
      const server = this.server;
      if (!server) return;
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections();
      });
    })();
    return this.stopping;
  }
}
