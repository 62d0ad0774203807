// The HEARTBEAT target of the scheduling benchmark: node:http answering every
// request 200 with a two-byte body, keep-alive, nothing else.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { serveParent } from '../lib/child.js';

let requests = 0;
const server = http.createServer((_req, res) => {
  requests += 1;
  res.statusCode = 200;
  res.end('ok');
});
server.keepAliveTimeout = 65_000;
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));

serveParent(
  (server.address() as AddressInfo).port,
  {
    async stats() {
      return { requests };
    },
  },
  () =>
    new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    }),
);
