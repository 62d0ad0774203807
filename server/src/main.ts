import {
  AcceleratedClock,
  createBus,
  createLogger,
  ensureKeyDir,
  keyEnvName,
  loadConfig,
  loadKeysFromEnv,
  openDatabase,
  PRODUCER_ROLES,
  resolveSecrets,
  roleBus,
  Store,
  systemClock,
  type Bus,
  type Clock,
  type DatabaseHandle,
  type Logger,
  type MigrationStatus,
  type ResolvedConfig,
  type RoleKeys,
} from '@orloj/common';
import { createRequire } from 'node:module';
import path from 'node:path';
import { ApiServer, isDashboardDir } from '@orloj/api';
import { RetentionSweeper, Scheduler } from '@orloj/scheduler';
import { BusLogSink, ContainerExecutor, HttpCheckExecutor, Runner } from '@orloj/runners';
import { LogIngester } from '@orloj/log-ingest';
import { Notifier } from '@orloj/notifier';
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

type Env = Record<string, string | undefined>;

export function clockFrom(config: ResolvedConfig): Clock {
  return config.clock.kind === 'accelerated' ? new AcceleratedClock(config.clock.origin, config.clock.speed) : systemClock;
}

/**
 * Signing keys: from ORLOJ_<ROLE>_PRIVATE_KEY / _PUBLIC_KEY (or _FILE) when any
 * is set — the distributed topology, where each process holds only its own
 * private key — otherwise generated once into DATA_DIR/keys (embedded default).
 */
async function loadKeys(config: ResolvedConfig, env: Env): Promise<RoleKeys> {
  const configured = PRODUCER_ROLES.some((role) =>
    (['private', 'public'] as const).some((kind) => env[keyEnvName(role, kind)] || env[`${keyEnvName(role, kind)}_FILE`]),
  );
  return configured ? loadKeysFromEnv(env) : ensureKeyDir(config.dataDir);
}

/**
 * The dashboard the api serves: DASHBOARD_DIR, else the build output of the
 * dashboard package (`npm run build` makes it). Without one the api serves the
 * API alone, and says so.
 */
export function dashboardDir(config: ResolvedConfig, logger: Logger): string | undefined {
  let dir = config.dashboardDir;
  if (dir === undefined) {
    try {
      dir = path.join(path.dirname(createRequire(import.meta.url).resolve('@orloj/dashboard/package.json')), 'dist');
    } catch {
      dir = undefined;
    }
  }
  if (dir !== undefined && isDashboardDir(dir)) return dir;
  logger.warn({ dashboardDir: dir }, 'no built dashboard (run npm run build, or set DASHBOARD_DIR): serving the API only');
  return undefined;
}

/**
 * The composition root: opens what the chosen roles need (runners get no
 * database), and starts the roles. Shutdown runs in reverse: HTTP first, then
 * runners (flushing their log lines), the notifier, log-ingest, the scheduler,
 * the bus and the store.
 */
