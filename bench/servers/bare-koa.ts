// The baseline: a bare Koa app answering GET /workflows with a page held in
// memory, serialised per request by Koa (ctx.body = object), with the same
// HTTP server settings as orloj's ApiServer. No session, store or middleware.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import Koa from 'koa';
import { serveParent } from '../lib/child.js';

let page: unknown = { workflows: [], cursor: '' };

const app = new Koa();
app.use((ctx) => {
  if (ctx.method === 'GET' && ctx.path === '/workflows') ctx.body = page;
});
const server = http.createServer(app.callback());
server.keepAliveTimeout = 65_000;
server.headersTimeout = 66_000;
server.requestTimeout = 5 * 60_000;
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));

serveParent(
  (server.address() as AddressInfo).port,
  {
    /** The JSON text of the page to serve (as orloj answered it). */
    async setPage(json: string) {
      page = JSON.parse(json) as unknown;
    },
  },
  () =>
    new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeIdleConnections();
    }),
);
