import { AcceleratedClock, systemClock, type Clock } from '@orloj/common/core';
import { dataDirWarnings, loadConfig, resolveSecrets, type ResolvedConfig } from '@orloj/common/config';
import { createLogger, RequestContext, type Logger } from '@orloj/common/logging';
import { ensureKeyDir, keyEnvName, keyFingerprint, loadKeysFromEnv, PRODUCER_ROLES, requireRoleKeys, roleBus, type RoleKeys } from '@orloj/common/envelope';
import { createBus } from '@orloj/common/bus';
import { Health, InstrumentedBus, OpsServer, OrlojMetrics } from '@orloj/common/observability';
import type { DatabaseHandle, MigrationStatus, Store } from '@orloj/common/store';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
// The runners role has no database (docs/runners.md): the store (with better-sqlite3
// and pg) and the roles that use it are imported only when a process runs one of them,
// so `orloj start --roles runners` never loads them (server/test/runners-process.test.ts).
import { BusLogSink, ContainerExecutor, HttpCheckExecutor, ImagePolicy, Runner } from '@orloj/runners';
import type { Role } from './roles.js';
import { roleMetrics } from './observability.js';
import { stopInOrder } from './shutdown.js';

export interface Service {
  start(): Promise<unknown>;
  stop(): Promise<void>;
}

export interface RunningOrloj {
  config: ResolvedConfig;
  /** Port the api listens on, when the api role runs. */
  port: number | undefined;
  /** Port of /livez, /readyz and /metrics in a process without the api role. */
  opsPort: number | undefined;
  /** The built dashboard the api serves at `/`, when it serves one. */
  dashboardDir: string | undefined;
  /** The process's metrics registry. */
  metrics: OrlojMetrics;
  /** The root logger: stdout, one JSON object per line. */
  logger: Logger;
  stop(): Promise<void>;
}

type Env = Record<string, string | undefined>;

export function clockFrom(config: ResolvedConfig): Clock {
  return config.clock.kind === 'accelerated' ? new AcceleratedClock(config.clock.origin, config.clock.speed) : systemClock;
}

/**
 * Signing keys: from ORLOJ_<ROLE>_PRIVATE_KEY / _PUBLIC_KEY (or _FILE) when any
 * is set — the distributed topology, where each process holds only its own
 * private key — otherwise from DATA_DIR/keys. Keys are generated there only
 * where that cannot split an installation: on the in-process bus, or in a
 * process that is an installation by itself (api, scheduler and runners). A process of a distributed installation never
 * makes keys of its own (nobody else would know them, and it would reject, or
 * be rejected for, every message); it refuses to start instead, naming the
 * variable it lacks (requireRoleKeys).
 */
/** A process with these roles is an installation by itself (it schedules, runs and serves); others may join it through DATA_DIR/keys. */
const SELF_CONTAINED: readonly Role[] = ['api', 'scheduler', 'runners'];

async function loadKeys(config: ResolvedConfig, env: Env, roles: ReadonlySet<Role>): Promise<RoleKeys> {
  const configured = PRODUCER_ROLES.some((role) =>
    (['private', 'public'] as const).some((kind) => env[keyEnvName(role, kind)] || env[`${keyEnvName(role, kind)}_FILE`]),
  );
  if (configured) return loadKeysFromEnv(env);
  const generate = config.busUrl.startsWith('memory:') || SELF_CONTAINED.every((r) => roles.has(r));
  return ensureKeyDir(config.dataDir, { generate });
}

/**
 * The dashboard the api serves: DASHBOARD_DIR, else the build output of the
 * dashboard package (`npm run build` makes it). Without one the api serves the
 * API alone, and says so.
 */
