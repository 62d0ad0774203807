import fs from 'node:fs';
import path from 'node:path';

/**
 * DATA_DIR holds payload secrets, password hashes, session ids and logs (the
 * SQLite database), the cookie secrets and the signing keys: nobody but the
 * service's own user may read it, whatever the umask.
 */

/** Mode bits that let the group or others in. */
const NOT_OWNER = 0o077;

/** Creates a directory (and missing parents) as 0700; an existing one is left as it is. */
export function makePrivateDir(dir: string): void {
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
}

/**
 * Takes group and other permissions off a file orloj made, when it exists
 * (an earlier version, or another umask, may have left it open). Returns
 * whether the mode changed; a file owned by someone else is left alone.
 */
export function tightenFile(file: string): boolean {
  let mode: number;
  try {
    mode = fs.statSync(file).mode & 0o777;
  } catch {
    return false;
  }
  if ((mode & NOT_OWNER) === 0) return false;
  try {
    fs.chmodSync(file, mode & 0o700);
    return true;
  } catch {
    return false;
  }
}

/** Creates an empty file as 0600 unless it exists, then tightens it: for files another library creates (SQLite's 0644). */
export function preparePrivateFile(file: string): void {
  try {
    fs.closeSync(fs.openSync(file, fs.constants.O_CREAT | fs.constants.O_EXCL | fs.constants.O_WRONLY, 0o600));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
  tightenFile(file);
}

/** The SQLite companions of a database file; SQLite gives them the database file's mode. */
export function sqliteFiles(file: string): string[] {
  return [file, `${file}-wal`, `${file}-shm`, `${file}-journal`];
}

/**
 * What an operator should hear at start: an existing DATA_DIR (or its keys
 * directory) that the group or others may enter. Empty when all is private or
 * DATA_DIR does not exist.
 */
export function dataDirWarnings(dataDir: string): string[] {
  const warnings: string[] = [];
  for (const dir of [dataDir, path.join(dataDir, 'keys')]) {
    let mode: number;
    try {
      const stat = fs.statSync(dir);
      if (!stat.isDirectory()) continue;
      mode = stat.mode & 0o777;
    } catch {
      continue;
    }
    if ((mode & NOT_OWNER) !== 0) {
      warnings.push(
        `${dir} is open to other users (mode ${mode.toString(8).padStart(4, '0')}); it holds secrets and data: chmod 700 ${dir}`,
      );
    }
  }
  return warnings;
}
