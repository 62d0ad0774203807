/**
 * The process's configuration, read once from the environment. The
 * defaults (CONFIG_DEFAULTS, the only place a default lives), the Config type,
 * one section reader per concern and the checks across them; every problem is
 * reported at once in a ConfigError (README.md, "Configuration").
 */
import fs from 'node:fs';
import path from 'node:path';
import crypto from 'node:crypto';
import os from 'node:os';
import { formatDuration, parseDuration } from '../core/duration.js';
import type { ContainerLimits } from '../domain/container-policy.js';
import { LATE_AFTER_MS, UPTIME_WINDOW_MS } from '../domain/health.js';
import { JOB_TIMEOUTS } from '../domain/payload.js';
import { makePrivateDir, tightenFile } from './data-dir.js';
import { readTlsFiles, type TlsFiles } from './tls.js';

export type { TlsFiles } from './tls.js';
export type { ContainerLimits } from '../domain/container-policy.js';

const SECOND = 1_000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;
const MIB = 1024 * 1024;

/**
 * The default of every timing and cap of orloj's jobs and roles, defined here
 * only. loadConfig falls back to these when a variable is unset (the README
 * lists them); a role built without a Config (tests, embedding) falls back to
 * the same values by reading them from here, never from a copy. Durations in
 * milliseconds.
 */
