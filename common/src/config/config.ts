/**
 * The process's configuration, read once from the environment: the Config
 * type, each section built from the declared settings (settings.ts, where every
 * variable's parser, bounds, default and documentation live) and the checks
 * across them; every problem is reported at once in a ConfigError naming the
 * variable (docs/operations.md, "Settings").
 */
import fs from 'node:fs';
import path from 'node:path';
import crypto from 'node:crypto';
import os from 'node:os';
import type { ContainerLimits } from '../domain/container-policy.js';
import { makePrivateDir, tightenFile } from './data-dir.js';
import { SETTINGS, type SettingName } from './settings.js';
import type { SettingValue } from './setting-kinds.js';
import { readTlsFiles, type TlsFiles } from './tls.js';

export type { TlsFiles } from './tls.js';
export type { ContainerLimits } from '../domain/container-policy.js';

/**
 * Configuration, read once from environment variables, validated, frozen,
 * arranged in the sections the roles take. Each value comes from its row in
 * SETTINGS, whose type the compiler holds the field to; the rows document
 * the variables (docs/operations.md, "Settings"). Nothing else in orloj reads
 * process.env.
 */
export interface Config {
  readonly port: number;
  readonly host: string;
  readonly dataDir: string;
  /** The built dashboard to serve at `/`; undefined: the one built in the dashboard package, if any. */
  readonly dashboardDir: string | undefined;
  readonly databaseUrl: string;
  readonly dbPoolSize: number;
  /** Threads running SQLite's heavy reads off the event loop (docs/adr/0009). */
  readonly sqliteReadWorkers: number;
  /** Bytes of rendered workflow list pages the api keeps (0: none). */
  readonly listCacheBytes: number;
  readonly serverHostUrl: string;
  readonly allowedOrigins: readonly string[];
  /**
   * Host names served besides SERVER_HOST_URL's, localhost and IP literals
   * (SERVER_ALLOWED_HOSTS): exact names, `.example.com` for a domain and its
   * subdomains, or `*` for any Host (no DNS-rebinding protection).
   */
  readonly allowedHosts: readonly string[];
  readonly sameSite: 'Lax' | 'Strict' | 'None';
  readonly secureCookies: boolean;
  readonly sessionTtlMs: number;
  readonly csrfTtlMs: number;
  /** Undefined until resolveSecrets() fills them from the environment or DATA_DIR. */
  readonly sessionSecret: string | undefined;
  readonly csrfSecret: string | undefined;
  readonly logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  readonly rateLimit: {
    readonly enabled: boolean;
    readonly authPerMinute: number;
    readonly authBurst: number;
    readonly apiPerSecond: number;
    readonly apiBurst: number;
  };
  readonly trustedProxies: readonly string[];
  /** The api's own limits on connections and on costly requests (docs/security.md, "Availability"). */
  readonly http: {
    readonly maxConnections: number;
    readonly maxConnectionsPerClient: number;
    readonly headersTimeoutMs: number;
    readonly maxHeavyRequests: number;
    readonly maxHeavyRequestsPerUser: number;
    readonly maxStreamsPerUser: number;
  };
  /**
   * Who may create an account (REGISTRATION): anyone (`open`), nobody
   * (`closed`), or whoever holds an invitation minted by `orloj invite`
   * (`invitation`). The first account of an empty installation may always be created.
   */
  readonly registration: 'open' | 'closed' | 'invitation';
  /** `memory:` (in-process, one process only) or `amqp://…`. */
  readonly busUrl: string;
  /** Prepended to every queue and exchange name on the broker. */
  readonly busPrefix: string;
  /** BUS_BATCH: sign what a role publishes together once (ADR 0024). */
  readonly busBatch: boolean;
  /** BUS_TLS_*: mutual TLS to the broker (amqps://); undefined: node's default trust, no client certificate. */
  readonly busTls: TlsFiles | undefined;
  /** DATABASE_TLS_*: mutual TLS to PostgreSQL; undefined: whatever DATABASE_URL's ssl parameters say. */
  readonly databaseTls: TlsFiles | undefined;
  readonly scheduler: {
    /** This replica's name in the leader lease. */
    readonly id: string;
    readonly tickMs: number;
    readonly leaderLeaseTtlMs: number;
    readonly jobLeaseTtlMs: number;
    readonly queueTimeoutMs: number;
    readonly buildTimeoutMs: number;
    /** Most jobs handed out and not yet started; beyond it the leader waits for the runners. */
    readonly maxQueued: number;
  };
  readonly runner: {
    /** Names this runner; its containers carry it, and leftovers with it are removed at start. */
    readonly id: string;
    readonly concurrency: number;
    readonly allowTargets: readonly string[];
    readonly denyTargets: readonly string[];
    /** Docker Engine API endpoint (Docker or Podman); undefined: CONTAINER jobs fail with SYSTEM_ERROR. */
    readonly dockerHost: string | undefined;
    readonly shutdownGraceMs: number;
    /** CONTAINER_SCRATCH_MB: each writable tmpfs of a container (its root file system is read-only). */
    readonly containerScratchMb: number;
    /** CONTAINER_USERNS: `auto` runs each container in a user namespace of its own where the runtime offers one (Podman); `host` does not. */
    readonly containerUserns: 'auto' | 'host';
  };
  readonly notifier: {
    /** How often the outbox relay looks for unpublished domain events. */
    readonly pollMs: number;
  };
  /**
   * How long a live tail's event stream stays open after `end` (with
   * keep-alive comments) when the client does not close it (docs/api.md, "Live tail").
   */
  readonly liveTailHoldAfterEndMs: number;
  /** What tenants' CONTAINER workflows may ask for (docs/security.md). */
  readonly containers: ContainerLimits;
  /** Per-user shares of the installation (docs/security.md). */
  readonly tenants: {
    /** Most workflows one user may own (terminated ones included until deleted). */
    readonly maxWorkflowsPerUser: number;
    /** Most jobs of one user handed to the runners (QUEUED or RUNNING) at once. */
    readonly maxActiveJobsPerUser: number;
  };
  /** Port of /livez, /readyz and /metrics in a process without the api role (on HOST; 0: any free port). */
  readonly opsPort: number;
  /**
   * What the scheduler leader prunes, and how (docs/operations.md, "Retention").
   * Ages in milliseconds; undefined keeps the rows forever.
   */
  readonly retention: {
    readonly jobsMs: number | undefined;
    readonly jobLogsMs: number | undefined;
    readonly notificationsMs: number | undefined;
    /** The newest jobs of every workflow, kept whatever their age. */
    readonly keepJobs: number;
    readonly intervalMs: number;
    /** Rows per delete statement. */
    readonly batchSize: number;
  };
  /** Test hook: `accelerated:<origin-ms>:<speed>` runs every role on a faster clock. */
  readonly clock: { readonly kind: 'system' } | { readonly kind: 'accelerated'; readonly origin: number; readonly speed: number };
}

