import net from 'node:net';
import { once } from 'node:events';

/**
 * A TCP proxy between a role and a shared service (PostgreSQL, RabbitMQ), so
 * a test can take the service away from that role alone — cut() closes every
 * connection and refuses new ones — without stopping the service other tests
 * use; restore() accepts connections again on the same port.
 */
export class TcpProxy {
  private server: net.Server | undefined;
  private readonly sockets = new Set<net.Socket>();
  port = 0;

  constructor(
    private readonly targetHost: string,
    private readonly targetPort: number,
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
}