export const CONFIG_DEFAULTS = deepFreeze({
  jobs: {
    /** A payload's `timeout` when it names none, and the most it may name (the domain's rule, domain/payload.ts). */
    ...JOB_TIMEOUTS,
    /** CONTAINER_MAX_TIMEOUT: the most this installation allows. */
    containerInstallationMaxTimeoutMs: 30 * MINUTE,
  },
  scheduler: {
    /** SCHEDULER_TICK: how often the leader scans. */
    tickMs: 1 * SECOND,
    /** LEADER_LEASE_TTL. */
    leaderLeaseTtlMs: 15 * SECOND,
    /** JOB_LEASE_TTL: a RUNNING job whose runner has not renewed for this long is presumed lost (runners renew at a third of it). */
    jobLeaseTtlMs: 30 * SECOND,
    /** JOB_QUEUE_TIMEOUT: a QUEUED job not started for this long is handed out again as a new attempt. */
    queueTimeoutMs: 10 * MINUTE,
    /** A QUEUED job whose message the bus never confirmed for this long is handed out again. */
    unsentTimeoutMs: 15 * SECOND,
    /** BUILD_TIMEOUT. */
    buildTimeoutMs: 5 * MINUTE,
    /** Runner attempts per job before a SYSTEM failure becomes final. */
    maxAttempts: 3,
    /** Rows each leader step handles per batch. */
    batchSize: 500,
    /** Shortest real-time pause between two leader passes. */
    passGapMs: 50,
    /** SCHEDULER_MAX_QUEUED. */
    maxQueued: 2_000,
    /** How often a stop request for a running job of a terminated workflow is repeated. */
    stopResendMs: 30 * SECOND,
    /** Runner events held (and applied in one transaction) at once. */
    eventPrefetch: 128,
    /** Refusals of one job handed out again from `jobs.dead` before it is left to the queue timeout. */
    maxRefusals: 20,
    /** The real-time pause before a refused job is handed out again: doubles per refusal of the same job, up to the cap. */
    refusalPauseMs: 250,
    refusalPauseMaxMs: 10 * SECOND,
    /** Jobs whose refusals the leader counts at once (the count starts over beyond it). */
    refusalsTracked: 10_000,
  },
  runner: {
    /** RUNNER_CONCURRENCY. */
    concurrency: 4,
    /** Image builds at once. */
    buildConcurrency: 2,
    /** RUNNER_SHUTDOWN_GRACE: how long stop() waits for running jobs before it aborts them. */
    shutdownGraceMs: 30 * SECOND,
    /** How long aborted jobs get to report their result. */
    abortGraceMs: 10 * SECOND,
    /** How long, and for how many jobs at most, a runner remembers a job.stop so that a late job.run of it is refused. */
    stoppedJobsTtlMs: 1 * HOUR,
    stoppedJobsTracked: 10_000,
  },
  notifier: {
    /** NOTIFIER_POLL_INTERVAL: the outbox relay's pause when the outbox had nothing more to publish. */
    pollMs: 500,
    /** Outbox events the relay claims per round. */
    relayBatchSize: 200,
    /** How long a relay's claim keeps other relays off an event (a relay that dies mid-publish). */
    relayClaimMs: 30 * SECOND,
    /** How long an applied event's identity is remembered for deduplication, and how often old ones are forgotten. */
    dedupeRetentionMs: 7 * DAY,
    dedupePurgeEveryMs: 1 * HOUR,
    /** Domain events a notifier holds unacknowledged, and so the most it applies in one transaction. */
    prefetch: 16,
  },
  bus: {
    /** BUS_PREFIX: prepended to every queue and exchange name. */
    prefix: 'orloj.',
    /** Deliveries before a message is dead-lettered; part of the queue's declaration, so every process must agree. */
    maxDeliveries: 5,
    /** Unacknowledged messages a consumer holds, unless it asks for more. */
    prefetch: 1,
    /** How far an envelope's issue time may lie in the future (clock skew between hosts). */
    envelopeClockSkewMs: 30 * SECOND,
    /** The longest life an envelope may claim. */
    envelopeMaxTtlMs: 1 * HOUR,
    /** The life an envelope claims when its publisher names none. */
    envelopeTtlMs: 5 * MINUTE,
    /** Envelope ids a verifier remembers against replays; beyond it the oldest are forgotten. */
    envelopeSeenIds: 100_000,
    /** RabbitMQ: how long connecting, and each operation on the open connection, may take. */
    amqpConnectTimeoutMs: 30 * SECOND,
    amqpOperationTimeoutMs: 30 * SECOND,
    /** RabbitMQ: the socket's timeout while the connection is being established. */
    amqpSocketTimeoutMs: 10 * SECOND,
  },
  liveTail: {
    /** How often a tail reads the store for lines while the bus is quiet, and while it is not connected. */
    pollMs: 250,
    busPollMs: 2 * SECOND,
    /** How often a tail checks whether its job has ended. */
    statusMs: 1 * SECOND,
    /** SSE comment lines that keep idle connections open through proxies. */
    keepAliveMs: 15 * SECOND,
    /** How long a tail waits for a missing sequence number before it moves past it. */
    holeGraceMs: 2 * SECOND,
    /** LIVE_TAIL_HOLD_AFTER_END: how long a stream stays open after `end` for the client to close it, and the most it may be set to. */
    holdAfterEndMs: 60 * SECOND,
    holdAfterEndMaxMs: 60 * SECOND,
  },
  logs: {
    /** How often a runner's log sink reports its counts. */
    sinkCountIntervalMs: 1 * SECOND,
    /** A runner's log sink: most lines in one log.batch, and the size (text plus ~80 bytes a line) at which a batch is cut. */
    sinkBatchLines: 5_000,
    sinkBatchBytes: 1 * MIB,
    /** A runner's log sink: lines and bytes held over all attempts before writes wait (back-pressure on the containers' output). */
    sinkBufferLines: 10_000,
    sinkBufferBytes: 16 * MIB,
    /** log-ingest: batches handled at once (its consumer's prefetch). */
    ingestPrefetch: 16,
    /** log-ingest: most lines written in one transaction when batches of one attempt queue up and are merged. */
    ingestMaxMergeLines: 50_000,
    /** On stop, log-ingest keeps consuming until no batch arrived for this long (and at most ingestDrainMs). */
    ingestQuietMs: 250,
    /** How long log-ingest's stop() waits for batches in hand to be stored. */
    ingestDrainMs: 5 * SECOND,
  },
  containers: {
    /** Each call to the container runtime's API. */
    apiTimeoutMs: 30 * SECOND,
    /** How long a run waits for the rest of a container's output after it exits. */
    logDrainIdleMs: 10 * SECOND,
    /** How often a long run pings the runtime. */
    healthCheckMs: 5 * SECOND,
    /** How long pulling an image may take. */
    pullTimeoutMs: 5 * MINUTE,
    /** A container's memory limit when its payload names none (capped by CONTAINER_MAX_MEMORY_MB), and its process limit. */
    memoryMb: 512,
    pidsLimit: 256,
    /** CONTAINER_SCRATCH_MB: the size of each writable tmpfs (/tmp, /var/tmp, /run) over the read-only root. */
    scratchMb: 256,
  },
  /** The domain's health rule (domain/health.ts). */
  health: { lateAfterMs: LATE_AFTER_MS, uptimeWindowMs: UPTIME_WINDOW_MS },
  http: {
    /** Longer than a load balancer's idle timeout (often 60 s), so the proxy closes idle connections first. */
    keepAliveTimeoutMs: 65 * SECOND,
    /** The longest a request (a log download included) may take. */
    requestTimeoutMs: 5 * MINUTE,
    /** How long /readyz waits for each check. */
    readinessCheckTimeoutMs: 2 * SECOND,
    /** How often the api deletes expired idempotency records and dead sessions. */
    maintenanceEveryMs: 10 * MINUTE,
    /** Sessions expired longer ago than this are deleted. */
    sessionPurgeAfterMs: 1 * DAY,
    /** How long an Idempotency-Key is remembered. */
    idempotencyTtlMs: 1 * DAY,
    /** How far in the future a CSRF token's issue time may lie (clock skew between replicas). */
    csrfFutureSkewMs: 1 * MINUTE,
    /** Sessions opened (decrypted) kept in memory per process. */
    maxOpenedSessions: 10_000,
    /** Clients (keys) a rate limiter tracks before it evicts idle ones. */
    rateLimitKeys: 100_000,
    /** A nudge to the scheduler leader expires after this long (the tick finds the work anyway). */
    schedulerWakeTtlMs: 1 * MINUTE,
    /** HTTP_MAX_CONNECTIONS: open connections an api process accepts; more are closed at once. */
    maxConnections: 4_096,
    /** HTTP_MAX_CONNECTIONS_PER_CLIENT: open connections from one client address (peers in TRUSTED_PROXIES are not counted). */
    maxConnectionsPerClient: 256,
    /** HTTP_HEADERS_TIMEOUT: how long a connection may take to send a request's headers (the first request's included). */
    headersTimeoutMs: 10 * SECOND,
    /** HTTP_MAX_HEAVY_REQUESTS: requests that read and send large answers (pages, searches, downloads) served at once; the rest wait. */
    maxHeavyRequests: 8,
    /** HTTP_MAX_HEAVY_REQUESTS_PER_USER: the same, per user. */
    maxHeavyRequestsPerUser: 2,
    /** How long a heavy request waits for its turn before it is answered 503. */
    heavyWaitMs: 30 * SECOND,
    /** LIVE_TAIL_MAX_STREAMS_PER_USER: live-tail streams one user may hold open in an api process, from any address. */
    maxStreamsPerUser: 10,
  },
  database: {
    /** DB_POOL_SIZE: PostgreSQL connections per process. */
    poolSize: 10,
    /** How long SQLite waits for another writer's lock before it fails a statement. */
    sqliteBusyTimeoutMs: 5 * SECOND,
    /** The same wait for `orloj backup`, which copies the whole database under the lock. */
    sqliteBackupBusyTimeoutMs: 10 * SECOND,
    /** How often SQLite refreshes its planner statistics. */
    sqliteOptimizeEveryMs: 1 * MINUTE,
    /** Prepared SQLite statements kept per connection. */
    sqliteStatementCacheSize: 500,
    /**
     * SQLITE_READ_WORKERS: threads reading for heavy requests (log pages and
     * searches, workflow pages), each with a connection of its own; the default
     * (0) is one less than the CPUs the process may use, at least 1 and at most 4.
     */
    sqliteReadWorkers: 0,
  },
  tenants: {
    /** MAX_WORKFLOWS_PER_USER. */
    maxWorkflowsPerUser: 500,
    /** MAX_ACTIVE_JOBS_PER_USER: an optional hard limit per user; 0 is none (the fair hand-out shares the runners). */
    maxActiveJobsPerUser: 0,
  },
  retention: {
    /** RETENTION_JOBS. */
    jobsMs: 90 * DAY,
    /** RETENTION_JOB_LOGS. */
    jobLogsMs: 30 * DAY,
    /** RETENTION_NOTIFICATIONS. */
    notificationsMs: 90 * DAY,
    /** RETENTION_KEEP_JOBS. */
    keepJobs: 20,
    /** RETENTION_INTERVAL. */
    intervalMs: 1 * HOUR,
    /** RETENTION_BATCH_SIZE. */
    batchSize: 500,
    /** Real-time pause between two delete statements. */
    pauseMs: 20,
    /** How often a replica looks whether a sweep is due (and whether it leads). */
    checkEveryMs: 1 * MINUTE,
  },
});

