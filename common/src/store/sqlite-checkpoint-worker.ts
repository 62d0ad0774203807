/**
 * The SQLite checkpoint thread (sqlite-checkpoint.ts, SqliteCheckpointer):
 * checkpoints the WAL on a connection of its own every CHECKPOINT_EVERY_MS in
 * which another connection committed (or after one that left frames behind),
 * PASSIVE, and sends the parent each result.
 * Started by sqliteThread, which lowers the thread's priority first.
 */
import { parentPort, workerData } from 'node:worker_threads';
import SQLite from 'better-sqlite3';
import { CHECKPOINT_EVERY_MS, type CheckpointMessage, type CheckpointResult } from './sqlite-checkpoint.js';
import { SQLITE_BUSY_TIMEOUT_MS } from './sqlite-reads.js';

const port = parentPort!;
const connection = new SQLite((workerData as { file: string }).file, { fileMustExist: true });
connection.pragma(`busy_timeout = ${SQLITE_BUSY_TIMEOUT_MS}`);
let seen: number | undefined;
let complete = false;

setInterval(() => {
  // data_version moves when another connection commits: an idle database costs one read of it.
  const version = connection.pragma('data_version', { simple: true }) as number;
  if (version === seen && complete) return;
  seen = version;
  let message: CheckpointMessage;
  try {
    const [result] = connection.pragma('wal_checkpoint(PASSIVE)') as CheckpointResult[];
    complete = result!.checkpointed === result!.log;
    message = { result: result! };
  } catch (err) {
    complete = false;
    message = { error: err instanceof Error ? err.message : String(err) };
  }
  port.postMessage(message);
}, CHECKPOINT_EVERY_MS);
