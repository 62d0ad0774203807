import net from 'node:net';
import { once } from 'node:events';

/** One connection the proxy carried: what the client sent first, and the port the service saw it come from. */
export interface ProxiedConnection {
  /** The first bytes the client sent (up to `recordBytes`), as the service received them. */
  sent: Buffer;
  /** The proxy's local port towards the service: the peer port the service lists for this connection. */
  upstreamPort: number | undefined;
  /** Until either side closes it. */
  open: boolean;
}

/**
 * A TCP proxy between a role and a shared service (PostgreSQL, RabbitMQ), so
 * a test can take the service away from that role alone — cut() closes every
 * connection and refuses new ones — without stopping the service other tests
 * use; restore() accepts connections again on the same port. With
 * `recordBytes`, it keeps the first bytes each client sent (a protocol
 * handshake) in `connections`.
 */
export class TcpProxy {
  private server: net.Server | undefined;
  private readonly sockets = new Set<net.Socket>();
  port = 0;
  /** Every connection carried so far, in the order they came (only with `recordBytes`). */
  readonly connections: ProxiedConnection[] = [];

  constructor(
    private readonly targetHost: string,
    private readonly targetPort: number,
    private readonly recordBytes = 0,
  ) {}

  async start(): Promise<number> {
    await this.listen(this.port);
    return this.port;
  }

  async cut(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    for (const s of this.sockets) s.destroy();
    this.sockets.clear();
    if (server) await new Promise((r) => server.close(r));
  }

  async restore(): Promise<void> {
    if (!this.server) await this.listen(this.port);
  }

  stop(): Promise<void> {
    return this.cut();
  }

  private async listen(port: number): Promise<void> {
    const server = net.createServer((client) => {
      const upstream = net.connect(this.targetPort, this.targetHost);
      if (this.recordBytes > 0) this.record(client, upstream);
      for (const s of [client, upstream]) {
        this.sockets.add(s);
        s.on('error', () => undefined);
        s.on('close', () => {
          this.sockets.delete(s);
          client.destroy();
          upstream.destroy();
        });
      }
      client.pipe(upstream);
      upstream.pipe(client);
    });
    server.listen(port, '127.0.0.1');
    await once(server, 'listening');
    this.port = (server.address() as net.AddressInfo).port;
    this.server = server;
  }

  private record(client: net.Socket, upstream: net.Socket): void {
    const seen: ProxiedConnection = { sent: Buffer.alloc(0), upstreamPort: undefined, open: true };
    this.connections.push(seen);
    upstream.once('connect', () => (seen.upstreamPort = upstream.localPort));
    upstream.once('close', () => (seen.open = false));
    const take = (chunk: Buffer) => {
      seen.sent = Buffer.concat([seen.sent, chunk]).subarray(0, this.recordBytes);
      if (seen.sent.length >= this.recordBytes) client.off('data', take);
    };
    client.on('data', take);
  }
}