export type ResolvedConfig = Config & { readonly sessionSecret: string; readonly csrfSecret: string };

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid configuration:\n  - ${problems.join('\n  - ')}`);
    this.name = 'ConfigError';
  }
}

type Env = Record<string, string | undefined>;

/** Reads declared settings only: a name missing from SETTINGS is a compile error. */
class Reader {
  readonly problems: string[] = [];
  constructor(private readonly env: Env) {}

  raw(name: SettingName): string | undefined {
    const v = this.env[name];
    return v === undefined || v.trim() === '' ? undefined : v.trim();
  }

  /** The variable's value by its row's parser, or the row's default when it is unset or refused. */
  get<K extends SettingName>(name: K): SettingValue<(typeof SETTINGS)[K]> {
    const setting = SETTINGS[name] as unknown as { default: SettingValue<(typeof SETTINGS)[K]>; parse: (t: string, report: (reason: string, got?: string | null) => void) => SettingValue<(typeof SETTINGS)[K]> | undefined };
    const text = this.raw(name);
    if (text === undefined) return setting.default;
    let refused = false;
    const value = setting.parse(text, (reason, got) => {
      refused = true;
      this.problems.push(`${name} ${reason}${got === null ? '' : ` (got "${got ?? text}")`}`);
    });
    return refused ? setting.default : (value as SettingValue<(typeof SETTINGS)[K]>);
  }

  /** A secret from NAME or from the file named by NAME_FILE. */
  secret(name: 'SESSION_SECRET' | 'CSRF_HMAC_SECRET'): string | undefined {
    const direct = this.raw(name);
    const file = this.raw(`${name}_FILE`);
    if (direct && file) this.problems.push(`set either ${name} or ${name}_FILE, not both`);
    let value = direct;
    if (!value && file) {
      try {
        value = fs.readFileSync(file, 'utf8').trim();
      } catch {
        this.problems.push(`${name}_FILE names a file that cannot be read: ${file}`);
      }
    }
    if (value !== undefined && value.length < 32) this.problems.push(`${name} must be at least 32 characters`);
    return value;
  }
}

export function loadConfig(env: Env = process.env): Config {
  const r = new Reader(env);
  // Default process identities: hostname and pid collide between containers, this does not.
  const instanceSuffix = crypto.randomBytes(4).toString('hex');
  const port = r.get('PORT');
  const dataDir = path.resolve(r.get('DATA_DIR'));
  const serverHostUrl = r.get('SERVER_HOST_URL') ?? `http://localhost:${port}`;
  const sameSite = r.get('SERVER_SAME_SITE_MODE');
  const secureCookies = serverHostUrl.startsWith('https:');
  if (sameSite === 'None' && !secureCookies) {
    r.problems.push('SERVER_SAME_SITE_MODE=None needs an https SERVER_HOST_URL (browsers drop such cookies otherwise)');
  }
  const sessionTtlMs = r.get('SESSION_EXPIRY');
  const csrfTtlMs = r.get('CSRF_EXPIRY');
  if (csrfTtlMs > sessionTtlMs) r.problems.push('CSRF_EXPIRY must not be longer than SESSION_EXPIRY');
  const dashboardDir = r.get('DASHBOARD_DIR');

  const config: Config = {
    port,
    host: r.get('HOST'),
    dataDir,
    dashboardDir: dashboardDir === undefined ? undefined : path.resolve(dashboardDir),
    databaseUrl: r.get('DATABASE_URL') ?? `sqlite:${path.join(dataDir, 'orloj.db')}`,
    dbPoolSize: r.get('DB_POOL_SIZE'),
    sqliteReadWorkers: r.get('SQLITE_READ_WORKERS') || defaultReadWorkers(),
    listCacheBytes: r.get('LIST_CACHE_MB') * 1024 * 1024,
    serverHostUrl,
    allowedOrigins: r.get('SERVER_ALLOWED_ORIGINS'),
    allowedHosts: r.get('SERVER_ALLOWED_HOSTS'),
    sameSite,
    secureCookies,
    sessionTtlMs,
    csrfTtlMs,
    sessionSecret: r.secret('SESSION_SECRET'),
    csrfSecret: r.secret('CSRF_HMAC_SECRET'),
    logLevel: r.get('LOG_LEVEL'),
    rateLimit: readRateLimit(r),
    trustedProxies: r.get('TRUSTED_PROXIES'),
    http: readHttp(r),
    registration: r.get('REGISTRATION'),
    busUrl: r.get('BUS_URL'),
    busPrefix: r.get('BUS_PREFIX'),
    busBatch: r.get('BUS_BATCH'),
    busTls: readTlsFiles('BUS_TLS', (name) => r.raw(name as SettingName), r.problems),
    databaseTls: readTlsFiles('DATABASE_TLS', (name) => r.raw(name as SettingName), r.problems),
    scheduler: readScheduler(r, instanceSuffix),
    runner: readRunner(r, instanceSuffix),
    notifier: { pollMs: r.get('NOTIFIER_POLL_INTERVAL') },
    liveTailHoldAfterEndMs: r.get('LIVE_TAIL_HOLD_AFTER_END'),
    containers: readContainers(r),
    tenants: { maxWorkflowsPerUser: r.get('MAX_WORKFLOWS_PER_USER'), maxActiveJobsPerUser: r.get('MAX_ACTIVE_JOBS_PER_USER') },
    opsPort: r.get('OPS_PORT'),
    retention: readRetention(r),
    clock: parseClock(r.get('ORLOJ_CLOCK')),
  };
  checkTlsUse(config, r.problems);
  if (r.problems.length) throw new ConfigError(r.problems);
  return Object.freeze(config);
}

