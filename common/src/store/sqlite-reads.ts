import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import SQLite from 'better-sqlite3';
import { foldCase, SQLITE_BLOOM_LACKS_FUNCTION, SQLITE_CONTAINS_FOLDED_FUNCTION, SQLITE_FOLD_FUNCTION } from './dialect.js';
import { sqliteBloomLacks } from './log-blocks.js';

/** Functions of orloj's SQL, on every connection. */
export function registerFunctions(sqlite: SQLite.Database): void {
  // Case-insensitive log search (dialect.containsFolded): the same fold as the needle's.
  sqlite.function(SQLITE_FOLD_FUNCTION, { deterministic: true }, (text: unknown) => (typeof text === 'string' ? foldCase(text) : text));
  sqlite.function(SQLITE_CONTAINS_FOLDED_FUNCTION, { deterministic: true }, (text: unknown, needle: unknown) =>
    typeof text === 'string' && typeof needle === 'string' && foldCase(text).includes(needle) ? 1 : 0,
  );
  // The log search skip index (log-blocks.ts): whether a block's filter rules the needle out.
  sqlite.function(SQLITE_BLOOM_LACKS_FUNCTION, { deterministic: true }, sqliteBloomLacks);
}

/** The statement for `source` from `cache`, prepared on `sqlite` the first time (returning rows as arrays when `raw`). */
export function preparedOnce(cache: Map<string, SQLite.Statement>, source: string, sqlite: SQLite.Database, raw: boolean): SQLite.Statement {
  let statement = cache.get(source);
  if (!statement) {
    statement = raw ? sqlite.prepare(source).raw(true) : sqlite.prepare(source);
    cache.set(source, statement);
  }
  return statement;
}

/** How long SQLite waits for another writer's lock before it fails a statement (every connection). */
export const SQLITE_BUSY_TIMEOUT_MS = 5_000;

/**
 * A connection for compiled reads: it never writes (`query_only`), and
 * with WAL it reads the last commit without waiting for the writer.
 */
export function openReadConnection(file: string): SQLite.Database {
  const sqlite = new SQLite(file, { fileMustExist: true });
  sqlite.pragma(`busy_timeout = ${SQLITE_BUSY_TIMEOUT_MS}`);
  sqlite.pragma('query_only = ON');
  registerFunctions(sqlite);
  return sqlite;
}

/** A read sent to a worker, and its answer. */
export interface ReadRequest {
  id: number;
  sql: string;
  parameters: readonly unknown[];
}
export type ReadAnswer = { id: number; rows: unknown[][] } | { id: number; error: { message: string; code?: string; name: string } };

interface Pending {
  resolve: (rows: unknown[][]) => void;
  reject: (err: Error) => void;
}

/** A SQLite thread's niceness: below the event loop's (0), which then gets the CPU first when both want it. */
const THREAD_NICE = 10;

/**
 * A thread of orloj's SQLite work: `entry` is a module beside this file
 * (sqlite-read-worker, sqlite-checkpoint-worker). Its first act lowers the
 * thread's own priority (Linux: setpriority on a thread id affects that
 * thread alone; elsewhere, or when not allowed, it keeps the process's),
 * before it loads anything: on a busy machine its module loading and its long
 * work then yield the CPU to the event loop's short work instead of sharing it
 * (docs/adr/0009). Then it runs the built `<entry>.js`; or, from sources
 * through tsx (tests, development), the .ts file after registering tsx in the
 * thread (a worker does not inherit the loader hooks of `--import tsx`).
 */
export function sqliteThread(entry: 'sqlite-read-worker' | 'sqlite-checkpoint-worker', file: string): Worker {
  const fromSources = import.meta.url.endsWith('.ts');
  const url = new URL(`./${entry}.${fromSources ? 'ts' : 'js'}`, import.meta.url).href;
  // tsx's ESM api (its `import` export) sits beside the CommonJS one that require resolves.
  const tsx = fromSources ? pathToFileURL(path.join(path.dirname(createRequire(import.meta.url).resolve('tsx/esm/api')), 'index.mjs')).href : undefined;
  const boot = [
    "const fs = require('node:fs'), os = require('node:os'), path = require('node:path');",
    `try { os.setPriority(Number(path.basename(fs.readlinkSync('/proc/thread-self'))), ${THREAD_NICE}); } catch {}`,
    tsx
      ? `import(${JSON.stringify(tsx)}).then(({ register }) => { register(); return import(${JSON.stringify(url)}); });`
      : `import(${JSON.stringify(url)});`,
  ].join('\n');
  return new Worker(boot, { eval: true, workerData: { file } });
}

/** One reader thread and the reads it has been sent. */
class ReadThread {
  readonly pending = new Map<number, Pending>();
  readonly worker: Worker;

  constructor(file: string, onGone: (thread: ReadThread) => void) {
    this.worker = sqliteThread('sqlite-read-worker', file);
    this.worker.unref();
    this.worker.on('message', (answer: ReadAnswer) => this.answer(answer));
    const gone = (err: Error) => {
      onGone(this);
      for (const p of this.pending.values()) p.reject(err);
      this.pending.clear();
    };
    this.worker.on('error', gone);
    this.worker.on('exit', (code) => gone(new Error(`the SQLite reader thread exited (code ${code})`)));
  }

  send(request: ReadRequest, pending: Pending): void {
    // Held only while it has work: an idle reader never keeps the process alive.
    if (this.pending.size === 0) this.worker.ref();
    this.pending.set(request.id, pending);
    this.worker.postMessage(request);
  }

  private answer(answer: ReadAnswer): void {
    const p = this.pending.get(answer.id);
    if (!p) return;
    this.pending.delete(answer.id);
    if (this.pending.size === 0) this.worker.unref();
    if ('rows' in answer) p.resolve(answer.rows);
    else p.reject(Object.assign(new Error(answer.error.message), { name: answer.error.name, code: answer.error.code }));
  }
}

/**
 * Reads that may take long — log pages and searches, workflow pages with
 * their payloads — on threads of their own (docs/adr/0009): better-sqlite3
 * runs a statement synchronously, so on the event loop a search over 100,000
 * lines stopped every request, probe and timer of the process for half a
 * second. Each thread holds its own read-only connection; a read goes to the
 * thread with the fewest reads waiting. Threads start when every running one
 * is busy, up to `size`; one that fails is replaced at the next read.
 */
export class SqliteReadPool {
  private readonly threads: ReadThread[] = [];
  private nextId = 0;
  private closed = false;

  constructor(
    private readonly file: string,
    private readonly size: number,
  ) {}

  rows(sql: string, parameters: readonly unknown[]): Promise<unknown[][]> {
    if (this.closed) return Promise.reject(new Error('the SQLite reader threads are closed'));
    const thread = this.thread();
    return new Promise((resolve, reject) => thread.send({ id: ++this.nextId, sql, parameters }, { resolve, reject }));
  }

  private thread(): ReadThread {
    const idle = this.threads.find((t) => t.pending.size === 0);
    if (idle) return idle;
    if (this.threads.length < this.size) {
      const thread = new ReadThread(this.file, (gone) => {
        const at = this.threads.indexOf(gone);
        if (at !== -1) this.threads.splice(at, 1);
      });
      this.threads.push(thread);
      return thread;
    }
    return this.threads.reduce((best, t) => (t.pending.size < best.pending.size ? t : best));
  }

  async close(): Promise<void> {
    this.closed = true;
    const threads = this.threads.splice(0);
    await Promise.all(threads.map((t) => t.worker.terminate()));
  }
}
