import fs from 'node:fs';
import path from 'node:path';
import SQLite from 'better-sqlite3';

/** The busy wait for `orloj backup`, longer than the roles' (it copies the whole database under the lock). */
const BACKUP_BUSY_TIMEOUT_MS = 10_000;

export interface SqliteBackupResult {
  /** The backup written, as an absolute path. */
  file: string;
  bytes: number;
  /** The database's latest migration (a restore needs an orloj that knows it). */
  migration: string | undefined;
}

/**
 * A consistent copy of a live SQLite database (`orloj backup`). A plain copy
 * of `orloj.db` misses whatever still sits in the write-ahead log; `VACUUM
 * INTO` instead writes the database as one read transaction sees it (a
 * snapshot: writers go on meanwhile) into a fresh, compact file. The copy
 * goes to a file created with mode 0600 beside the target, is checked and
 * synced, and then renamed over the target, so `target` is either what it
 * was or the complete new copy.
 */
export function backupSqlite(source: string, target: string): SqliteBackupResult {
  if (!fs.existsSync(source)) throw new Error(`no database at ${path.resolve(source)} (check DATA_DIR / DATABASE_URL)`);
  const file = path.resolve(target);
  const dir = path.dirname(file);
  if (!fs.statSync(dir, { throwIfNoEntry: false })?.isDirectory()) throw new Error(`the backup's directory does not exist: ${dir}`);
  if (file === path.resolve(source)) throw new Error('the backup must not replace the database itself');

  const temporary = path.join(dir, `.${path.basename(file)}.${process.pid}.partial`);
  // VACUUM INTO writes into an empty existing file, keeping its mode: nobody else can read the copy at any point.
  fs.closeSync(fs.openSync(temporary, 'wx', 0o600));
  try {
    const db = new SQLite(source, { fileMustExist: true });
    try {
      db.pragma(`busy_timeout = ${BACKUP_BUSY_TIMEOUT_MS}`);
      db.prepare('vacuum into ?').run(temporary);
    } finally {
      db.close();
    }
    const migration = verify(temporary);
    const fd = fs.openSync(temporary, 'r+');
    try {
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    fs.renameSync(temporary, file);
    syncDirectory(dir);
    return { file, bytes: fs.statSync(file).size, migration };
  } catch (err) {
    fs.rmSync(temporary, { force: true });
    throw err;
  }
}

/** Checks the copy's structure; returns its latest migration. */
function verify(file: string): string | undefined {
  const db = new SQLite(file, { readonly: true, fileMustExist: true });
  try {
    const check = db.pragma('quick_check', { simple: true });
    if (check !== 'ok') throw new Error(`the backup failed its integrity check: ${String(check)}`);
    const row = db.prepare("select name from kysely_migration order by name desc limit 1").get() as { name: string } | undefined;
    return row?.name;
  } finally {
    db.close();
  }
}

/** Makes the rename durable (where the platform allows syncing a directory). */
function syncDirectory(dir: string): void {
  let fd: number | undefined;
  try {
    fd = fs.openSync(dir, 'r');
    fs.fsyncSync(fd);
  } catch {
    // Not every filesystem lets a directory be synced; the rename itself is atomic.
  } finally {
    if (fd !== undefined) fs.closeSync(fd);
  }
}
