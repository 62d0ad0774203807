import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import pg from 'pg';
import { sql } from 'kysely';
import { withSchemaIntrospection } from '../src/store/schema-introspection.js';
import { createTestDatabase, needService, type TestDatabase } from '@orloj/common/test-support';

/**
 * The migrator's view of PostgreSQL is the installation's own schema: another
 * schema in the same database (another installation, another test) is not
 * read, so dropping it meanwhile cannot fail a migration.
 */
describe('schema introspection for the migrator [postgres]', () => {
  let database: TestDatabase;
  let base: string;
  const other = `orloj_other_${crypto.randomBytes(4).toString('hex')}`;
  const admin = async (text: string) => {
    const c = new pg.Client({ connectionString: base });
    await c.connect();
    try {
      await c.query(text);
    } finally {
      await c.end();
    }
  };

  before(async function () {
    base = needService(this, 'postgres');
    database = await createTestDatabase('postgres', this);
    await admin(`create schema ${other}`);
    await admin(`create table ${other}.elsewhere (id integer)`);
  });
  after(async () => {
    if (base) await admin(`drop schema if exists ${other} cascade`);
    await database?.drop();
  });

  it('lists only the current schema and its tables', async () => {
    const { db } = database.handle;
    const schema = (await sql<{ s: string }>`select current_schema() as s`.execute(db)).rows[0]!.s;
    const introspection = withSchemaIntrospection(db, schema).introspection;
    assert.deepEqual(await introspection.getSchemas(), [{ name: schema }]);
    const tables = await introspection.getTables();
    assert.ok(tables.some((t) => t.name === 'workflows' && t.schema === schema));
    assert.ok(tables.every((t) => t.schema === schema && t.name !== 'elsewhere'));
    // And a migration run after the other schema is gone finds nothing to do, without error.
    await admin(`drop schema ${other} cascade`);
    assert.deepEqual(await database.handle.migrate(), []);
  });
});
