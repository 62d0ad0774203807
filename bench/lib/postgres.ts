import crypto from 'node:crypto';
import pg from 'pg';

export const DEFAULT_BENCH_DATABASE_URL = 'postgres://postgres@127.0.0.1:5432/orloj_test';

export interface BenchSchema {
  /** A DATABASE_URL selecting the schema through search_path (works for spawned processes too). */
  url: string;
  schema: string;
  drop(): Promise<void>;
}

async function withClient<T>(url: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5_000 });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/** Creates the URL's database when it does not exist (connecting to the `postgres` database to do so). */
async function ensureDatabase(url: string): Promise<void> {
  const u = new URL(url);
  const name = decodeURIComponent(u.pathname.slice(1));
  if (!name) throw new Error('the PostgreSQL URL names no database');
  const admin = new URL(url);
  admin.pathname = '/postgres';
  admin.searchParams.delete('options');
  await withClient(admin.toString(), async (c) => {
    const found = await c.query('select 1 from pg_database where datname = $1', [name]);
    if (found.rowCount) return;
    try {
      await c.query(`create database ${pg.escapeIdentifier(name)}`);
    } catch (err) {
      if ((err as { code?: string }).code !== '42P04') throw err; // created concurrently
    }
  });
}

/** A fresh, empty schema in the benchmark database; drop() removes it with everything in it. */
export async function createBenchSchema(baseUrl: string): Promise<BenchSchema> {
  await ensureDatabase(baseUrl);
  const schema = `orloj_bench_${crypto.randomBytes(5).toString('hex')}`;
  await withClient(baseUrl, async (c) => {
    await c.query(`create schema ${schema}`);
  });
  const u = new URL(baseUrl);
  u.searchParams.set('options', `-c search_path=${schema}`);
  return {
    url: u.toString(),
    schema,
    drop: () => withClient(baseUrl, (c) => c.query(`drop schema if exists ${schema} cascade`)).then(() => undefined),
  };
}

/** The URL with its password hidden, for reports. */
export function redactUrl(url: string): string {
  const u = new URL(url);
  if (u.password) u.password = '***';
  u.searchParams.delete('options');
  return u.toString();
}
