import crypto from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { KEEP_ALIVE_TIMEOUT_MS } from '@orloj/common/observability';
import { createApp, createHeavyRequests, createLiveTailHub, type AppOptions } from './app.js';
import type { HeavyRequests } from './http/heavy-requests.js';
import type { LiveTailHub } from './http/live-tail.js';
import { ClientAddressResolver } from './http/client-address.js';
import { ConnectionLimits } from './http/connection-limits.js';

/** How often the api deletes expired idempotency records and dead sessions. */
const MAINTENANCE_EVERY_MS = 10 * 60_000;
/** Sessions expired longer ago than this are deleted. */
const SESSION_PURGE_AFTER_MS = 24 * 60 * 60_000;
/** The longest a request (a log download included) may take. */
const REQUEST_TIMEOUT_MS = 5 * 60_000;

/** How a request Node refuses is answered, by Node's error code. */
const CLIENT_ERRORS: Record<string, { status: number; title: string; detail: string; code: string }> = {
  HPE_HEADER_OVERFLOW: { status: 431, title: 'Request Header Fields Too Large', detail: 'The request headers are too large.', code: 'malformed_request' },
  // Headers not complete within HTTP_HEADERS_TIMEOUT (slowloris), or a request body within the request timeout.
  ERR_HTTP_REQUEST_TIMEOUT: { status: 408, title: 'Request Timeout', detail: 'The request was not received in time.', code: 'request_timeout' },
  malformed: { status: 400, title: 'Bad Request', detail: 'The request could not be parsed: a header or the request line is malformed.', code: 'malformed_request' },
};

/**
 * Requests Node's HTTP parser refuses (bytes not allowed in a header, oversized
 * headers) never reach Koa; they still get a problem document, not a bare 400.
 */
function answerClientError(err: NodeJS.ErrnoException, socket: Duplex): void {
  if (!socket.writable || (err.code === 'ECONNRESET' && !socket.readable)) {
    socket.destroy();
    return;
  }
  const { status, title, detail, code } = CLIENT_ERRORS[err.code ?? ''] ?? CLIENT_ERRORS.malformed!;
  const body = JSON.stringify({ type: `urn:orloj:problem:${code}`, title, status, detail, code });
  socket.end(
    `HTTP/1.1 ${status} ${title}\r\n` +
      `Content-Type: application/problem+json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nX-Request-Id: ${crypto.randomUUID()}\r\n` +
      `Connection: close\r\n\r\n${body}`,
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
  private tails: LiveTailHub | undefined;
  private readonly busy = new Map<Socket, number>();
  private connections: ConnectionLimits | undefined;
  private heavy: HeavyRequests | undefined;

  /** `bus` (the api role's) feeds live log tails across processes; `liveTail` tunes them. */
  constructor(private readonly deps: Omit<AppOptions, 'tails' | 'heavy'>) {}

  async start(): Promise<AddressInfo> {
    const tails = createLiveTailHub(this.deps);
    this.tails = tails;
    const heavy = createHeavyRequests(this.deps.config);
    this.heavy = heavy;
    const app = createApp({ ...this.deps, tails, heavy });
    const limits = this.deps.config.http;
    const server = http.createServer(
      {
        headersTimeout: limits.headersTimeoutMs,
        requestTimeout: REQUEST_TIMEOUT_MS,
        // Node checks those timeouts this often (30 s by default, which would let a slow header run on that long).
        connectionsCheckingInterval: Math.min(1_000, limits.headersTimeoutMs / 2),
      },
      app.callback(),
    );
    // Beyond it Node closes new connections at once; the per-address share keeps one client from reaching it.
    server.maxConnections = limits.maxConnections;
    const connections = new ConnectionLimits({ perClient: limits.maxConnectionsPerClient, headersTimeoutMs: limits.headersTimeoutMs, clientAddress: new ClientAddressResolver(this.deps.config.trustedProxies) });
    this.connections = connections;
    // Requests in progress per connection, so stop() can close the rest.
    server.on('connection', (socket: Socket) => {
      if (!connections.admit(socket)) return;
      this.busy.set(socket, 0);
      socket.once('close', () => this.busy.delete(socket));
    });
    server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
      const socket = req.socket;
      connections.started(socket);
      this.busy.set(socket, (this.busy.get(socket) ?? 0) + 1);
      res.once('close', () => {
        if (this.busy.has(socket)) this.busy.set(socket, Math.max(0, (this.busy.get(socket) ?? 1) - 1));
      });
    });
    server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;
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

  /** Connections closed at once because their client address had HTTP_MAX_CONNECTIONS_PER_CLIENT open. */
  get connectionsRefused(): number {
    return this.connections?.refused ?? 0;
  }

  /** Heavy requests served and waiting now, and refused (503) since start (HTTP_MAX_HEAVY_REQUESTS). */
  get heavyRequests(): { running: number; waiting: number; refused: number } {
    return this.heavy?.metrics() ?? { running: 0, waiting: 0, refused: 0 };
  }

  /** Open live-tail streams (SSE subscribers) right now, those held open after `end` included. */
  get liveTailSubscribers(): number {
    const m = this.tails?.metrics();
    return m ? m.tails + m.held : 0;
  }

  /** Deletes expired idempotency records and dead sessions. */
  async maintain(): Promise<void> {
    const now = this.deps.clock.now();
    try {
      await this.deps.store.idempotency.purgeExpired(now);
      await this.deps.store.sessions.purge(now - SESSION_PURGE_AFTER_MS);
    } catch (err) {
      this.deps.logger.warn({ err }, 'maintenance failed; will retry');
    }
  }

  stop(): Promise<void> {
    this.stopping ??= (async () => {
      if (this.timer) clearInterval(this.timer);
      const server = this.server;
      if (!server) return;
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      // Event streams never end by themselves: end them (clients reconnect
      // elsewhere with Last-Event-ID). Then every connection goes as soon as
      // no request is in progress on it: keep-alive ones, ones a client opened
      // but never used (Node's closeIdleConnections leaves those to
      // headersTimeout), and the rest once their response is done.
      await this.tails?.stop();
      const closeIdle = () => {
        for (const [socket, requests] of this.busy) if (requests === 0) socket.destroy();
      };
      closeIdle();
      const idle = setInterval(closeIdle, 50);
      try {
        await closed;
      } finally {
        clearInterval(idle);
      }
    })();
    return this.stopping;
  }
}