export function dashboardDir(config: ResolvedConfig, logger: Logger, isDashboardDir: (dir: string) => boolean): string | undefined {
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

/** What the role starters share: opened once by startOrloj, in this order. */
interface Boot {
  config: ResolvedConfig;
  roles: ReadonlySet<Role>;
  keys: RoleKeys;
  clock: Clock;
  logger: Logger;
  metrics: OrlojMetrics;
  health: Health;
  requestContext: RequestContext;
  bus: InstrumentedBus;
  /** Undefined in a runners-only process: the runners role has no database. */
  store: Store | undefined;
  /** Stopped in reverse order at shutdown. */
  started: Service[];
}

/**
 * The store, imported only here (and in the role starters) so a runners-only
 * process never loads better-sqlite3 or pg. Migrates before anything uses it;
 * `opened` hears of the handle first, so a failed migration still closes it.
 */
async function openStore(config: ResolvedConfig, logger: Logger, health: Health, opened: (database: DatabaseHandle) => void): Promise<Store> {
  const { logCheckpointTrouble, openDatabase, Store } = await import('@orloj/common/store');
  const database = openDatabase(config.databaseUrl, { poolSize: config.dbPoolSize, tls: config.databaseTls, readWorkers: config.sqliteReadWorkers });
  opened(database);
  if (database.checkpointer) logCheckpointTrouble(database.checkpointer, logger);
  const applied = await database.migrate();
  if (applied.length) logger.info({ migrations: applied }, 'database migrated');
  const store = Store.fromHandle(database);
  health.add({ name: 'store', check: () => store.ping() });
  return store;
}

async function startScheduler(boot: Boot, store: Store): Promise<void> {
  const { config, keys, clock, logger, metrics, requestContext, bus, started } = boot;
  const { RetentionSweeper, Scheduler } = await import('@orloj/scheduler');
  const log = logger.child({ role: 'scheduler' });
  const scheduler = new Scheduler({
    store,
    bus: roleBus({ bus, batch: config.busBatch, role: 'scheduler', keys, clock, logger: log, metrics, requestContext }),
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
      // 0: no hard limit (the default); the fair hand-out shares the runners (ADR 0014).
      maxActivePerUser: config.tenants.maxActiveJobsPerUser || undefined,
    },
  });
  await scheduler.start();
  log.info({ replicaId: config.scheduler.id }, 'scheduler started');
  started.push(scheduler);
  roleMetrics.scheduler(metrics, scheduler, store, bus);
  // Pruning old rows is the leader's: one process at a time, in either topology.
  const retention = new RetentionSweeper({ store, clock, logger: log, mayRun: () => scheduler.isLeader, config: config.retention });
  await retention.start();
  started.push(retention);
}

async function startLogIngest(boot: Boot, store: Store): Promise<void> {
  const { config, keys, clock, logger, metrics, requestContext, bus, started } = boot;
  const { LogIngester } = await import('@orloj/log-ingest');
  const log = logger.child({ role: 'log-ingest' });
  // LogIngester, Notifier and Runner bind their role themselves: the root logger, so no line says it twice.
  const ingester = new LogIngester({
    store,
    bus: roleBus({ bus, batch: config.busBatch, role: 'log-ingest', keys, clock, logger: log, metrics, requestContext }),
    clock,
    logger,
    maxLinesPerJob: config.containers.maxLogLines,
  });
  await ingester.start();
  started.push(ingester);
  roleMetrics.logIngest(metrics, ingester);
}

async function startNotifier(boot: Boot, store: Store): Promise<void> {
  const { config, keys, clock, logger, metrics, requestContext, bus, started } = boot;
  const { Notifier } = await import('@orloj/notifier');
  const log = logger.child({ role: 'notifier' });
  const notifier = new Notifier({ store, bus: roleBus({ bus, batch: config.busBatch, role: 'notifier', keys, clock, logger: log, metrics, requestContext }), clock, logger, pollMs: config.notifier.pollMs, metrics });
  await notifier.start();
  started.push(notifier);
  roleMetrics.notifier(metrics, store);
}

