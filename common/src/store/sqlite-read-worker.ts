/**
 * A SQLite reader thread (sqlite-reads.ts, SqliteReadPool): runs the reads
 * it is sent, one at a time, on a read-only connection of its own, and
 * answers with the rows as arrays. Started by sqliteThread, which lowers the
 * thread's priority first.
 */
import { parentPort, workerData } from 'node:worker_threads';
import type SQLite from 'better-sqlite3';
import { openReadConnection, preparedOnce, type ReadAnswer, type ReadRequest } from './sqlite-reads.js';

const port = parentPort!;
const connection = openReadConnection((workerData as { file: string }).file);
const statements = new Map<string, SQLite.Statement>();

port.on('message', (request: ReadRequest) => {
  let answer: ReadAnswer;
  try {
    answer = { id: request.id, rows: preparedOnce(statements, request.sql, connection, true).all(...request.parameters) as unknown[][] };
  } catch (err) {
    const e = err as { message?: string; code?: string; name?: string };
    answer = { id: request.id, error: { message: String(e.message ?? err), name: e.name ?? 'Error', ...(e.code ? { code: e.code } : {}) } };
  }
  port.postMessage(answer);
});