function readRateLimit(r: Reader): Config['rateLimit'] {
  return {
    enabled: r.get('RATE_LIMIT_ENABLED'),
    authPerMinute: r.get('RATE_LIMIT_AUTH_PER_MINUTE'),
    authBurst: r.get('RATE_LIMIT_AUTH_BURST'),
    apiPerSecond: r.get('RATE_LIMIT_API_PER_SECOND'),
    apiBurst: r.get('RATE_LIMIT_API_BURST'),
  };
}

function readHttp(r: Reader): Config['http'] {
  return {
    maxConnections: r.get('HTTP_MAX_CONNECTIONS'),
    maxConnectionsPerClient: r.get('HTTP_MAX_CONNECTIONS_PER_CLIENT'),
    headersTimeoutMs: r.get('HTTP_HEADERS_TIMEOUT'),
    maxHeavyRequests: r.get('HTTP_MAX_HEAVY_REQUESTS'),
    maxHeavyRequestsPerUser: r.get('HTTP_MAX_HEAVY_REQUESTS_PER_USER'),
    maxStreamsPerUser: r.get('LIVE_TAIL_MAX_STREAMS_PER_USER'),
  };
}

/** SQLITE_READ_WORKERS' default: a core left to the event loop, at least one reader, at most four. */
function defaultReadWorkers(): number {
  return Math.max(1, Math.min(4, os.availableParallelism() - 1));
}