async function startRunners(boot: Boot): Promise<void> {
  const { config, roles, keys, clock, logger, metrics, requestContext, bus, started } = boot;
  const log = logger.child({ role: 'runners' });
  const containers = config.runner.dockerHost
    ? new ContainerExecutor({ dockerHost: config.runner.dockerHost, logger: log, clock, scratchMb: config.runner.containerScratchMb, userns: config.runner.containerUserns })
    : undefined;
  if (!containers) log.warn('no DOCKER_HOST and no /var/run/docker.sock: CONTAINER jobs will fail with SYSTEM_ERROR');
  else if (!(await containers.ping())) log.warn({ dockerHost: config.runner.dockerHost }, 'the container runtime does not answer; CONTAINER jobs fail until it does');
  const runnerBus = roleBus({ bus, batch: config.busBatch, role: 'runners', keys, clock, logger: log, metrics, requestContext });
  // Captured container lines go to log-ingest in batches (docs/logs.md). On the
  // in-process bus nobody outside this process could take them: without a
  // log-ingest here they would pile up in memory, so they are only counted.
  const inProcessOnly = config.busUrl.startsWith('memory:') && !roles.has('log-ingest');
  if (inProcessOnly) log.warn('BUS_URL=memory: without the log-ingest role in this process: container log lines are not kept');
  const logSink = inProcessOnly ? undefined : new BusLogSink({ bus: runnerBus, logger: log, clock });
  const runner = new Runner({
    bus: runnerBus,
    logger,
    clock,
    runnerId: config.runner.id,
    // requireRoleKeys made sure a runner has the scheduler's public key.
    ...(keys.publicKeys.scheduler ? { installationId: keyFingerprint(keys.publicKeys.scheduler) } : {}),
    http: new HttpCheckExecutor({ logger: log, allowTargets: [...config.runner.allowTargets], denyTargets: [...config.runner.denyTargets], clock }),
    ...(containers ? { containers } : {}),
    imagePolicy: new ImagePolicy({ limits: config.containers, allowTargets: [...config.runner.allowTargets], denyTargets: [...config.runner.denyTargets] }),
    concurrency: config.runner.concurrency,
    leaseTtlMs: config.scheduler.jobLeaseTtlMs,
    shutdownGraceMs: config.runner.shutdownGraceMs,
    ...(logSink ? { logSink } : {}),
  });
  await runner.start();
  started.push(runner);
  // A runner that cannot verify the scheduler's messages takes no work: not ready, and says why.
  boot.health.add({ name: 'keys', check: () => runner.keyProblem ?? true });
  roleMetrics.runners(metrics, runner, logSink);
}

/** Starts the api; answers its port and the dashboard it serves. */
async function startApi(boot: Boot, store: Store): Promise<{ port: number; dashboardDir: string | undefined }> {
  const { config, keys, clock, logger, metrics, health, requestContext, bus, started } = boot;
  const { ApiServer, isDashboardDir } = await import('@orloj/api');
  const log = logger.child({ role: 'api' });
  const served = dashboardDir(config, log, isDashboardDir);
  const api = new ApiServer({
    store,
    config,
    clock,
    logger: log,
    bus: roleBus({ bus, batch: config.busBatch, role: 'api', keys, clock, logger, metrics, requestContext }),
    metrics,
    health,
    requestContext,
    dashboardDir: served,
  });
  const port = (await api.start()).port;
  started.push(api);
  roleMetrics.api(metrics, api);
  return { port, dashboardDir: served };
}

/**
 * The roles, in start order. Log-ingest comes before the runners: stopped after
 * them, so it takes the lines they flush at shutdown. Answers what startApi does.
 */
async function startRoles(boot: Boot): Promise<Awaited<ReturnType<typeof startApi>> | undefined> {
  const { roles, store } = boot;
  if (roles.has('scheduler') && store) await startScheduler(boot, store);
  if (roles.has('log-ingest') && store) await startLogIngest(boot, store);
  if (roles.has('notifier') && store) await startNotifier(boot, store);
  if (roles.has('runners')) await startRunners(boot);
  return roles.has('api') && store ? await startApi(boot, store) : undefined;
}

/** Observability (docs/operations.md): one registry and one readiness per process. */
function observability(lifecycle: { started: boolean }): { metrics: OrlojMetrics; health: Health } {
  const metrics = new OrlojMetrics();
  const health = new Health();
  health.add({ name: 'roles', check: () => (lifecycle.started ? true : 'starting or stopping') });
  metrics.gauge('orloj_ready', 'Whether this process is ready (1: what /readyz answers 200 for) or not (0).', async () => ((await health.readiness()).ready ? 1 : 0));
  return { metrics, health };
}

/**
 * The composition root: opens what the chosen roles need (runners get no
 * database), and starts the roles. Shutdown runs in reverse: HTTP first, then
 * runners (flushing their log lines), the notifier, log-ingest, the scheduler,
 * the bus and the store.
 */
