import net from 'node:net';

export interface Canary {
  port: number;
  /** Connections accepted so far. */
  connections(): number;
  close(): Promise<void>;
}

/**
 * A TCP listener on loopback that counts and drops every connection: proof
 * that nothing (a container runtime pulling an image, say) connected to it.
 */
export async function tcpCanary(): Promise<Canary> {
  let count = 0;
  const server = net.createServer((socket) => {
    count++;
    socket.destroy();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    connections: () => count,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
