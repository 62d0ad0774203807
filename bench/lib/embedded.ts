import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startServer, type ServerProcess } from './child.js';
import { registerUser } from './orloj.js';

/**
 * The embedded orloj (api + scheduler + runners in one process, as `orloj
 * start` runs it) in a child process: bench/servers/orloj-embedded.ts.
 */

/** One reading of the orloj process's resource use (bench/servers/orloj-embedded.ts answers `usage` with it). */
export interface ProcessUsage {
  /** Date.now() of the reading. */
  at: number;
  /** process.cpuUsage(), microseconds since the process started. */
  cpuUser: number;
  cpuSystem: number;
  rss: number;
  /** Peak RSS of the process so far (bytes, getrusage). */
  maxRss: number;
  heapUsed: number;
  /** Cumulative event-loop idle/active time (ms), performance.eventLoopUtilization(). */
  eluIdle: number;
  eluActive: number;
  /** Event-loop delay since the previous reading (ms; 10 ms sampling resolution). */
  delayP50: number;
  delayP99: number;
  delayMax: number;
}

export interface UsageBetween {
  /** Average CPU between the readings, % of one core. */
  cpuPercent: number;
  /** Share of the time the event loop was busy (0-1). */
  eventLoopUtilization: number;
  /** Of the later reading. */
  maxRss: number;
  rss: number;
  delayP99: number;
  delayMax: number;
}

export function usageBetween(a: ProcessUsage, b: ProcessUsage): UsageBetween {
  const wallMs = Math.max(1, b.at - a.at);
  const cpuMs = (b.cpuUser + b.cpuSystem - a.cpuUser - a.cpuSystem) / 1000;
  const active = b.eluActive - a.eluActive;
  const idle = b.eluIdle - a.eluIdle;
  return {
    cpuPercent: (cpuMs / wallMs) * 100,
    eventLoopUtilization: active + idle > 0 ? active / (active + idle) : 0,
    maxRss: b.maxRss,
    rss: b.rss,
    delayP99: b.delayP99,
    delayMax: b.delayMax,
  };
}

export interface EmbeddedOrloj extends ServerProcess {
  usage(): Promise<ProcessUsage>;
  registerUser(): Promise<{ email: string; cookie: string }>;
  /** The environment it was started with, secrets left out (for reports). */
  settings: Record<string, string>;
}

/**
 * Starts the embedded orloj over the database: BUS_URL=memory:, real clock,
 * rate limits off, LOG_LEVEL=warn (errors still show; per-job info lines are
 * not written). `env` adds or overrides variables (RUNNER_CONCURRENCY…).
 */
export async function startEmbeddedOrloj(databaseUrl: string, env: Record<string, string> = {}): Promise<EmbeddedOrloj> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'orloj-bench-data-'));
  const settings: Record<string, string> = {
    BUS_URL: 'memory:',
    HOST: '127.0.0.1',
    PORT: '0',
    RATE_LIMIT_ENABLED: 'false',
    LOG_LEVEL: 'warn',
    RUNNER_SHUTDOWN_GRACE: '2s',
    // The benchmarks measure throughput of one user's workflows with locally built images.
    CONTAINER_REGISTRIES: 'docker.io,localhost',
    MAX_ACTIVE_JOBS_PER_USER: '1000000',
    // One user's traffic from one address: the per-user and per-address shares (docs/security.md, "Availability") out of the way.
    HTTP_MAX_CONNECTIONS_PER_CLIENT: '1000000',
    HTTP_MAX_HEAVY_REQUESTS_PER_USER: '10000',
    LIVE_TAIL_MAX_STREAMS_PER_USER: '100000',
    MAX_WORKFLOWS_PER_USER: '10000000',
    JOB_LOG_MAX_LINES: '100000000',
    JOB_LOG_MAX_MB: '1048576',
    ...env,
  };
  let server: ServerProcess;
  try {
    server = await startServer('orloj-embedded', {
      ...settings,
      DATABASE_URL: databaseUrl,
      DATA_DIR: dataDir,
      SESSION_SECRET: crypto.randomBytes(32).toString('base64url'),
      CSRF_HMAC_SECRET: crypto.randomBytes(32).toString('base64url'),
    });
  } catch (err) {
    fs.rmSync(dataDir, { recursive: true, force: true });
    throw err;
  }
  return {
    ...server,
    settings,
    usage: () => server.call<ProcessUsage>('usage'),
    registerUser: () => registerUser(server.url),
    async stop() {
      await server.stop();
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
