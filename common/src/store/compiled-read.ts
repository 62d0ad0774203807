import { CompiledQuery, type Kysely } from 'kysely';
import type { Database } from './schema.js';

/**
 * Compiled reads: the store's hottest SELECTs (a request's session lookup, the
 * workflow list) built with Kysely once per query shape instead of per call,
 * and run with their rows as arrays.
 *
 * Kysely builds and compiles a query on every call, and drivers turn every row
 * into an object; for a page of 21 workflows that was most of a request's
 * time (docs/benchmarks.md, "GET /workflows"). A compiled read keeps Kysely's
 * typed builder for the SQL, with `slot()` stand-ins where each run's values
 * go, and the root store runs it on a RowReader: a read-only SQLite connection
 * of its own, or PostgreSQL named statements (parsed once per connection).
 * Inside a transaction the same SQL runs through the transaction instead.
 */

class Slot {
  constructor(readonly name: string) {}
}

/** A stand-in for a value each run of a compiled read supplies under `name`; typed as that value. */
export function slot<T>(name: string): T {
  return new Slot(name) as unknown as T;
}

/** A SELECT compiled once: its SQL, and its parameters with slots still open. */
export class CompiledRead {
  readonly sql: string;
  private readonly template: readonly unknown[];

  constructor(compiled: CompiledQuery) {
    this.sql = compiled.sql;
    this.template = compiled.parameters;
  }

  /** The parameters of one run: every slot filled from `args`. */
  bind(args: Readonly<Record<string, unknown>>): unknown[] {
    return this.template.map((p) => {
      if (!(p instanceof Slot)) return p;
      const value = args[p.name];
      if (value === undefined) throw new Error(`compiled read: no value for slot "${p.name}"`);
      return value;
    });
  }
}

/** How a read is run. */
export interface ReadOptions {
  /**
   * A read that may take long or return much (log pages and searches,
   * workflow pages): SQLite runs it on a reader thread, off the event loop.
   */
  heavy?: boolean;
}

/** Runs SQL outside any transaction and returns the rows as arrays, columns in select order. */
export interface RowReader {
  rows(sql: string, parameters: readonly unknown[], options?: ReadOptions): Promise<unknown[][]>;
  close(): Promise<void>;
}

/**
 * Runs SQL synchronously on the connection that an open transaction holds
 * (SQLite's one writer), skipping Kysely's executor and connection hand-off,
 * which cost more than a short statement itself. Valid only while the
 * transaction's callback runs: see `Store.transaction`.
 */
export interface HeldConnection {
  /** Rows as arrays, columns in select order. */
  rows(sql: string, parameters: readonly unknown[]): unknown[][];
  /** Rows as objects (for statements with RETURNING, and reads), or the count of changed rows. */
  execute(sql: string, parameters: readonly unknown[]): { rows: Record<string, unknown>[]; numAffectedRows: bigint | undefined };
}

/**
 * The compiled reads of one database: compiled once per shape, shared by the
 * root store and its transactions.
 */
export class CompiledReads {
  private readonly compiled = new Map<string, CompiledRead>();

  constructor(
    private readonly db: Kysely<Database>,
    readonly reader: RowReader | undefined,
    /** The writer connection, for transactions to run compiled statements on directly (SQLite). */
    readonly writer: HeldConnection | undefined = undefined,
  ) {}

  /** The read known as `key`, compiled from `build`'s query the first time. */
  get(key: string, build: (db: Kysely<Database>) => { compile(): CompiledQuery }): CompiledRead {
    let read = this.compiled.get(key);
    if (!read) {
      read = new CompiledRead(build(this.db).compile());
      this.compiled.set(key, read);
    }
    return read;
  }
}

/**
 * One open transaction, as its store's compiled statements see it: open until
 * the transaction's callback settles, and holding the connection they run on
 * when the database offers it (SQLite's writer; on PostgreSQL they go through
 * Kysely's transaction).
 */
export class TransactionScope {
  private open = true;

  constructor(private readonly connection: HeldConnection | undefined) {}

  /** The held connection, if any; throws once the transaction has ended (a store kept past its callback). */
  held(): HeldConnection | undefined {
    if (!this.open) throw new Error("a transaction's store was used after the transaction ended");
    return this.connection;
  }

  end(): void {
    this.open = false;
  }
}

/**
 * Runs compiled statements for one Store: reads on the row reader at the
 * root; inside a transaction (where the reader's separate connection would
 * not see the transaction's writes) on the connection the transaction holds
 * when the database offers it (SQLite), else through Kysely, as where no
 * reader exists.
 */
export class ReadRunner {
  constructor(
    readonly reads: CompiledReads,
    private readonly db: Kysely<Database>,
    /** The transaction this runner's store runs in; none at the root. */
    private readonly scope: TransactionScope | undefined = undefined,
  ) {}

  async rows(read: CompiledRead, args: Readonly<Record<string, unknown>>, options: ReadOptions = {}): Promise<unknown[][]> {
    const parameters = read.bind(args);
    const held = this.scope?.held();
    if (held) return held.rows(read.sql, parameters);
    const reader = this.scope ? undefined : this.reads.reader;
    if (reader) return reader.rows(read.sql, parameters, options);
    const result = await this.db.executeQuery<Record<string, unknown>>(CompiledQuery.raw(read.sql, parameters));
    // Both drivers keep the select order in a row's keys.
    return result.rows.map((row) => Object.values(row));
  }

  /**
   * Runs a compiled statement once for each of `items`, synchronously on
   * the connection an open SQLite transaction holds: there a statement is a
   * function call, and one prepared statement run row by row costs far less
   * than a multi-row statement that Kysely builds and compiles anew for every
   * batch. Undefined, running nothing, where no connection is held (PostgreSQL,
   * where a round trip per row would cost more, and outside transactions): the
   * caller then sends its set-wise statement instead.
   */
  eachRow<T>(statement: CompiledRead, items: readonly T[], argsOf: (item: T) => Readonly<Record<string, unknown>>): Record<string, unknown>[][] | undefined {
    const held = this.scope?.held();
    if (!held) return undefined;
    return items.map((item) => held.execute(statement.sql, statement.bind(argsOf(item))).rows);
  }

  /**
   * Runs a compiled statement through Kysely's connection (the transaction's,
   * or the root's writer), never the read-only reader: for writes, and for
   * reads that lock rows. Rows come back as objects.
   */
  async execute(statement: CompiledRead, args: Readonly<Record<string, unknown>>): Promise<{ rows: Record<string, unknown>[]; numAffectedRows: bigint | undefined }> {
    const held = this.scope?.held();
    if (held) return held.execute(statement.sql, statement.bind(args));
    const result = await this.db.executeQuery<Record<string, unknown>>(CompiledQuery.raw(statement.sql, statement.bind(args)));
    return { rows: result.rows, numAffectedRows: result.numAffectedRows };
  }
}
