import crypto from 'node:crypto';
import path from 'node:path';
import SQLite from 'better-sqlite3';
import pg from 'pg';
import {
  CompiledQuery,
  sql,
  DEFAULT_MIGRATION_TABLE,
  Kysely,
  Migrator,
  PostgresDialect,
  SqliteAdapter,
  SqliteDialect,
  type DatabaseConnection,
  type Dialect,
  type Driver,
} from 'kysely';
import type { Database } from './schema.js';
import { makePrivateDir, preparePrivateFile, sqliteFiles, tightenFile } from '../config/data-dir.js';
import { postgresHelpers, sqliteHelpers, type DialectHelpers } from './dialect.js';
import { withSchemaIntrospection } from './schema-introspection.js';
import { MIGRATION_NAMES, migrationProvider } from './migrations/index.js';
import type { HeldConnection, ReadOptions, RowReader } from './compiled-read.js';
import { openReadConnection, preparedOnce, registerFunctions, SQLITE_BUSY_TIMEOUT_MS, SqliteReadPool } from './sqlite-reads.js';
import { SqliteCheckpointer, WAL_SIZE_LIMIT_BYTES, WRITER_CHECKPOINT_PAGES } from './sqlite-checkpoint.js';
import { tlsMaterial, type TlsFiles } from '../config/tls.js';
import { SETTINGS } from '../config/settings.js';

export interface DatabaseHandle {
  readonly db: Kysely<Database>;
  readonly dialect: DialectHelpers;
  /** Runs compiled reads outside transactions (compiled-read.ts); none for an in-memory SQLite database. */
  readonly reader: RowReader | undefined;
  /** The writer connection as a transaction holds it (SQLite; compiled-read.ts). */
  readonly writer?: HeldConnection;
  /** The thread that checkpoints the WAL (a SQLite file; sqlite-checkpoint.ts). */
  readonly checkpointer?: SqliteCheckpointer;
  /**
   * Applies pending migrations; returns the names applied now. Refuses
   * (DatabaseTooNewError) a database that a newer orloj migrated further.
   */
  migrate(): Promise<string[]>;
  /** The migrations applied to the database, those this build would apply, and those it does not know. */
  migrationStatus(): Promise<MigrationStatus>;
  close(): Promise<void>;
}

export interface MigrationStatus {
  applied: string[];
  pending: string[];
  /** Applied by a newer orloj: this build must not run against the database. */
  unknown: string[];
}

/**
 * The database carries migrations this build does not know: a newer orloj
 * migrated it. Running on would mean reading and writing a schema this code
 * was not written for, so every role refuses to start.
 */
export class DatabaseTooNewError extends Error {
  constructor(readonly unknown: readonly string[]) {
    const latest = MIGRATION_NAMES[MIGRATION_NAMES.length - 1] ?? 'none';
    super(
      `this database was migrated by a newer orloj (migration ${unknown.join(', ')}); this orloj knows migrations up to ${latest}. ` +
        'Run the newer orloj, or restore the backup taken before the upgrade (docs/operations.md, "Upgrades").',
    );
    this.name = 'DatabaseTooNewError';
  }
}

export interface DatabaseOptions {
  /** Connection pool size for PostgreSQL. */
  poolSize?: number;
  /** SQLite: threads for heavy reads (SQLITE_READ_WORKERS); one when absent. */
  readWorkers?: number;
  /** PostgreSQL schema to use (tests create a fresh one per run). */
  schema?: string;
  /**
   * PostgreSQL over TLS verifying the server against `caFile` (node's default
   * trust without one) and presenting `certFile`/`keyFile` for `hostssl … cert`
   * login. Instead of, never beside, the URL's sslmode/sslrootcert/sslcert/sslkey.
   */
  tls?: TlsFiles | undefined;
  /**
   * SQLite: whether this handle keeps the file in shape — planner statistics
   * refreshed every minute and WAL checkpoints on a thread of its own. True
   * (the default) for the server that owns the database; false for a
   * process opened beside it (`orloj accounts`, `orloj migrate --check`, a
   * benchmark's reader), whose `PRAGMA optimize` would take the write lock
   * from under the server's writer on a timer of its own.
   */
  upkeep?: boolean;
}

/**
 * Opens the store named by a DATABASE_URL:
 *  - `sqlite:<path>` (relative paths resolve against the working directory), `sqlite::memory:`
 *  - `postgres://…` / `postgresql://…`
 */
export function openDatabase(url: string, options: DatabaseOptions = {}): DatabaseHandle {
  if (url.startsWith('sqlite:')) return openSqlite(url.slice('sqlite:'.length), options.readWorkers ?? 1, options.upkeep ?? true);
  if (url.startsWith('postgres://') || url.startsWith('postgresql://')) return openPostgres(url, options);
  throw new Error(`DATABASE_URL must start with sqlite: or postgres:// (got "${url.split(':')[0]}:")`);
}

