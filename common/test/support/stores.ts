import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import crypto from 'node:crypto';
import pg from 'pg';
import { openDatabase, Store, type DatabaseHandle } from '@orloj/common/store';
import { needService } from './services.js';

export type Engine = 'sqlite' | 'postgres';
export const ENGINES: readonly Engine[] = ['sqlite', 'postgres'];

export interface TestDatabase {
  engine: Engine;
  /** A DATABASE_URL that reaches this database (for spawned processes too). */
  url: string;
  handle: DatabaseHandle;
  store: Store;
  /** Closes the handle and deletes the database (file or schema). */
  drop(): Promise<void>;
}

/**
 * A fresh, migrated database: a temp SQLite file, or a new schema in the test
 * PostgreSQL database (selected through search_path in the URL, so a spawned
 * `orloj` process given the URL sees the same schema).
 */
async function open(engine: Engine, url: string, cleanup: () => Promise<void> | void, migrate = true): Promise<TestDatabase> {
  const handle = openDatabase(url);
  if (migrate) await handle.migrate();
  return {
    engine,
    url,
    handle,
    store: Store.fromHandle(handle),
    async drop() {
      await handle.close();
      await cleanup();
    },
  };
}

/** `migrate: false` leaves the database empty (tests of migrating itself). */
export async function createTestDatabase(engine: Engine, ctx?: Mocha.Context, options: { migrate?: boolean } = {}): Promise<TestDatabase> {
  const migrate = options.migrate ?? true;
  if (engine === 'sqlite') {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'orloj-test-'));
    return open(engine, `sqlite:${path.join(dir, 'orloj.db')}`, () => fs.rmSync(dir, { recursive: true, force: true }), migrate);
  }
  const base = ctx ? needService(ctx, 'postgres') : process.env.TEST_DATABASE_URL;
  if (!base) throw new Error('TEST_DATABASE_URL is not set');
  const schema = `orloj_t_${crypto.randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: base });
  await admin.connect();
  await admin.query(`create schema ${schema}`);
  await admin.end();
  const u = new URL(base);
  u.searchParams.set('options', `-c search_path=${schema}`);
  return open(engine, u.toString(), async () => {
    const c = new pg.Client({ connectionString: base });
    await c.connect();
    await c.query(`drop schema if exists ${schema} cascade`);
    await c.end();
  }, migrate);
}

/**
 * Runs the same suite once per engine: SQLite always, PostgreSQL when it is
 * available (or required). `db()` returns the suite's database.
 */
export function describeEachEngine(title: string, body: (db: () => TestDatabase, engine: Engine) => void): void {
  for (const engine of ENGINES) {
    describe(`${title} [${engine}]`, function () {
      let database: TestDatabase | undefined;
      before(async function () {
        database = await createTestDatabase(engine, this);
      });
      after(async () => {
        await database?.drop();
      });
      body(() => {
        if (!database) throw new Error('database not ready');
        return database;
      }, engine);
    });
  }
}