function readScheduler(r: Reader, instanceSuffix: string): Config['scheduler'] {
  return {
    // Unique per process even in containers (pid 1, shared hostnames); the lease holder adds an instance suffix anyway.
    id: r.get('SCHEDULER_ID') ?? `scheduler-${os.hostname()}-${process.pid}-${instanceSuffix}`,
    tickMs: r.get('SCHEDULER_TICK'),
    leaderLeaseTtlMs: r.get('LEADER_LEASE_TTL'),
    jobLeaseTtlMs: r.get('JOB_LEASE_TTL'),
    queueTimeoutMs: r.get('JOB_QUEUE_TIMEOUT'),
    buildTimeoutMs: r.get('BUILD_TIMEOUT'),
    maxQueued: r.get('SCHEDULER_MAX_QUEUED'),
  };
}

function readRunner(r: Reader, instanceSuffix: string): Config['runner'] {
  return {
    // Unique per process by default: a runner only ever removes containers carrying its own id (docs/runners.md).
    id: r.get('RUNNER_ID') ?? `runner-${os.hostname()}-${instanceSuffix}`,
    concurrency: r.get('RUNNER_CONCURRENCY'),
    allowTargets: r.get('RUNNER_ALLOW_TARGETS'),
    denyTargets: r.get('RUNNER_DENY_TARGETS'),
    dockerHost: r.get('DOCKER_HOST') ?? (fs.existsSync('/var/run/docker.sock') ? 'unix:///var/run/docker.sock' : undefined),
    shutdownGraceMs: r.get('RUNNER_SHUTDOWN_GRACE'),
    containerScratchMb: r.get('CONTAINER_SCRATCH_MB'),
    containerUserns: r.get('CONTAINER_USERNS'),
  };
}