function handle(
  db: Kysely<Database>,
  dialect: DialectHelpers,
  reader: RowReader | undefined,
  close: () => Promise<void>,
  afterMigrate?: () => void,
  writer?: HeldConnection,
  checkpointer?: SqliteCheckpointer,
): DatabaseHandle {
  return {
    db,
    dialect,
    reader,
    ...(writer ? { writer } : {}),
    ...(checkpointer ? { checkpointer } : {}),
    async migrate() {
      // In PostgreSQL the migration tables live in the current schema (tests and
      // installations may share a database); Kysely would otherwise find them in any schema.
      const schema = await currentSchema(db, dialect);
      // Kysely would report a newer database's migrations as "corrupted migrations".
      const { unknown } = await migrationStatus(db, dialect, schema);
      if (unknown.length) throw new DatabaseTooNewError(unknown);
      const migrator = new Migrator({ db: schema ? withSchemaIntrospection(db, schema) : db, provider: migrationProvider(dialect), ...(schema ? { migrationTableSchema: schema } : {}) });
      const { error, results } = await migrator.migrateToLatest();
      if (error) throw error instanceof Error ? error : new Error(String(error));
      afterMigrate?.();
      return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
    },
    async migrationStatus() {
      return migrationStatus(db, dialect, await currentSchema(db, dialect));
    },
    close,
  };
}

async function currentSchema(db: Kysely<Database>, dialect: DialectHelpers): Promise<string | undefined> {
  if (dialect.name !== 'postgres') return undefined;
  return (await sql<{ s: string }>`select current_schema() as s`.execute(db)).rows[0]?.s;
}

async function migrationStatus(db: Kysely<Database>, dialect: DialectHelpers, schema: string | undefined): Promise<MigrationStatus> {
  const exists =
    dialect.name === 'postgres'
      ? await sql`select 1 from information_schema.tables where table_schema = ${schema} and table_name = ${DEFAULT_MIGRATION_TABLE}`.execute(db)
      : await sql`select 1 from sqlite_master where type = 'table' and name = ${DEFAULT_MIGRATION_TABLE}`.execute(db);
  const applied = exists.rows.length
    ? (await sql<{ name: string }>`select name from ${sql.table(schema ? `${schema}.${DEFAULT_MIGRATION_TABLE}` : DEFAULT_MIGRATION_TABLE)} order by name`.execute(db)).rows.map(
        (r) => r.name,
      )
    : [];
  const done = new Set(applied);
  return {
    applied,
    pending: MIGRATION_NAMES.filter((n) => !done.has(n)),
    unknown: applied.filter((n) => !MIGRATION_NAMES.includes(n)),
  };
}

function openSqlite(file: string, readWorkers: number, upkeep: boolean): DatabaseHandle {
  if (file !== ':memory:') {
    // SQLite would create the file 0644 (and its -wal and -shm like it): they hold secrets.
    makePrivateDir(path.dirname(path.resolve(file)));
    preparePrivateFile(file);
  }
  const sqlite = new SQLite(file);
  sqlite.pragma('journal_mode = WAL');
  if (file !== ':memory:') for (const f of sqliteFiles(file)) tightenFile(f);
  sqlite.pragma('synchronous = NORMAL');
  // Checkpoints run on a thread of their own (sqlite-checkpoint.ts); the writer only past this.
  sqlite.pragma(`wal_autocheckpoint = ${WRITER_CHECKPOINT_PAGES}`);
  sqlite.pragma(`journal_size_limit = ${WAL_SIZE_LIMIT_BYTES}`);
  sqlite.pragma('foreign_keys = ON');
  sqlite.pragma(`busy_timeout = ${SQLITE_BUSY_TIMEOUT_MS}`);
  registerFunctions(sqlite);
  const db = new Kysely<Database>({ dialect: new ImmediateSqliteDialect(new SqliteDialect({ database: withStatementCache(sqlite) })) });
  sqlite.pragma(`analysis_limit = ${ANALYSIS_LIMIT_ROWS}`);
  const stopOptimizing = upkeep ? keepPlannerStatistics(sqlite) : () => undefined;
  // An in-memory database is private to its connection: reads go through Kysely there, and it has no WAL.
  const reader = file === ':memory:' ? undefined : new SqliteReader(file, readWorkers);
  const checkpointer = file === ':memory:' || !upkeep ? undefined : new SqliteCheckpointer(file);
  return handle(
    db,
    sqliteHelpers,
    reader,
    async () => {
      stopOptimizing();
      await checkpointer?.close();
      await reader?.close();
      await db.destroy();
    },
    () => optimize(sqlite, OPTIMIZE_ALL_TABLES),
    new SqliteHeldConnection(sqlite),
    checkpointer,
  );
}

