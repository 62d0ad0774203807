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
  /**
   * `haystack` contains the needle literally, ignoring case (Unicode aware):
   * both sides are compared after {@link foldCase}. `foldedNeedle` is the
   * text the user typed, already passed through foldCase (a bound value, so a
   * compiled read can take it per run); `%`, `_`, `\`, `*` … are plain
   * characters. An empty needle matches everything. Used by log search.
   */
  containsFolded(haystack: Expression<string>, foldedNeedle: string): RawBuilder<SqlBool>;
  /**
   * The bloom filter `bloom` (a blob whose length is a power of two) lacks
   * one of `probes` (hash values from log-blocks.ts, bound as
   * {@link DialectHelpers.probesParam} made them): its block cannot hold the
   * needle. Used by log search to skip blocks (docs/adr/0007).
   */
  bloomLacks(bloom: Expression<Uint8Array>, probes: unknown): RawBuilder<SqlBool>;
  /** The probes of {@link DialectHelpers.bloomLacks} as a bound value: an array (PostgreSQL) or decimal text (SQLite). */
  probesParam(probes: readonly number[]): unknown;
  /** Whether SELECT … FOR UPDATE is available (PostgreSQL) or implied by the single writer (SQLite). */
  readonly rowLocks: boolean;
  /** Most bind parameters one statement may carry (SQLite 32 766, PostgreSQL 65 535). */
  readonly maxParameters: number;
  /** Whether an error is a unique-constraint violation. */
  isUniqueViolation(error: unknown): boolean;
  /**
   * `column` is one of `values` (ids, of `uuidType`), as one bound value: the
   * SQL text is the same whatever the count, so the statement is prepared
   * once (an `in (?, ?, …)` list is a new text, prepared again, at every
   * length) and never nears the bind-parameter limit. `= any($1::uuid[])` on
   * PostgreSQL, `in (select value from json_each(?) as given)` on SQLite; both
   * seek the column's index per value (a SQLite plan scans only `given`).
   */
  idIn(column: string, values: readonly string[]): RawBuilder<SqlBool>;
  /**
   * The rows of one bound value, for `from`/`join` in a statement of fixed
   * text: a relation `alias` with `columns` (name → element type: 'id', 'int'
   * or 'text'), the i-th value of each column from `rows[i]`. unnest() of
   * parallel arrays on PostgreSQL, json_each() of one JSON array on SQLite.
   */
  rowsOf(alias: string, columns: Readonly<Record<string, 'id' | 'int' | 'text'>>, rows: readonly (readonly unknown[])[]): RawBuilder<unknown>;
  /**
   * After a table name: SQLite's `indexed by <index>`, where its planner
   * without fresh statistics picks another index; nothing on PostgreSQL,
   * which plans by its own statistics.
   */
  indexedBy(index: string): RawBuilder<unknown>;
}

const PLAIN_NAME = /^[a-z_][a-z0-9_]*$/;

function plain(name: string): string {
  if (!PLAIN_NAME.test(name)) throw new Error(`not a plain identifier: ${name}`);
  return name;
}

/**
 * The case fold of log search, in JavaScript: the Unicode simple lowercase
 * mapping of every code point (`'Grüße'` → `'grüße'`, `'İ'` → `'i'`, `'ẞ'` →
 * `'ß'`, `'Σ'` → `'σ'` wherever it stands). It never changes the length of a
 * string (UTF-16 units), so an index into `foldCase(s)` is the same index into
 * `s`: a highlighter finds matches in the folded text and cuts the original.
 *
 * PostgreSQL's `lower()` under a UTF-8 libc locale (C.UTF-8, en_US.UTF-8 …)
 * is the same per-code-point mapping; SQLite calls this very function
 * (`orloj_fold()`, `orloj_contains_folded()`, registered by openDatabase). It is not full case folding:
 * `'ß'` does not match `'ss'` (on either engine). docs/adr/0003 lists the
 * residual differences.
 */
export function foldCase(text: string): string {
  // String.prototype.toLowerCase applies the full mapping, which differs from
  // the simple one in exactly two places: U+0130 becomes two code points, and
  // a word-final capital sigma becomes ς. Both are replaced first.
  return (FOLD_SPECIAL.test(text) ? text.replace(FOLD_SPECIAL_G, foldSpecial) : text).toLowerCase();
}
const FOLD_SPECIAL = /[\u0130\u03a3]/;
const FOLD_SPECIAL_G = /[\u0130\u03a3]/g;
const foldSpecial = (c: string): string => (c === '\u0130' ? 'i' : '\u03c3');

