import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { ensureKeyDir } from '@orloj/common/envelope';
import { profileArgs, REPO_ROOT } from './child.js';

/**
 * orloj as separate processes, one role each (`orloj start --roles <role>`,
 * TypeScript sources via tsx), on PostgreSQL and RabbitMQ: the distributed
 * topology of deploy/, on this machine. They share a DATA_DIR holding the
 * signing keys (the operator's step: distributed roles never make their own).
 */

export const DISTRIBUTED_ROLES = ['api', 'scheduler', 'runners', 'log-ingest', 'notifier'] as const;
export type DistributedRole = (typeof DISTRIBUTED_ROLES)[number];

export interface DistributedOrloj {
  /** The api's base URL. */
  url: string;
  /** pid of each role's process. */
  pids: Record<DistributedRole, number>;
  /** application_name of every PostgreSQL connection the roles open (to find their backends). */
  applicationName: string;
  /** pids of the PostgreSQL backends serving the roles right now. */
  backendPids(): Promise<number[]>;
  settings: Record<string, string>;
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  const s = net.createServer();
  s.listen(0, '127.0.0.1');
  await once(s, 'listening');
  const { port } = s.address() as net.AddressInfo;
  await new Promise((r) => s.close(r));
  return port;
}

async function ready(port: number, child: ChildProcess, output: () => string, role: string): Promise<void> {
  // Generous: five tsx processes start at once on a loaded machine.
  const deadline = Date.now() + 180_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`${role} exited early:\n${output()}`);
    try {
      const res = await fetch(`http://127.0.0.1:${port}/readyz`);
      if (res.ok) return;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`${role} was not ready in time:\n${output()}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** `databaseUrl` selects its schema through `options=-c search_path=…` (bench/lib/postgres.ts); application_name is added to it. */
export async function startDistributedOrloj(databaseUrl: string, amqpUrl: string, env: Record<string, string> = {}): Promise<DistributedOrloj> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'orloj-bench-dist-'));
  await ensureKeyDir(dataDir);
  const tag = crypto.randomBytes(4).toString('hex');
  const applicationName = `orloj-bench-${tag}`;
  const url = new URL(databaseUrl);
  url.searchParams.set('options', `${url.searchParams.get('options') ?? ''} -c application_name=${applicationName}`.trim());
  const settings: Record<string, string> = {
    NODE_ENV: 'production',
    HOST: '127.0.0.1',
    BUS_PREFIX: `bench-${tag}`,
    RATE_LIMIT_ENABLED: 'false',
    LOG_LEVEL: 'warn',
    RUNNER_SHUTDOWN_GRACE: '2s',
    MAX_ACTIVE_JOBS_PER_USER: '1000000',
    // One user's traffic from one address: the per-user and per-address shares (docs/security.md, "Availability") out of the way.
    HTTP_MAX_CONNECTIONS_PER_CLIENT: '1000000',
    HTTP_MAX_HEAVY_REQUESTS_PER_USER: '10000',
    LIVE_TAIL_MAX_STREAMS_PER_USER: '100000',
    MAX_WORKFLOWS_PER_USER: '10000000',
    ...env,
  };
  const children: Array<{ role: DistributedRole; child: ChildProcess; port: number; output: string[] }> = [];
  const stop = async () => {
    // Reverse order of the embedded server: api first, store users last.
    await Promise.all(
      children.map(async ({ child }) => {
        if (child.exitCode !== null || child.signalCode !== null) return;
        const exited = once(child, 'exit');
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
        await exited;
        clearTimeout(timer);
      }),
    );
    fs.rmSync(dataDir, { recursive: true, force: true });
  };
  try {
    for (const role of DISTRIBUTED_ROLES) {
      const port = await freePort();
      const child = spawn(process.execPath, ['--import', 'tsx', '--conditions=orloj-src', ...profileArgs(), path.join(REPO_ROOT, 'server/src/bin.ts'), 'start', '--roles', role], {
        cwd: REPO_ROOT,
        env: {
          PATH: process.env.PATH ?? '',
          HOME: process.env.HOME ?? os.homedir(),
          // e.g. "--require ./bench/tools/count-pg-statements.cjs" (statements per role, docs/benchmarks.md)
          ...(process.env.BENCH_ROLE_NODE_OPTIONS ? { NODE_OPTIONS: process.env.BENCH_ROLE_NODE_OPTIONS } : {}),
          ...(process.env.ORLOJ_PG_COUNT_DIR ? { ORLOJ_PG_COUNT_DIR: process.env.ORLOJ_PG_COUNT_DIR } : {}),
          ...settings,
          DATABASE_URL: url.toString(),
          BUS_URL: amqpUrl,
          DATA_DIR: dataDir,
          ...(role === 'api' ? { PORT: String(port), OPS_PORT: '0' } : { PORT: '0', OPS_PORT: String(port) }),
          SESSION_SECRET: crypto.randomBytes(32).toString('base64url'),
          CSRF_HMAC_SECRET: crypto.randomBytes(32).toString('base64url'),
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      const output: string[] = [];
      const keep = (d: Buffer) => {
        output.push(d.toString());
        if (output.length > 200) output.shift();
      };
      child.stdout!.on('data', keep);
      child.stderr!.on('data', keep);
      children.push({ role, child, port, output });
    }
    await Promise.all(children.map((c) => ready(c.port, c.child, () => c.output.join(''), c.role)));
  } catch (err) {
    await stop();
    throw err;
  }
  return {
    url: `http://127.0.0.1:${children.find((c) => c.role === 'api')!.port}`,
    pids: Object.fromEntries(children.map((c) => [c.role, c.child.pid!])) as Record<DistributedRole, number>,
    applicationName,
    settings,
    async backendPids() {
      const c = new pg.Client({ connectionString: databaseUrl });
      await c.connect();
      try {
        const { rows } = await c.query<{ pid: number }>('select pid from pg_stat_activity where application_name = $1', [applicationName]);
        return rows.map((r) => r.pid);
      } finally {
        await c.end();
      }
    },
    stop,
  };
}