/**
 * The writer connection as a transaction holds it: compiled statements run
 * on it synchronously, each prepared once (in its own cache: a statement
 * returning arrays can't also return objects). Only compiled statements come
 * here, so the caches hold a fixed set of query shapes.
 */
class SqliteHeldConnection implements HeldConnection {
  private readonly arrays = new Map<string, SQLite.Statement>();
  private readonly objects = new Map<string, SQLite.Statement>();

  constructor(private readonly sqlite: SQLite.Database) {}

  rows(source: string, parameters: readonly unknown[]): unknown[][] {
    const statement = preparedOnce(this.arrays, source, this.sqlite, true);
    return statement.all(...parameters) as unknown[][];
  }

  execute(source: string, parameters: readonly unknown[]): { rows: Record<string, unknown>[]; numAffectedRows: bigint | undefined } {
    const statement = preparedOnce(this.objects, source, this.sqlite, false);
    if (statement.reader) return { rows: statement.all(...parameters) as Record<string, unknown>[], numAffectedRows: undefined };
    return { rows: [], numAffectedRows: BigInt(statement.run(...parameters).changes) };
  }
}

/**
 * Compiled reads on a connection of their own, opened at first use. With WAL
 * it reads the last commit without waiting for the writer and can never land
 * inside a transaction that another caller holds open on the main connection
 * (which Kysely shares among callers, one transaction at a time). Each
 * statement is prepared once and returns its rows as arrays: better-sqlite3
 * builds a row object through the V8 API, a value at a time, which cost
 * twice the query itself on a page of workflows. Heavy reads (log pages and
 * searches, workflow pages) go to reader threads instead (SqliteReadPool),
 * so they never hold up the event loop; the short ones (a session, a job's
 * access check) stay here, where they cost less than a message to a thread.
 */
class SqliteReader implements RowReader {
  private connection: SQLite.Database | undefined;
  private readonly statements = new Map<string, SQLite.Statement>();
  private readonly pool: SqliteReadPool;

  constructor(
    private readonly file: string,
    readWorkers: number,
  ) {
    this.pool = new SqliteReadPool(file, readWorkers);
  }