/** The SQL name under which SQLite connections know {@link foldCase}: `orloj_fold(text)`. */
export const SQLITE_FOLD_FUNCTION = 'orloj_fold';
/**
 * `orloj_contains_folded(text, folded_needle)`: 1 when foldCase(text) contains
 * the (already folded) needle. What containsFolded uses on SQLite: 30 % faster
 * than `instr(orloj_fold(text), needle)`, which converts every folded row back
 * to UTF-8 for instr().
 */
export const SQLITE_CONTAINS_FOLDED_FUNCTION = 'orloj_contains_folded';
/** `orloj_bloom_lacks(bloom, probes)`: what bloomLacks uses on SQLite (log-blocks.ts's sqliteBloomLacks). */
export const SQLITE_BLOOM_LACKS_FUNCTION = 'orloj_bloom_lacks';

export const postgresHelpers: DialectHelpers = {
  name: 'postgres',
  uuidType: 'uuid',
  bigintType: 'bigint',
  contains: (haystack, needle) => sql<SqlBool>`strpos(${haystack}, ${needle}) > 0`,
  containsFolded: (haystack, foldedNeedle) => sql<SqlBool>`strpos(lower(${haystack}), ${foldedNeedle}) > 0`,
  // The bit `h mod bits` of the filter, for every probe h: bytea stays in the row
  // (storage plain, migration 0013), so get_byte() reads it in place.
  bloomLacks: (bloom, probes) =>
    sql<SqlBool>`exists (select 1 from unnest(${probes}::bigint[]) as p(h) where get_byte(${bloom}, ((p.h % (octet_length(${bloom}) * 8)) / 8)::integer) & (1 << (p.h % 8)::integer) = 0)`,
  probesParam: (probes) => probes,
  rowLocks: true,
  maxParameters: 65_535,
  isUniqueViolation: (e) => (e as { code?: string } | null)?.code === '23505',
  idIn: (column, values) => sql<SqlBool>`${sql.ref(column)} = any(${[...values]}::uuid[])`,
  rowsOf: (alias, columns, rows) => {
    const names = Object.keys(columns).map(plain);
    const types = { id: 'uuid', int: 'bigint', text: 'text' } as const;
    const arrays = Object.values(columns).map((type, i) => sql`${rows.map((r) => r[i])}::${sql.raw(types[type])}[]`);
    return sql`unnest(${sql.join(arrays)}) as ${sql.raw(plain(alias))}(${sql.raw(names.join(', '))})`;
  },
  indexedBy: () => sql.raw(''),
};

export const sqliteHelpers: DialectHelpers = {
  name: 'sqlite',
  uuidType: 'text',
  bigintType: 'integer',
  contains: (haystack, needle) => sql<SqlBool>`instr(${haystack}, ${needle}) > 0`,
  containsFolded: (haystack, foldedNeedle) => sql<SqlBool>`${sql.raw(SQLITE_CONTAINS_FOLDED_FUNCTION)}(${haystack}, ${foldedNeedle})`,
  bloomLacks: (bloom, probes) => sql<SqlBool>`${sql.raw(SQLITE_BLOOM_LACKS_FUNCTION)}(${bloom}, ${probes})`,
  probesParam: (probes) => probes.join(','),
  rowLocks: false,
  maxParameters: 32_766,
  isUniqueViolation: (e) => {
    const code = (e as { code?: string } | null)?.code;
    return code === 'SQLITE_CONSTRAINT_UNIQUE' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY';
  },
  idIn: (column, values) => sql<SqlBool>`${sql.ref(column)} in (select value from json_each(${JSON.stringify(values)}) as given)`,
  rowsOf: (alias, columns, rows) => {
    const names = Object.keys(columns).map(plain);
    const picks = names.map((name, i) => `value ->> ${i} as ${name}`).join(', ');
    return sql`(select ${sql.raw(picks)} from json_each(${JSON.stringify(rows)}) as given) as ${sql.raw(plain(alias))}`;
  },
  indexedBy: (index) => sql.raw(`indexed by ${plain(index)}`),
};