function readContainers(r: Reader): Config['containers'] {
  return {
    registries: r.get('CONTAINER_REGISTRIES'),
    networkEnabled: r.get('CONTAINER_NETWORK_ENABLED'),
    maxMemoryMb: r.get('CONTAINER_MAX_MEMORY_MB'),
    maxCpus: r.get('CONTAINER_MAX_CPUS'),
    maxTimeoutMs: r.get('CONTAINER_MAX_TIMEOUT'),
    maxLogLines: r.get('JOB_LOG_MAX_LINES'),
    maxLogBytes: r.get('JOB_LOG_MAX_MB') * 1024 * 1024,
  };
}

function readRetention(r: Reader): Config['retention'] {
  return {
    jobsMs: r.get('RETENTION_JOBS'),
    jobLogsMs: r.get('RETENTION_JOB_LOGS'),
    notificationsMs: r.get('RETENTION_NOTIFICATIONS'),
    keepJobs: r.get('RETENTION_KEEP_JOBS'),
    intervalMs: r.get('RETENTION_INTERVAL'),
    batchSize: r.get('RETENTION_BATCH_SIZE'),
  };
}

/** TLS files only make sense with a server to present them to. */
function checkTlsUse(config: Config, problems: string[]): void {
  if (config.busTls && !config.busUrl.startsWith('amqps://')) {
    problems.push('BUS_TLS_CA_FILE, BUS_TLS_CERT_FILE and BUS_TLS_KEY_FILE need an amqps:// BUS_URL');
  }
  if (config.databaseTls) {
    if (config.databaseUrl.startsWith('sqlite:')) {
      problems.push('DATABASE_TLS_CA_FILE, DATABASE_TLS_CERT_FILE and DATABASE_TLS_KEY_FILE need a postgres:// DATABASE_URL');
    } else if (/[?&](ssl|sslmode|sslcert|sslkey|sslrootcert)=/.test(config.databaseUrl)) {
      // the URL's parameters would silently win over the files (pg merges the URL last)
      problems.push('DATABASE_TLS_* and the ssl parameters of DATABASE_URL (sslmode, sslrootcert, sslcert, sslkey) are two ways to say the same: use one');
    }
  }
}

/** ORLOJ_CLOCK, checked by its row. */
function parseClock(value: string): Config['clock'] {
  const m = /^accelerated:(\d+):(\d+(?:\.\d+)?)$/.exec(value);
  return m ? { kind: 'accelerated', origin: Number(m[1]), speed: Number(m[2]) } : { kind: 'system' };
}

/**
 * Fills missing secrets. The embedded default needs no setup: a secret that is
 * not configured is generated once and kept in DATA_DIR/secrets.json (mode 0600),
 * so sessions survive restarts.
 */
export function resolveSecrets(config: Config): ResolvedConfig {
  if (config.sessionSecret && config.csrfSecret) return config as ResolvedConfig;
  const file = path.join(config.dataDir, 'secrets.json');
  let stored: { sessionSecret?: string; csrfSecret?: string } = {};
  if (fs.existsSync(file)) stored = JSON.parse(fs.readFileSync(file, 'utf8')) as typeof stored;
  const next = {
    sessionSecret: stored.sessionSecret ?? crypto.randomBytes(32).toString('base64url'),
    csrfSecret: stored.csrfSecret ?? crypto.randomBytes(32).toString('base64url'),
  };
  if (next.sessionSecret !== stored.sessionSecret || next.csrfSecret !== stored.csrfSecret) {
    makePrivateDir(config.dataDir);
    fs.writeFileSync(file, JSON.stringify(next, null, 2) + '\n', { mode: 0o600 });
  }
  // writeFileSync's mode applies only when it creates the file.
  tightenFile(file);
  return Object.freeze({
    ...config,
    sessionSecret: config.sessionSecret ?? next.sessionSecret,
    csrfSecret: config.csrfSecret ?? next.csrfSecret,
  });
}
