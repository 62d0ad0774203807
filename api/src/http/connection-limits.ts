import type { Socket } from 'node:net';
import type { ClientAddressResolver } from './client-address.js';

/**
 * The api's own defence against connection floods (slowloris): at most
 * `perClient` open connections from one client address — further ones are
 * closed as soon as they are accepted, so one client cannot take the
 * process's file descriptors from the others — and a deadline for a
 * connection's first request. Node's `headersTimeout` covers a request whose
 * headers have begun; a connection that sends nothing at all is left open by
 * Node until keep-alive ends it, so this closes one that has started no
 * request within `headersTimeoutMs`. The total (`server.maxConnections`) is
 * Node's. Peers in TRUSTED_PROXIES are not counted per address: behind an
 * ingress every client shares its address, and the ingress limits them.
 */
export class ConnectionLimits {
  private readonly open = new Map<string, number>();
  private readonly waiting = new Map<Socket, NodeJS.Timeout>();
  private refusedCount = 0;

  constructor(
    private readonly o: {
      perClient: number;
      headersTimeoutMs: number;
      clientAddress: ClientAddressResolver;
    },
  ) {}

  /** Connections closed at once because their address had `perClient` open. */
  get refused(): number {
    return this.refusedCount;
  }

  /** A connection was accepted: counted, or closed when its address is at its limit. Returns whether it stays. */
  admit(socket: Socket): boolean {
    const peer = socket.remoteAddress;
    if (peer !== undefined && !this.o.clientAddress.trusts(peer)) {
      const n = this.open.get(peer) ?? 0;
      if (n >= this.o.perClient) {
        this.refusedCount++;
        socket.destroy();
        return false;
      }
      this.open.set(peer, n + 1);
      socket.once('close', () => {
        const left = (this.open.get(peer) ?? 1) - 1;
        if (left <= 0) this.open.delete(peer);
        else this.open.set(peer, left);
      });
    }
    const timer = setTimeout(() => socket.destroy(), this.o.headersTimeoutMs);
    timer.unref();
    this.waiting.set(socket, timer);
    socket.once('close', () => this.started(socket));
    return true;
  }

  /** The connection's first request arrived (or it closed): its deadline is Node's own from now on. */
  started(socket: Socket): void {
    const timer = this.waiting.get(socket);
    if (timer === undefined) return;
    clearTimeout(timer);
    this.waiting.delete(socket);
  }
}