  rows(source: string, parameters: readonly unknown[], options: ReadOptions = {}): Promise<unknown[][]> {
    if (options.heavy) return this.pool.rows(source, parameters);
    try {
      return Promise.resolve(this.statement(source).all(...parameters) as unknown[][]);
    } catch (err) {
      return Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
  }

  private statement(source: string): SQLite.Statement {
    this.connection ??= openReadConnection(this.file);
    return preparedOnce(this.statements, source, this.connection, true);
  }

  async close(): Promise<void> {
    this.statements.clear();
    this.connection?.close();
    this.connection = undefined;
    await this.pool.close();
  }
}

/** How often SQLite re-checks its planner statistics (cheap when nothing changed). */
const OPTIMIZE_EVERY_MS = 60_000;
/** Rows each ANALYZE samples (`analysis_limit`): `orloj migrate`'s analysis is bounded like the server's. */
const ANALYSIS_LIMIT_ROWS = 1000;
/** `PRAGMA optimize` mask: analyze every table that needs it, not only those this connection queried. */
const OPTIMIZE_ALL_TABLES = 0x10002;

/**
 * Without statistics SQLite guesses how selective an index is, and for the job
 * queue it guesses badly: "status = 'QUEUED' and (id = ? and attempts = ?) or …"
 * scanned every queued job through the status index instead of looking the ids
 * up (945 ms instead of 8 ms for 500 jobs among 100,000). `PRAGMA optimize`,
 * as SQLite recommends, at open, after migrations and then every minute,
 * re-analyzes just the tables whose size changed a lot since their last
 * analysis; `analysis_limit` bounds each ANALYZE to a sample, so a check
 * costs microseconds and a re-analysis milliseconds even on large tables.
 * Returns the function that stops it (at close).
 */
function keepPlannerStatistics(sqlite: SQLite.Database): () => void {
  optimize(sqlite, OPTIMIZE_ALL_TABLES);
  const timer = setInterval(() => optimize(sqlite), OPTIMIZE_EVERY_MS);
  timer.unref();
  return () => {
    clearInterval(timer);
    optimize(sqlite);
  };
}

function optimize(sqlite: SQLite.Database, mask?: number): void {
  // Not inside a transaction of ours (a timer can fire between its statements).
  if (!sqlite.open || sqlite.inTransaction) return;
  try {
    sqlite.pragma(mask === undefined ? 'optimize' : `optimize = ${mask}`);
  } catch {
    // Busy (another process holds the write lock past busy_timeout): the next round retries.
  }
}

/** Prepared SQLite statements kept per connection. */
const STATEMENT_CACHE_SIZE = 500;

/**
 * Kysely prepares every query anew; preparing is a tenth of a simple
 * request's time. Statements are reused per SQL text instead (safe: the
 * connection is used by one query at a time, synchronously).
 */
function withStatementCache(sqlite: SQLite.Database, max = STATEMENT_CACHE_SIZE): SQLite.Database {
  const cache = new Map<string, SQLite.Statement>();
  return new Proxy(sqlite, {
    get(target, prop, receiver) {
      if (prop === 'prepare') {
        return (source: string) => {
          let statement = cache.get(source);
          if (!statement) {
            statement = target.prepare(source);
            if (cache.size >= max) cache.delete(cache.keys().next().value!);
            cache.set(source, statement);
          }
          return statement;
        };
      }
      const value = Reflect.get(target, prop, receiver) as unknown;
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
}

function openPostgres(url: string, options: DatabaseOptions): DatabaseHandle {
  const pool = new pg.Pool({
    connectionString: url,
    max: options.poolSize ?? SETTINGS.DB_POOL_SIZE.default,
    // int8 columns hold epoch milliseconds and counters: all within 2^53.
    types: {
      getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
        oid === 20 ? (v: string) => Number(v) : pg.types.getTypeParser(oid, format as 'text')) as typeof pg.types.getTypeParser,
    },
    ...(options.schema ? { options: `-c search_path=${options.schema}` } : {}),
    ...(options.tls ? { ssl: { ...tlsMaterial(options.tls), rejectUnauthorized: true } } : {}),
  });
  // An idle client losing its server (restart) must not crash the process; the pool replaces it.
  pool.on('error', () => {});
  // Nor may a lent-out one: pg-pool drops its error listener while a client is checked out, so a
  // backend terminated between two statements (a restart during a transaction) emits 'error' on
  // the client with nobody listening. Its queries fail (the caller sees that) and the pool
  // discards the client on release.
  pool.on('connect', (client) => client.on('error', () => {}));
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  return handle(db, postgresHelpers, new PostgresReader(pool), () => db.destroy());
}

/**
 * Compiled reads as named prepared statements, rows as arrays: each pooled
 * connection parses a statement once and then only binds and executes it.
 * The name is derived from the SQL, so one name never means two statements.
 */
class PostgresReader implements RowReader {
  private readonly names = new Map<string, string>();

  constructor(private readonly pool: pg.Pool) {}

  async rows(text: string, values: readonly unknown[]): Promise<unknown[][]> {
    let name = this.names.get(text);
    if (!name) {
      name = `orloj_${crypto.createHash('sha256').update(text).digest('hex').slice(0, 24)}`;
      this.names.set(text, name);
    }
    const result = await this.pool.query<unknown[]>({ name, text, values: values as unknown[], rowMode: 'array' });
    return result.rows;
  }

  /** The pool is the database's; it closes with it. */
  close(): Promise<void> {
    return Promise.resolve();
  }
}

/**
 * SQLite with one writer: write transactions start with BEGIN IMMEDIATE, so a
 * transaction that reads and then writes takes the write lock up front and
 * waits (busy_timeout) instead of failing when another process writes.
 */
class ImmediateSqliteDialect implements Dialect {
  constructor(private readonly inner: SqliteDialect) {}
  createAdapter() {
    return new TransactionalDdlSqliteAdapter();
  }
  createDriver(): Driver {
    const driver = this.inner.createDriver();
    return new Proxy(driver, {
      get(target, prop, receiver) {
        if (prop === 'beginTransaction') {
          return async (connection: DatabaseConnection) => {
            await connection.executeQuery(CompiledQuery.raw('begin immediate'));
          };
        }
        const value = Reflect.get(target, prop, receiver) as unknown;
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    });
  }
  createIntrospector(db: Kysely<any>) {
    return this.inner.createIntrospector(db);
  }
  createQueryCompiler() {
    return this.inner.createQueryCompiler();
  }
}

/**
 * SQLite's DDL is transactional, but Kysely's adapter says otherwise and takes
 * no migration lock, trusting that one connection is all there is. Several
 * processes on one database file (the embedded server and `orloj migrate`,
 * or replicas starting together) then ran the same migration twice ("table
 * users already exists"). Saying so makes the migrator run in one
 * transaction, which begins IMMEDIATE (above): the write lock is the
 * migration lock, and whoever waits for it finds the migrations applied.
 * (Inside it `PRAGMA foreign_keys` changes nothing: a migration that rebuilds
 * a table must check its foreign keys with `PRAGMA foreign_key_check`.)
 */
class TransactionalDdlSqliteAdapter extends SqliteAdapter {
  override get supportsTransactionalDdl(): boolean {
    return true;
  }
}
