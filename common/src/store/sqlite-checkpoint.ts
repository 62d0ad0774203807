import fs from 'node:fs';
import type { Worker } from 'node:worker_threads';
import { sqliteThread } from './sqlite-reads.js';

/**
 * WAL checkpoints of the SQLite file on a thread of their own (docs/adr/0025).
 *
 * In WAL mode a commit appends pages to the -wal file; a checkpoint copies
 * them back into the database file and syncs it, after which the next writer
 * starts the WAL over. By default the connection that commits runs that
 * checkpoint itself, inside the commit that takes the WAL past 1,000 pages:
 * one commit in so many then costs a copy of 4 MiB and two fsyncs, milliseconds
 * to tens of milliseconds during which the event loop (the whole embedded
 * process) waits. Here a niced thread checkpoints every CHECKPOINT_EVERY_MS
 * instead, PASSIVE (it never waits for, nor blocks, a reader or the writer),
 * and the writer keeps its own checkpoint only past WRITER_CHECKPOINT_PAGES,
 * for a thread that has fallen behind or gone. The thread starts once the WAL
 * first passes START_AT_BYTES: a database that is opened briefly, or hardly
 * written (a command, most tests), never loads one.
 */

/** How often the thread checkpoints: a busy writer's WAL then holds a few hundred pages between two. */
export const CHECKPOINT_EVERY_MS = 250;
/**
 * The writer's `wal_autocheckpoint` (pages): past this it checkpoints inline
 * after all. SQLite's default is 1,000 pages; ten times that (40 MiB with
 * 4 KiB pages) is reached only when the thread does not keep up.
 */
export const WRITER_CHECKPOINT_PAGES = 10_000;
/** The WAL size (bytes) at which the thread starts, read every START_CHECK_MS until then. */
export const START_AT_BYTES = 1024 * 1024;
const START_CHECK_MS = 1_000;
/** `journal_size_limit` of the writer (bytes): a WAL that grew past this is cut back when it starts over. */
export const WAL_SIZE_LIMIT_BYTES = 16 * 1024 * 1024;

/** One `PRAGMA wal_checkpoint(PASSIVE)`: frames in the WAL, and how many of them are in the database file now. */
export interface CheckpointResult {
  busy: number;
  log: number;
  checkpointed: number;
}

/** What the thread sends after each checkpoint: its result, or its error. */
export type CheckpointMessage = { result: CheckpointResult } | { error: string };

export class SqliteCheckpointer {
  private worker: Worker | undefined;
  private readonly waiting: NodeJS.Timeout;
  private readonly listeners = new Set<(message: CheckpointMessage) => void>();
  private closing = false;

  constructor(private readonly file: string) {
    this.waiting = setInterval(() => {
      if (walSize(file) >= START_AT_BYTES) this.start();
    }, START_CHECK_MS);
    this.waiting.unref();
  }

  private start(): void {
    clearInterval(this.waiting);
    const worker = sqliteThread('sqlite-checkpoint-worker', this.file);
    // It never keeps the process alive: closing the database, or exiting, ends it.
    worker.unref();
    worker.on('message', (message: CheckpointMessage) => this.emit(message));
    // A thread that fails leaves the checkpoints to the writer (WRITER_CHECKPOINT_PAGES); its listeners hear why.
    let failed = false;
    worker.on('error', (err) => {
      failed = true;
      this.emit({ error: `the checkpoint thread failed: ${err.message}` });
    });
    worker.on('exit', (code) => {
      if (!failed && !this.closing) this.emit({ error: `the checkpoint thread stopped (exit code ${code})` });
    });
    this.worker = worker;
  }

  private emit(message: CheckpointMessage): void {
    for (const listener of this.listeners) listener(message);
  }

  /** Calls `listener` with each message of the thread; returns the function that stops it. */
  onMessage(listener: (message: CheckpointMessage) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  async close(): Promise<void> {
    this.closing = true;
    clearInterval(this.waiting);
    this.listeners.clear();
    await this.worker?.terminate();
  }
}

function walSize(file: string): number {
  try {
    return fs.statSync(`${file}-wal`).size;
  } catch {
    return 0; // not there yet
  }
}

/** How often, at most, a checkpoint thread that keeps failing is logged again. */
export const CHECKPOINT_TROUBLE_LOG_EVERY_MS = 60_000;

/**
 * Logs the checkpoint thread's failures (a checkpoint that failed, the thread
 * gone): at the first, then at most once per `everyMs` with how many came
 * since, so a thread that fails at every round (4 a second) is one line a
 * minute. The writer's own checkpoint keeps the WAL bounded meanwhile, at a
 * cost to the event loop the operator should know of. Returns the function
 * that stops it.
 */
export function logCheckpointTrouble(
  checkpointer: Pick<SqliteCheckpointer, 'onMessage'>,
  logger: { warn(fields: object, message: string): void },
  now: () => number = Date.now,
  everyMs = CHECKPOINT_TROUBLE_LOG_EVERY_MS,
): () => void {
  let loggedAt: number | undefined;
  let since = 0;
  return checkpointer.onMessage((message) => {
    if (!('error' in message)) return;
    since += 1;
    const at = now();
    if (loggedAt !== undefined && at - loggedAt < everyMs) return;
    logger.warn(
      { err: message.error, failures: since, fallback_pages: WRITER_CHECKPOINT_PAGES },
      'SQLite WAL checkpoint failed; the writer checkpoints in its commits past fallback_pages until the thread succeeds again',
    );
    loggedAt = at;
    since = 0;
  });
}