/**
 * `requestContext`: the one a given `logger` was made with (createLogger's
 * `context`), so its lines carry request ids; by default the process makes its own.
 */
export async function startOrloj(options: { roles: Role[]; env?: Env; clock?: Clock; logger?: Logger; requestContext?: RequestContext }): Promise<RunningOrloj> {
  const env = options.env ?? process.env;
  const config = resolveSecrets(loadConfig(env));
  const requestContext = options.requestContext ?? new RequestContext();
  const logger = options.logger ?? createLogger({ level: config.logLevel, context: requestContext });
  // Said before anything is opened: the operator should fix it (docs/security.md).
  for (const warning of dataDirWarnings(config.dataDir)) logger.warn({ dataDir: config.dataDir }, warning);
  const clock = options.clock ?? clockFrom(config);
  const roles = new Set(options.roles);
  const started: Service[] = [];
  let database: DatabaseHandle | undefined;
  let bus: InstrumentedBus | undefined;
  let port: number | undefined;
  let opsPort: number | undefined;
  let dashboard: string | undefined;
  const lifecycle = { started: false };
  const { metrics, health } = observability(lifecycle);

  const closeAll = async () => {
    lifecycle.started = false;
    await stopInOrder(
      [...[...started].reverse(), { stop: async () => bus?.close() }, { stop: async () => database?.close() }],
      (err) => logger.error({ err }, 'a part of the process failed to stop; stopping the rest'),
    );
  };

  try {
    // First: a process that could not sign or verify its messages must not touch the store or the bus.
    const keys = await loadKeys(config, env, roles);
    requireRoleKeys(keys, roles);
    // The other roles answer probes and scrapes on OPS_PORT (the api on its own port), from
    // the start: live while the store and the broker are still being reached, not ready yet.
    if (!roles.has('api')) {
      const ops = new OpsServer({ host: config.host, port: config.opsPort, health, metrics, logger });
      opsPort = (await ops.start()).port;
      started.push(ops);
    }
    health.add({ name: 'bus', check: () => (bus?.connected ? true : 'not connected to the message broker') });
    let store: Store | undefined;
    if ([...roles].some((r) => r !== 'runners')) {
      store = await openStore(config, logger, health, (opened) => (database = opened));
    }
    if (config.busUrl.startsWith('memory:') && roles.size < 3 && !roles.has('api')) {
      logger.warn('BUS_URL=memory: connects only the roles inside this process; use amqp:// to run roles in separate processes');
    }
    // Named in the broker's connection list after the roles and the process.
    const connectionName = `orloj ${[...roles].join(',')} pid ${process.pid} on ${os.hostname()}`;
    bus = new InstrumentedBus(await createBus(config.busUrl, { logger, prefix: config.busPrefix, connectionName, tls: config.busTls }), metrics);
    roleMetrics.common(metrics, bus);
    const api = await startRoles({ config, roles, keys, clock, logger, metrics, health, requestContext, bus, store, started });
    port = api?.port;
    dashboard = api?.dashboardDir;
    lifecycle.started = true;
  } catch (err) {
    await closeAll().catch(() => undefined);
    throw err;
  }
  let stopping: Promise<void> | undefined;
  return {
    config,
    port,
    opsPort,
    dashboardDir: dashboard,
    metrics,
    logger,
    stop() {
      stopping ??= closeAll().then(() => logger.info('orloj stopped'));
      return stopping;
    },
  };
}

/** `orloj migrate --check`: what `orloj migrate` would do, without doing it. */
export async function migrationStatus(env: Env = process.env): Promise<MigrationStatus> {
  const { openDatabase } = await import('@orloj/common/store');
  const config = loadConfig(env);
  const database = openDatabase(config.databaseUrl, { tls: config.databaseTls, upkeep: false });
  try {
    return await database.migrationStatus();
  } finally {
    await database.close();
  }
}

/** `orloj migrate`: applies pending migrations and exits. */
export async function migrate(env: Env = process.env): Promise<string[]> {
  const { openDatabase } = await import('@orloj/common/store');
  const config = loadConfig(env);
  const database = openDatabase(config.databaseUrl, { tls: config.databaseTls, upkeep: false });
  try {
    return await database.migrate();
  } finally {
    await database.close();
  }
}
