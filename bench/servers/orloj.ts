// The orloj api under test, alone in its process. Configured like production
// (`orloj start --roles api`) through the environment the parent passes:
// DATABASE_URL, RATE_LIMIT_ENABLED=false, LOG_LEVEL=silent, secrets, PORT=0.
// `startBareSearch` adds, in the same process, the leanest HTTP answer to a log
// search that could be written: the bound the log-search suite holds the api to.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { systemClock } from '@orloj/common/core';
import { loadConfig, resolveSecrets } from '@orloj/common/config';
import { createLogger } from '@orloj/common/logging';
import { openDatabase, Store } from '@orloj/common/store';
import { ApiServer } from '@orloj/api';
import { serveParent } from '../lib/child.js';
import { engineVersion, seedJobLogs, seedWorkflows, timeSearchSql } from '../lib/seed.js';
import { seedRollups } from '../lib/seed-rollups.js';

const config = resolveSecrets(loadConfig(process.env));
const database = openDatabase(config.databaseUrl, { poolSize: config.dbPoolSize });
await database.migrate();
const store = Store.fromHandle(database);
// DASHBOARD_DIR (the dashboard-first-row suite): the built dashboard at /, the api below /api, as `orloj start` serves them.
const api = new ApiServer({ store, config, clock: systemClock, logger: createLogger({ level: config.logLevel }), dashboardDir: config.dashboardDir });
const { port } = await api.start();
let bare: http.Server | undefined;

serveParent(
  port,
  {
    async info() {
      return { engine: await engineVersion(store), poolSize: config.dbPoolSize };
    },
    async seedWorkflows(arg: { email: string; count: number }) {
      const user = await store.users.findByEmail(arg.email);
      if (!user) throw new Error(`no user ${arg.email}`);
      const started = performance.now();
      await seedWorkflows(store, user.id, arg.count);
      return { ms: Math.round(performance.now() - started), total: await store.users.workflowCount(user.id) };
    },
    /** Marks the user's oldest workflow down by its alert policy, as a failed run leaves it; returns its name. */
    async markOldestDown(arg: { email: string }) {
      const user = await store.users.findByEmail(arg.email);
      if (!user) throw new Error(`no user ${arg.email}`);
      const oldest = await store.db.selectFrom('workflows').select(['id', 'name']).where('user_id', '=', user.id).orderBy('created_at', 'asc').limit(1).executeTakeFirstOrThrow();
      await store.db.updateTable('workflows').set({ alert_down: 1, consecutive_job_failures_count: 1 }).where('id', '=', oldest.id).execute();
      return { name: oldest.name };
    },
    /** A year (`days`) of hourly rollups and some incidents for each of the user's workflows (lib/seed-rollups.ts). */
    async seedRollups(arg: { email: string; days: number }) {
      const user = await store.users.findByEmail(arg.email);
      if (!user) throw new Error(`no user ${arg.email}`);
      const started = performance.now();
      const seeded = await seedRollups(store, user.id, arg.days);
      return { ...seeded, ms: Math.round(performance.now() - started) };
    },
    async seedJobLogs(arg: { email: string; total: number; jobs: number }) {
      const user = await store.users.findByEmail(arg.email);
      if (!user) throw new Error(`no user ${arg.email}`);
      const started = performance.now();
      const seeded = await seedJobLogs(store, user.id, arg);
      return { ...seeded, ms: Math.round(performance.now() - started) };
    },
    async timeSearchSql(arg: { email: string; workflowId: string; jobId: string; needle: string; limit: number; runs: number }) {
      const user = await store.users.findByEmail(arg.email);
      if (!user) throw new Error(`no user ${arg.email}`);
      return timeSearchSql(store, { ...arg, userId: user.id });
    },
    /**
     * A bare node:http server on its own port: `GET /?q=…` answers the first
     * page of the job's search as JSON, `{ "logs": [rows] }`, through the same
     * call timeSearchSql times (LogQueriesRepo.ownedPage on the same read
     * connection or pool). No Koa, session, CSRF, headers, highlights or
     * problem details: HTTP plus the query, nothing else.
     */
    async startBareSearch(arg: { email: string; workflowId: string; jobId: string; limit: number }) {
      const user = await store.users.findByEmail(arg.email);
      if (!user) throw new Error(`no user ${arg.email}`);
      const owner = { userId: user.id, workflowId: arg.workflowId };
      bare = http.createServer((req, res) => {
        const q = new URL(req.url ?? '/', 'http://bare').searchParams.get('q') ?? '';
        store.logQueries.ownedPage(owner, { jobId: arg.jobId, match: store.logQueries.matcher(q), limit: arg.limit + 1 }).then(
          (page) => {
            const body = JSON.stringify({ logs: page?.lines.slice(0, arg.limit) ?? [] });
            res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }).end(body);
          },
          (err: unknown) => res.writeHead(500).end(String(err)),
        );
      });
      bare.keepAliveTimeout = 65_000;
      await new Promise<void>((resolve) => bare!.listen(0, '127.0.0.1', resolve));
      return { port: (bare.address() as AddressInfo).port };
    },
  },
  async () => {
    bare?.closeAllConnections();
    bare?.close();
    await api.stop();
    await database.close();
  },
);
