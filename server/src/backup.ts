import { loadConfig } from '@orloj/common/config';
import { backupSqlite, type SqliteBackupResult } from '@orloj/common/store';

type Env = Record<string, string | undefined>;

/** `orloj backup <file>`: a consistent copy of the embedded SQLite database, taken while orloj runs. */
export function backup(target: string, env: Env = process.env): SqliteBackupResult {
  const config = loadConfig(env);
  if (!config.databaseUrl.startsWith('sqlite:')) {
    throw new Error('orloj backup copies the embedded SQLite database; with PostgreSQL use pg_dump (docs/operations.md, "Backup and restore")');
  }
  const source = config.databaseUrl.slice('sqlite:'.length);
  if (source === ':memory:') throw new Error('DATABASE_URL is sqlite::memory:: an in-memory database has nothing to back up');
  return backupSqlite(source, target);
}
