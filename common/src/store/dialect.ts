import { sql, type Expression, type RawBuilder, type SqlBool } from 'kysely';

/**
 * Every difference between the two SQL engines lives here, so queries
 * elsewhere are written once.
 */
export type DialectName = 'sqlite' | 'postgres';

export interface DialectHelpers {
  readonly name: DialectName;
  /** Column type for UUIDs: native uuid in PostgreSQL, text in SQLite. */
  readonly uuidType: 'uuid' | 'text';
  /** 64-bit integer column type. */
  readonly bigintType: 'bigint' | 'integer';
  /** `haystack` contains `needle` literally (no pattern characters). */
  contains(haystack: Expression<string>, needle: string): RawBuilder<SqlBool>;
  /** Whether SELECT … FOR UPDATE is available (PostgreSQL) or implied by the single writer (SQLite). */
  readonly rowLocks: boolean;
  /** Whether an error is a unique-constraint violation. */
  isUniqueViolation(error: unknown): boolean;
}

export const postgresHelpers: DialectHelpers = {
  name: 'postgres',
  uuidType: 'uuid',
  bigintType: 'bigint',
  contains: (haystack, needle) => sql<SqlBool>`strpos(${haystack}, ${needle}) > 0`,
  rowLocks: true,
  isUniqueViolation: (e) => (e as { code?: string } | null)?.code === '23505',
};

export const sqliteHelpers: DialectHelpers = {
  name: 'sqlite',
  uuidType: 'text',
  bigintType: 'integer',
  contains: (haystack, needle) => sql<SqlBool>`instr(${haystack}, ${needle}) > 0`,
  rowLocks: false,
  isUniqueViolation: (e) => {
    const code = (e as { code?: string } | null)?.code;
    return code === 'SQLITE_CONSTRAINT_UNIQUE' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY';
  },
};
