import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startServer, type ServerProcess } from './child.js';
import { createBenchSchema, DEFAULT_BENCH_DATABASE_URL, redactUrl } from './postgres.js';

export type Engine = 'sqlite' | 'postgres';

export interface BenchDatabase {
  engine: Engine;
  url: string;
  /** Where it lives, for reports (no password). */
  where: string;
  drop(): Promise<void>;
}

/** A fresh database: a temp SQLite file, or a new schema in BENCH_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/orloj_test). */
export async function createBenchDatabase(engine: Engine): Promise<BenchDatabase> {
  if (engine === 'sqlite') {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'orloj-bench-'));
    const file = path.join(dir, 'orloj.db');
    return {
      engine,
      url: `sqlite:${file}`,
      where: 'a temp file',
      async drop() {
        fs.rmSync(dir, { recursive: true, force: true });
      },
    };
  }
  const base = process.env.BENCH_DATABASE_URL?.trim() || DEFAULT_BENCH_DATABASE_URL;
  const schema = await createBenchSchema(base);
  return { engine, url: schema.url, where: `fresh schema ${schema.schema} in ${redactUrl(base)}, dropped after`, drop: schema.drop };
}

export interface OrlojServer extends ServerProcess {
  /** `SQLite 3.x` / `PostgreSQL 15.x` */
  engineVersion: string;
  poolSize: number;
  /** Registers a fresh user through HTTP; returns the Cookie header a browser would then send. */
  registerUser(): Promise<{ email: string; cookie: string }>;
}

/**
 * Starts the orloj api (bench/servers/orloj.ts) in a child process over the
 * database, production-like except: rate limits off, logging silent. `env`
 * adds or overrides variables (e.g. DB_POOL_SIZE).
 */
export async function startOrloj(databaseUrl: string, env: Record<string, string> = {}): Promise<OrlojServer> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'orloj-bench-data-'));
  let server: ServerProcess;
  let info: { engine: string; poolSize: number };
  try {
    server = await startServer('orloj', {
      DATABASE_URL: databaseUrl,
      HOST: '127.0.0.1',
      PORT: '0',
      DATA_DIR: dataDir,
      RATE_LIMIT_ENABLED: 'false',
      LOG_LEVEL: 'silent',
      // One user's traffic from one address: the per-user and per-address shares (docs/security.md, "Availability") out of the way.
      HTTP_MAX_CONNECTIONS_PER_CLIENT: '1000000',
      HTTP_MAX_HEAVY_REQUESTS_PER_USER: '10000',
      LIVE_TAIL_MAX_STREAMS_PER_USER: '100000',
      SESSION_SECRET: crypto.randomBytes(32).toString('base64url'),
      CSRF_HMAC_SECRET: crypto.randomBytes(32).toString('base64url'),
      ...env,
    });
  } catch (err) {
    fs.rmSync(dataDir, { recursive: true, force: true });
    throw err;
  }
  try {
    info = await server.call<{ engine: string; poolSize: number }>('info');
  } catch (err) {
    await server.stop();
    fs.rmSync(dataDir, { recursive: true, force: true });
    throw err;
  }
  return {
    ...server,
    engineVersion: info.engine,
    poolSize: info.poolSize,
    async stop() {
      await server.stop();
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
    registerUser: () => registerUser(server.url),
  };
}

/** Registers a fresh user through HTTP; returns the Cookie header a browser would then send (session and CSRF cookies). */
export async function registerUser(url: string): Promise<{ email: string; cookie: string }> {
  const email = `bench-${crypto.randomBytes(6).toString('hex')}@example.com`;
  const res = await fetch(`${url}/auth/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ email, password: 'benchmark password' }),
  });
  if (res.status !== 201) throw new Error(`register answered ${res.status}: ${await res.text()}`);
  const cookie = res.headers
    .getSetCookie()
    .map((c) => c.split(';')[0])
    .join('; ');
  if (!cookie.includes('session=')) throw new Error('register set no session cookie');
  return { email, cookie };
}

/** A fresh database and an orloj server over it (`env` as for startOrloj) for the callback; both are gone afterwards. */
export async function withOrloj<T>(
  engine: Engine,
  fn: (orloj: OrlojServer, db: BenchDatabase) => Promise<T>,
  env: Record<string, string> = {},
): Promise<T> {
  const db = await createBenchDatabase(engine);
  try {
    const orloj = await startOrloj(db.url, env);
    try {
      return await fn(orloj, db);
    } finally {
      await orloj.stop();
    }
  } finally {
    await db.drop();
  }
}
