import { CompiledQuery } from 'kysely';

/**
 * PostgreSQL: one UPDATE for many rows, each with values of its own, from
 * parallel arrays unpacked by unnest(): `update t set c = v.c … from
 * unnest($1::uuid[], …) as v(id, …) where t.id = v.id and …`. One statement
 * and one round trip for a batch instead of one per row; each row is matched
 * by its own conditions exactly as a single-row UPDATE would match it.
 */
export interface UnnestUpdate {
  table: string;
  /** Set to one value for every row: column → SQL parameter value. */
  constant: Readonly<Record<string, unknown>>;
  /** Set per row: column → [PostgreSQL element type, one value per row]. */
  perRow: Readonly<Record<string, readonly [type: string, values: readonly unknown[]]>>;
  /** The row key: [PostgreSQL type, one id per row]; matched against `table.id`. */
  ids: readonly [type: string, values: readonly string[]];
  /** Compared per row: `table.column = v.<name>` for each entry (name → [type, column, values]). */
  match?: Readonly<Record<string, readonly [type: string, column: string, values: readonly unknown[]]>>;
  /** Further conditions on the target row, in SQL over `table` (no parameters). */
  where?: string;
  returning: string;
}

const IDENT = /^[a-z_][a-z0-9_]*$/;

function ident(name: string): string {
  if (!IDENT.test(name)) throw new Error(`not a plain identifier: ${name}`);
  return `"${name}"`;
}

export function unnestUpdate(u: UnnestUpdate): CompiledQuery {
  const params: unknown[] = [];
  const param = (value: unknown, type?: string) => {
    params.push(value);
    return type ? `$${params.length}::${type}` : `$${params.length}`;
  };
  const sets: string[] = [];
  for (const [column, value] of Object.entries(u.constant)) sets.push(`${ident(column)} = ${param(value)}`);
  const arrays: string[] = [param(u.ids[1], `${u.ids[0]}[]`)];
  const names: string[] = ['"_id"'];
  for (const [column, [type, values]] of Object.entries(u.perRow)) {
    sets.push(`${ident(column)} = v.${ident(column)}`);
    arrays.push(param(values, `${type}[]`));
    names.push(ident(column));
  }
  const conditions = [`${ident(u.table)}.id = v."_id"`];
  for (const [name, [type, column, values]] of Object.entries(u.match ?? {})) {
    arrays.push(param(values, `${type}[]`));
    names.push(ident(`_m_${name}`));
    conditions.push(`${ident(u.table)}.${ident(column)} = v.${ident(`_m_${name}`)}`);
  }
  if (u.where) conditions.push(u.where);
  const text =
    `update ${ident(u.table)} set ${sets.join(', ')} from unnest(${arrays.join(', ')}) as v(${names.join(', ')}) ` +
    `where ${conditions.join(' and ')} returning ${u.returning}`;
  return CompiledQuery.raw(text, params);
}
