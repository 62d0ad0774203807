import assert from 'node:assert/strict';
import { sql } from 'kysely';
import { DatabaseTooNewError, openDatabase } from '@orloj/common/store';
import { MIGRATION_NAMES } from '../src/store/migrations/index.js';
import { createTestDatabase, ENGINES, type TestDatabase } from './support/stores.js';

for (const engine of ENGINES) {
  describe(`database upgrades [${engine}]`, function () {
    let database: TestDatabase | undefined;
    afterEach(async () => {
      await database?.drop();
      database = undefined;
    });

    it('refuses a database that a newer orloj migrated, naming the migration, instead of "corrupted migrations"', async function () {
      database = await createTestDatabase(engine, this);
      // What a newer release leaves behind: a migration this build does not know.
      await sql`insert into kysely_migration (name, timestamp) values ('9999-from-a-newer-orloj', ${new Date().toISOString()})`.execute(database.handle.db);

      const older = openDatabase(database.url);
      try {
        const status = await older.migrationStatus();
        assert.deepEqual(status.unknown, ['9999-from-a-newer-orloj']);
        await assert.rejects(older.migrate(), (err: unknown) => {
          assert.ok(err instanceof DatabaseTooNewError);
          assert.match(err.message, /^this database was migrated by a newer orloj \(migration 9999-from-a-newer-orloj\)/);
          assert.match(err.message, new RegExp(`knows migrations up to ${MIGRATION_NAMES.at(-1)!}`));
          assert.doesNotMatch(err.message, /corrupted/);
          return true;
        });
      } finally {
        await older.close();
      }
    });

    it('reports pending migrations without applying them, and none once applied', async function () {
      database = await createTestDatabase(engine, this, { migrate: false });
      assert.deepEqual(await database.handle.migrationStatus(), { applied: [], pending: [...MIGRATION_NAMES], unknown: [] });
      await database.handle.migrate();
      assert.deepEqual(await database.handle.migrationStatus(), { applied: [...MIGRATION_NAMES], pending: [], unknown: [] });
    });
  });
}
