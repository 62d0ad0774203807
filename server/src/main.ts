import {
  createLogger,
  loadConfig,
  openDatabase,
  resolveSecrets,
  Store,
  systemClock,
  type Clock,
  type Logger,
  type ResolvedConfig,
} from '@orloj/common';
import { ApiServer } from '@orloj/api';
import type { Role } from './roles.js';

export interface Service {
  start(): Promise<unknown>;
  stop(): Promise<void>;
}

export interface RunningOrloj {
  config: ResolvedConfig;
  /** Port the api listens on, when the api role runs. */
  port: number | undefined;
  stop(): Promise<void>;
}

/**
 * The composition root: opens the store, migrates it, and starts the chosen
 * roles. Shutdown runs in reverse order of start (HTTP first, store last).
 */
export async function startOrloj(options: {
  roles: Role[];
  env?: Record<string, string | undefined>;
  clock?: Clock;
  logger?: Logger;
}): Promise<RunningOrloj> {
  const config = resolveSecrets(loadConfig(options.env ?? process.env));
  const logger = options.logger ?? createLogger({ level: config.logLevel });
  const clock = options.clock ?? systemClock;
  const database = openDatabase(config.databaseUrl, { poolSize: config.dbPoolSize });
  const started: Service[] = [];
  let port: number | undefined;
  try {
    const applied = await database.migrate();
    if (applied.length) logger.info({ migrations: applied }, 'database migrated');
    const store = Store.fromHandle(database);
    for (const role of options.roles) {
      if (role === 'api') {
        const api = new ApiServer({ store, config, clock, logger: logger.child({ role: 'api' }) });
        port = (await api.start()).port;
        started.push(api);
      }
    }
  } catch (err) {
    await stopAll(started);
    await database.close();
    throw err;
  }
  let stopping: Promise<void> | undefined;
  return {
    config,
    port,
    stop() {
      stopping ??= (async () => {
        await stopAll(started);
        await database.close();
        logger.info('orloj stopped');
      })();
      return stopping;
    },
  };
}

async function stopAll(services: Service[]): Promise<void> {
  for (const s of [...services].reverse()) await s.stop();
}

/** `orloj migrate`: applies pending migrations and exits. */
export async function migrate(env: Record<string, string | undefined> = process.env): Promise<string[]> {
  const config = loadConfig(env);
  const database = openDatabase(config.databaseUrl);
  try {
    return await database.migrate();
  } finally {
    await database.close();
  }
}
