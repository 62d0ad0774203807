import { sql, type DatabaseIntrospector, type DatabaseMetadata, type Kysely, type SchemaMetadata, type TableMetadata } from 'kysely';

/**
 * What Kysely's migrator asks of PostgreSQL — does the migrations' schema
 * exist, do their tables — answered for one schema. Kysely's own introspector
 * reads every column of every schema in the database and calls functions on
 * each (`has_schema_privilege`, `pg_get_serial_sequence`): it failed with
 * `schema "…" does not exist` when another installation (or test) sharing the
 * database dropped its schema meanwhile, and it costs more with every schema there.
 */
function oneSchemaIntrospector(db: Kysely<any>, schema: string): DatabaseIntrospector {
  const getTables = async (): Promise<TableMetadata[]> => {
    const { rows } = await sql<{ name: string; kind: string }>`
      select c.relname as name, c.relkind as kind
      from pg_catalog.pg_class c join pg_catalog.pg_namespace n on n.oid = c.relnamespace
      where n.nspname = ${schema} and c.relkind in ('r', 'v', 'p')`.execute(db);
    return rows.map((r) => ({ name: r.name, schema, isView: r.kind === 'v', columns: [] }));
  };
  return {
    async getSchemas(): Promise<SchemaMetadata[]> {
      const { rows } = await sql<{ name: string }>`select nspname as name from pg_catalog.pg_namespace where nspname = ${schema}`.execute(db);
      return rows;
    },
    getTables,
    async getMetadata(): Promise<DatabaseMetadata> {
      return { tables: await getTables() };
    },
  };
}

/** `db` as the migrator sees it: the same connections, its introspection limited to `schema`. */
export function withSchemaIntrospection<DB>(db: Kysely<DB>, schema: string): Kysely<DB> {
  const introspection = oneSchemaIntrospector(db, schema);
  return new Proxy(db, {
    get(target, prop) {
      if (prop === 'introspection') return introspection;
      const value: unknown = Reflect.get(target, prop, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}