type DeepReadonly<T> = { readonly [K in keyof T]: T[K] extends object ? DeepReadonly<T[K]> : T[K] };

function deepFreeze<T extends object>(o: T): DeepReadonly<T> {
  for (const v of Object.values(o)) if (typeof v === 'object' && v !== null) deepFreeze(v as object);
  return Object.freeze(o) as DeepReadonly<T>;
}

/**
 * Configuration, read once from environment variables, validated, frozen.
 * Every variable is documented in the README with its default. Nothing else
 * in orloj reads process.env.
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

class Reader {
  readonly problems: string[] = [];
  constructor(private readonly env: Env) {}

  raw(name: string): string | undefined {
    const v = this.env[name];
    return v === undefined || v.trim() === '' ? undefined : v.trim();
  }

  string(name: string, fallback: string): string {
    return this.raw(name) ?? fallback;
  }

  int(name: string, fallback: number, min: number, max: number): number {
    const v = this.raw(name);
    if (v === undefined) return fallback;
    const n = Number(v);
    if (!/^\d+$/.test(v) || n < min || n > max) {
      this.problems.push(`${name} must be an integer from ${min} to ${max} (got "${v}")`);
      return fallback;
    }
    return n;
  }

  bool(name: string, fallback: boolean): boolean {
    const v = this.raw(name)?.toLowerCase();
    if (v === undefined) return fallback;
    if (['true', '1', 'yes', 'on'].includes(v)) return true;
    if (['false', '0', 'no', 'off'].includes(v)) return false;
    this.problems.push(`${name} must be true or false (got "${v}")`);
    return fallback;
  }

  /** A duration such as "30s" or "10m", in milliseconds. */
  duration(name: string, fallbackMs: number): number {
    const v = this.raw(name);
    if (v === undefined) return fallbackMs;
    const ms = parseDuration(v);
    if (ms === undefined) {
      this.problems.push(`${name} must be a duration such as "7d", "12h" or "30m" (got "${v}")`);
      return fallbackMs;
    }
    return ms;
  }

  oneOf<T extends string>(name: string, allowed: readonly T[], fallback: T): T {
    const v = this.raw(name);
    if (v === undefined) return fallback;
    const match = allowed.find((a) => a.toLowerCase() === v.toLowerCase());
    if (!match) this.problems.push(`${name} must be one of ${allowed.join(', ')} (got "${v}")`);
    return match ?? fallback;
  }

  list(name: string): string[] {
    return (this.raw(name) ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean);
  }

  /** A secret from NAME or from the file named by NAME_FILE. */
  secret(name: string): string | undefined {
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

function normalizeOrigin(value: string, name: string, problems: string[]): string {
  try {
    const u = new URL(value);
    if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error();
    return u.origin;
  } catch {
    problems.push(`${name} must hold http(s) origins such as https://orloj.example.com (got "${value}")`);
    return value;
  }
}

/** A host-name pattern: `*`, `name.example`, or `.example.com` (the domain and its subdomains); lower-cased. */
function normalizeHostName(value: string, name: string, problems: string[]): string {
  const v = value.toLowerCase().replace(/\.$/, '');
  if (v === '*' || /^\.?[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?(?:\.[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?)*$/.test(v)) return v;
  problems.push(`${name} must hold host names such as orloj.example.com or .example.com, without scheme or port, or * (got "${value}")`);
  return v;
}

export function loadConfig(env: Env = process.env): Config {
  const r = new Reader(env);
  // Default process identities: hostname and pid collide between containers, this does not.
  const instanceSuffix = crypto.randomBytes(4).toString('hex');
  const port = r.int('PORT', 8080, 0, 65535);
  const dataDir = path.resolve(r.string('DATA_DIR', './data'));
  const serverHostUrl = normalizeOrigin(r.string('SERVER_HOST_URL', `http://localhost:${port}`), 'SERVER_HOST_URL', r.problems);
  const sameSite = r.oneOf('SERVER_SAME_SITE_MODE', ['Lax', 'Strict', 'None'] as const, 'Lax');
  const secureCookies = serverHostUrl.startsWith('https:');
  if (sameSite === 'None' && !secureCookies) {
    r.problems.push('SERVER_SAME_SITE_MODE=None needs an https SERVER_HOST_URL (browsers drop such cookies otherwise)');
  }
  const sessionTtlMs = r.duration('SESSION_EXPIRY', 7 * DAY);
  const csrfTtlMs = r.duration('CSRF_EXPIRY', 7 * DAY);
  if (csrfTtlMs > sessionTtlMs) r.problems.push('CSRF_EXPIRY must not be longer than SESSION_EXPIRY');

  const config: Config = {
    port,
    host: r.string('HOST', '127.0.0.1'),
    dataDir,
    dashboardDir: r.raw('DASHBOARD_DIR') === undefined ? undefined : path.resolve(r.raw('DASHBOARD_DIR')!),
    databaseUrl: r.string('DATABASE_URL', `sqlite:${path.join(dataDir, 'orloj.db')}`),
    dbPoolSize: r.int('DB_POOL_SIZE', CONFIG_DEFAULTS.database.poolSize, 1, 1000),
    sqliteReadWorkers: r.int('SQLITE_READ_WORKERS', CONFIG_DEFAULTS.database.sqliteReadWorkers, 0, 64) || defaultReadWorkers(),
    listCacheBytes: r.int('LIST_CACHE_MB', 32, 0, 65_536) * 1024 * 1024,
    serverHostUrl,
    allowedOrigins: r.list('SERVER_ALLOWED_ORIGINS').map((o) => normalizeOrigin(o, 'SERVER_ALLOWED_ORIGINS', r.problems)),
    allowedHosts: r.list('SERVER_ALLOWED_HOSTS').map((h) => normalizeHostName(h, 'SERVER_ALLOWED_HOSTS', r.problems)),
    sameSite,
    secureCookies,
    sessionTtlMs,
    csrfTtlMs,
    sessionSecret: r.secret('SESSION_SECRET'),
    csrfSecret: r.secret('CSRF_HMAC_SECRET'),
    logLevel: r.oneOf('LOG_LEVEL', ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const, 'info'),
    rateLimit: readRateLimit(r),
    trustedProxies: r.list('TRUSTED_PROXIES'),
    http: readHttp(r),
    registration: r.oneOf('REGISTRATION', ['open', 'closed', 'invitation'] as const, 'open'),
    busUrl: r.string('BUS_URL', 'memory:'),
    busPrefix: r.string('BUS_PREFIX', CONFIG_DEFAULTS.bus.prefix),
    busTls: readTlsFiles('BUS_TLS', (name) => r.raw(name), r.problems),
    databaseTls: readTlsFiles('DATABASE_TLS', (name) => r.raw(name), r.problems),
    scheduler: readScheduler(r, instanceSuffix),
    runner: readRunner(r, instanceSuffix),
    notifier: readNotifier(r),
    liveTailHoldAfterEndMs: r.duration('LIVE_TAIL_HOLD_AFTER_END', CONFIG_DEFAULTS.liveTail.holdAfterEndMs),
    containers: readContainers(r),
    tenants: readTenants(r),
    opsPort: r.int('OPS_PORT', 9464, 0, 65535),
    retention: readRetention(r),
    clock: parseClock(r),
  };
  checkValues(config, r.problems);
  checkTlsUse(config, r.problems);
  if (r.problems.length) throw new ConfigError(r.problems);
  return Object.freeze(config);
}

function readRateLimit(r: Reader): Config['rateLimit'] {
  return {
    enabled: r.bool('RATE_LIMIT_ENABLED', true),
    authPerMinute: r.int('RATE_LIMIT_AUTH_PER_MINUTE', 10, 1, 1_000_000),
    authBurst: r.int('RATE_LIMIT_AUTH_BURST', 5, 0, 1_000_000),
    apiPerSecond: r.int('RATE_LIMIT_API_PER_SECOND', 20, 1, 1_000_000),
    apiBurst: r.int('RATE_LIMIT_API_BURST', 40, 0, 1_000_000),
  };
}

function readHttp(r: Reader): Config['http'] {
  const d = CONFIG_DEFAULTS.http;
  return {
    maxConnections: r.int('HTTP_MAX_CONNECTIONS', d.maxConnections, 1, 1_000_000),
    maxConnectionsPerClient: r.int('HTTP_MAX_CONNECTIONS_PER_CLIENT', d.maxConnectionsPerClient, 1, 1_000_000),
    headersTimeoutMs: boundedDuration(r, 'HTTP_HEADERS_TIMEOUT', d.headersTimeoutMs, SECOND, MINUTE),
    maxHeavyRequests: r.int('HTTP_MAX_HEAVY_REQUESTS', d.maxHeavyRequests, 1, 10_000),
    maxHeavyRequestsPerUser: r.int('HTTP_MAX_HEAVY_REQUESTS_PER_USER', d.maxHeavyRequestsPerUser, 1, 10_000),
    maxStreamsPerUser: r.int('LIVE_TAIL_MAX_STREAMS_PER_USER', d.maxStreamsPerUser, 1, 100_000),
  };
}

/** A duration from `min` to `max`. */
function boundedDuration(r: Reader, name: string, fallbackMs: number, minMs: number, maxMs: number): number {
  const ms = r.duration(name, fallbackMs);
  if (ms < minMs || ms > maxMs) {
    r.problems.push(`${name} must be from ${formatDuration(minMs)} to ${formatDuration(maxMs)} (got "${r.raw(name)}")`);
    return fallbackMs;
  }
  return ms;
}

/** SQLITE_READ_WORKERS' default: a core left to the event loop, at least one reader, at most four. */
function defaultReadWorkers(): number {
  return Math.max(1, Math.min(4, os.availableParallelism() - 1));
}

function readScheduler(r: Reader, instanceSuffix: string): Config['scheduler'] {
  return {
    // Unique per process even in containers (pid 1, shared hostnames); the lease holder adds an instance suffix anyway.
    id: r.string('SCHEDULER_ID', `scheduler-${os.hostname()}-${process.pid}-${instanceSuffix}`),
    tickMs: r.duration('SCHEDULER_TICK', CONFIG_DEFAULTS.scheduler.tickMs),
    leaderLeaseTtlMs: r.duration('LEADER_LEASE_TTL', CONFIG_DEFAULTS.scheduler.leaderLeaseTtlMs),
    jobLeaseTtlMs: r.duration('JOB_LEASE_TTL', CONFIG_DEFAULTS.scheduler.jobLeaseTtlMs),
    queueTimeoutMs: r.duration('JOB_QUEUE_TIMEOUT', CONFIG_DEFAULTS.scheduler.queueTimeoutMs),
    buildTimeoutMs: r.duration('BUILD_TIMEOUT', CONFIG_DEFAULTS.scheduler.buildTimeoutMs),
    maxQueued: r.int('SCHEDULER_MAX_QUEUED', CONFIG_DEFAULTS.scheduler.maxQueued, 1, 1_000_000),
  };
}

function readRunner(r: Reader, instanceSuffix: string): Config['runner'] {
  return {
    // Unique per process by default: a runner only ever removes containers carrying its own id (docs/runners.md).
    id: r.string('RUNNER_ID', `runner-${os.hostname()}-${instanceSuffix}`),
    concurrency: r.int('RUNNER_CONCURRENCY', CONFIG_DEFAULTS.runner.concurrency, 1, 1024),
    allowTargets: r.list('RUNNER_ALLOW_TARGETS'),
    denyTargets: r.list('RUNNER_DENY_TARGETS'),
    dockerHost: r.raw('DOCKER_HOST') ?? (fs.existsSync('/var/run/docker.sock') ? 'unix:///var/run/docker.sock' : undefined),
    shutdownGraceMs: r.duration('RUNNER_SHUTDOWN_GRACE', CONFIG_DEFAULTS.runner.shutdownGraceMs),
    containerScratchMb: r.int('CONTAINER_SCRATCH_MB', CONFIG_DEFAULTS.containers.scratchMb, 1, 65_536),
    containerUserns: r.oneOf('CONTAINER_USERNS', ['auto', 'host'] as const, 'auto'),
  };
}

function readNotifier(r: Reader): Config['notifier'] {
  return {
    pollMs: r.duration('NOTIFIER_POLL_INTERVAL', CONFIG_DEFAULTS.notifier.pollMs),
  };
}

function readContainers(r: Reader): Config['containers'] {
  return {
    registries: registryList(r),
    networkEnabled: r.bool('CONTAINER_NETWORK_ENABLED', false),
    maxMemoryMb: r.int('CONTAINER_MAX_MEMORY_MB', 1024, 6, 65_536),
    maxCpus: decimal(r, 'CONTAINER_MAX_CPUS', 1, 64),
    maxTimeoutMs: r.duration('CONTAINER_MAX_TIMEOUT', CONFIG_DEFAULTS.jobs.containerInstallationMaxTimeoutMs),
    maxLogLines: r.int('JOB_LOG_MAX_LINES', 100_000, 1, 100_000_000),
    maxLogBytes: r.int('JOB_LOG_MAX_MB', 32, 1, 1_048_576) * 1024 * 1024,
  };
}

function readTenants(r: Reader): Config['tenants'] {
  return {
    maxWorkflowsPerUser: r.int('MAX_WORKFLOWS_PER_USER', CONFIG_DEFAULTS.tenants.maxWorkflowsPerUser, 1, 10_000_000),
    maxActiveJobsPerUser: r.int('MAX_ACTIVE_JOBS_PER_USER', CONFIG_DEFAULTS.tenants.maxActiveJobsPerUser, 0, 1_000_000),
  };
}

function readRetention(r: Reader): Config['retention'] {
  return {
    jobsMs: retentionAge(r, 'RETENTION_JOBS', CONFIG_DEFAULTS.retention.jobsMs),
    jobLogsMs: retentionAge(r, 'RETENTION_JOB_LOGS', CONFIG_DEFAULTS.retention.jobLogsMs),
    notificationsMs: retentionAge(r, 'RETENTION_NOTIFICATIONS', CONFIG_DEFAULTS.retention.notificationsMs),
    keepJobs: r.int('RETENTION_KEEP_JOBS', CONFIG_DEFAULTS.retention.keepJobs, 0, 10_000),
    intervalMs: r.duration('RETENTION_INTERVAL', CONFIG_DEFAULTS.retention.intervalMs),
    batchSize: r.int('RETENTION_BATCH_SIZE', CONFIG_DEFAULTS.retention.batchSize, 1, 100_000),
  };
}

/** Checks across the values read, after the reading. */
function checkValues(config: Config, problems: string[]): void {
  if (config.containers.maxTimeoutMs > CONFIG_DEFAULTS.jobs.containerTimeoutMaxMs) problems.push(`CONTAINER_MAX_TIMEOUT must be at most ${formatDuration(CONFIG_DEFAULTS.jobs.containerTimeoutMaxMs)}`);
  if (config.liveTailHoldAfterEndMs > CONFIG_DEFAULTS.liveTail.holdAfterEndMaxMs) {
    problems.push(`LIVE_TAIL_HOLD_AFTER_END must be at most ${formatDuration(CONFIG_DEFAULTS.liveTail.holdAfterEndMaxMs)}`);
  }
  if (!/^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$/.test(config.runner.id)) {
    problems.push(`RUNNER_ID must be 1-128 letters, digits or _ . : - (got "${config.runner.id}")`);
  }
  if (!/^(memory:|amqps?:\/\/)/.test(config.busUrl)) problems.push('BUS_URL must be memory: or amqp://…');
  const url = config.databaseUrl;
  if (!url.startsWith('sqlite:') && !url.startsWith('postgres://') && !url.startsWith('postgresql://')) {
    problems.push('DATABASE_URL must start with sqlite: or postgres://');
  }
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

/** A positive decimal number such as 0.5 or 2. */
function decimal(r: Reader, name: string, fallback: number, max: number): number {
  const v = r.raw(name);
  if (v === undefined) return fallback;
  const n = Number(v);
  if (!/^\d+(?:\.\d+)?$/.test(v) || n <= 0 || n > max) {
    r.problems.push(`${name} must be a number above 0 and at most ${max} (got "${v}")`);
    return fallback;
  }
  return n;
}

// A registry host name, or host:port, as the first component of an image reference names it.
const REGISTRY_ENTRY = /^(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*(?::\d{1,5})?$|^\[[0-9a-f:.]+\](?::\d{1,5})?$/;

function registryList(r: Reader): string[] {
  const list = r.raw('CONTAINER_REGISTRIES') === undefined ? ['docker.io'] : r.list('CONTAINER_REGISTRIES').map((s) => s.toLowerCase());
  for (const entry of list) {
    if (!REGISTRY_ENTRY.test(entry)) {
      r.problems.push(`CONTAINER_REGISTRIES must hold registry hosts such as docker.io or registry.example.com:5000 (got "${entry}")`);
    }
  }
  return list;
}

/** How long rows are kept: a duration of at least an hour, or `off` (kept forever). */
function retentionAge(r: Reader, name: string, fallbackMs: number): number | undefined {
  if (r.raw(name)?.toLowerCase() === 'off') return undefined;
  const ms = r.duration(name, fallbackMs);
  if (ms < HOUR) {
    r.problems.push(`${name} must be at least 1h, or off (got "${r.raw(name)}")`);
    return undefined;
  }
  return ms;
}

function parseClock(r: Reader): Config['clock'] {
  const v = r.raw('ORLOJ_CLOCK');
  if (v === undefined || v === 'system') return { kind: 'system' };
  const m = /^accelerated:(\d+):(\d+(?:\.\d+)?)$/.exec(v);
  if (!m || Number(m[2]) <= 0) {
    r.problems.push(`ORLOJ_CLOCK must be system or accelerated:<origin-ms>:<speed> (got "${v}")`);
    return { kind: 'system' };
  }
  return { kind: 'accelerated', origin: Number(m[1]), speed: Number(m[2]) };
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