export async function startOrloj(options: { roles: Role[]; env?: Env; clock?: Clock; logger?: Logger }): Promise<RunningOrloj> {
  const env = options.env ?? process.env;
  const config = resolveSecrets(loadConfig(env));
  const logger = options.logger ?? createLogger({ level: config.logLevel });
  const clock = options.clock ?? clockFrom(config);
  const roles = new Set(options.roles);
  const started: Service[] = [];
  let database: DatabaseHandle | undefined;
  let bus: Bus | undefined;
  let port: number | undefined;

  const closeAll = async () => {
    for (const s of [...started].reverse()) await s.stop();
    await bus?.close();
    await database?.close();
  };

  try {
    let store: Store | undefined;
    if ([...roles].some((r) => r !== 'runners')) {
      database = openDatabase(config.databaseUrl, { poolSize: config.dbPoolSize });
      const applied = await database.migrate();
      if (applied.length) logger.info({ migrations: applied }, 'database migrated');
      store = Store.fromHandle(database);
    }
    if (config.busUrl.startsWith('memory:') && roles.size < 3 && !roles.has('api')) {
      logger.warn('BUS_URL=memory: connects only the roles inside this process; use amqp:// to run roles in separate processes');
    }
    const keys = await loadKeys(config, env);
    bus = await createBus(config.busUrl, { logger, prefix: config.busPrefix });

    if (roles.has('scheduler') && store) {
      const log = logger.child({ role: 'scheduler' });
      const scheduler = new Scheduler({
        store,
        bus: roleBus({ bus, role: 'scheduler', keys, clock, logger: log }),
        clock,
        logger: log,
        replicaId: config.scheduler.id,
        config: {
          tickMs: config.scheduler.tickMs,
          leaderLeaseTtlMs: config.scheduler.leaderLeaseTtlMs,
          jobLeaseTtlMs: config.scheduler.jobLeaseTtlMs,
          queueTimeoutMs: config.scheduler.queueTimeoutMs,
          buildTimeoutMs: config.scheduler.buildTimeoutMs,
          maxQueued: config.scheduler.maxQueued,
        },
      });
      await scheduler.start();
      started.push(scheduler);
      // Pruning old rows is the leader's: one process at a time, in either topology.
      const retention = new RetentionSweeper({ store, clock, logger: log, mayRun: () => scheduler.isLeader, config: config.retention });
      await retention.start();
      started.push(retention);
    }
    // Before the runners: stopped after them, so it takes the lines they flush at shutdown.
    if (roles.has('log-ingest') && store) {
      const log = logger.child({ role: 'log-ingest' });
      const ingester = new LogIngester({ store, bus: roleBus({ bus, role: 'log-ingest', keys, clock, logger: log }), clock, logger: log });
      await ingester.start();
      started.push(ingester);
    }
    if (roles.has('notifier') && store) {
      const log = logger.child({ role: 'notifier' });
      const notifier = new Notifier({ store, bus: roleBus({ bus, role: 'notifier', keys, clock, logger: log }), clock, logger: log, pollMs: config.notifier.pollMs });
      await notifier.start();
      started.push(notifier);
    }
    if (roles.has('runners')) {
      const log = logger.child({ role: 'runners' });
      const containers = config.runner.dockerHost ? new ContainerExecutor({ dockerHost: config.runner.dockerHost, logger: log, clock }) : undefined;
      if (!containers) log.warn('no DOCKER_HOST and no /var/run/docker.sock: CONTAINER jobs will fail with SYSTEM_ERROR');
      else if (!(await containers.ping())) log.warn({ dockerHost: config.runner.dockerHost }, 'the container runtime does not answer; CONTAINER jobs fail until it does');
      const runnerBus = roleBus({ bus, role: 'runners', keys, clock, logger: log });
      // Captured container lines go to log-ingest in batches (docs/logs.md). On the
      // in-process bus nobody outside this process could take them: without a
      // log-ingest here they would pile up in memory, so they are only counted.
      const inProcessOnly = config.busUrl.startsWith('memory:') && !roles.has('log-ingest');
      if (inProcessOnly) log.warn('BUS_URL=memory: without the log-ingest role in this process: container log lines are not kept');
      const runner = new Runner({
        bus: runnerBus,
        logger: log,
        clock,
        runnerId: config.runner.id,
        http: new HttpCheckExecutor({ logger: log, allowTargets: [...config.runner.allowTargets], denyTargets: [...config.runner.denyTargets], clock }),
        ...(containers ? { containers } : {}),
        concurrency: config.runner.concurrency,
        leaseTtlMs: config.scheduler.jobLeaseTtlMs,
        shutdownGraceMs: config.runner.shutdownGraceMs,
        ...(inProcessOnly ? {} : { logSink: new BusLogSink({ bus: runnerBus, logger: log, clock }) }),
      });
      await runner.start();
      started.push(runner);
    }
    if (roles.has('api') && store) {
      const log = logger.child({ role: 'api' });
      const api = new ApiServer({
        store,
        config,
        clock,
        logger: log,
        bus: roleBus({ bus, role: 'api', keys, clock, logger }),
        dashboardDir: dashboardDir(config, log),
      });
      port = (await api.start()).port;
      started.push(api);
    }
  } catch (err) {
    await closeAll().catch(() => undefined);
    throw err;
  }
  let stopping: Promise<void> | undefined;
  return {
    config,
    port,
    stop() {
      stopping ??= closeAll().then(() => logger.info('orloj stopped'));
      return stopping;
    },
  };
}

/** `orloj migrate --check`: what `orloj migrate` would do, without doing it. */
export async function migrationStatus(env: Env = process.env): Promise<MigrationStatus> {
  const database = openDatabase(loadConfig(env).databaseUrl);
  try {
    return await database.migrationStatus();
  } finally {
    await database.close();
  }
}

/** `orloj migrate`: applies pending migrations and exits. */
export async function migrate(env: Env = process.env): Promise<string[]> {
  const config = loadConfig(env);
  const database = openDatabase(config.databaseUrl);
  try {
    return await database.migrate();
  } finally {
    await database.close();
  }
}
