// The orloj api under test, alone in its process. Configured like production
// (`orloj start --roles api`) through the environment the parent passes:
// DATABASE_URL, RATE_LIMIT_ENABLED=false, LOG_LEVEL=silent, secrets, PORT=0.
import { createLogger, loadConfig, openDatabase, resolveSecrets, Store, systemClock } from '@orloj/common';
import { ApiServer } from '@orloj/api';
import { serveParent } from '../lib/child.js';
import { engineVersion, seedJobLogs, seedWorkflows, timeSearchSql } from '../lib/seed.js';

const config = resolveSecrets(loadConfig(process.env));
const database = openDatabase(config.databaseUrl, { poolSize: config.dbPoolSize });
await database.migrate();
const store = Store.fromHandle(database);
const api = new ApiServer({ store, config, clock: systemClock, logger: createLogger({ level: config.logLevel }) });
const { port } = await api.start();

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
      return { ms: Math.round(performance.now() - started), total: await store.workflows.countForUser(user.id) };
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
  },
  async () => {
    await api.stop();
    await database.close();
  },
);
