import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import { MIGRATION_NAMES } from '@orloj/common/store';
import { createTestDatabase, ENGINES, type TestDatabase } from '@orloj/common/test-support';
import { finish, orloj } from './support/cli.js';

for (const engine of ENGINES) {
  describe(`orloj upgrades [${engine}]`, function () {
    this.timeout(90_000);
    let database: TestDatabase | undefined;
    let dir: string;
    let env: Record<string, string>;
    const prepare = async (ctx: Mocha.Context, migrate: boolean) => {
      database = await createTestDatabase(engine, ctx, { migrate });
      env = { DATA_DIR: dir, DATABASE_URL: database.url, BUS_URL: 'memory:' };
      return database;
    };
    beforeEach(() => {
      dir = fs.mkdtempSync(path.join(os.tmpdir(), 'orloj-upgrade-'));
    });
    afterEach(async () => {
      await database?.drop();
      database = undefined;
      fs.rmSync(dir, { recursive: true, force: true });
    });

    it('an older orloj refuses to start on a database that a newer one migrated, and says so', async function () {
      const db = await prepare(this, true);
      await sql`insert into kysely_migration (name, timestamp) values ('9999-from-a-newer-orloj', ${new Date().toISOString()})`.execute(db.handle.db);
      for (const args of [['start', '--roles', 'scheduler'], ['migrate'], ['migrate', '--check']]) {
        const r = await finish(orloj(args, env));
        assert.equal(r.code, 1, `${args.join(' ')}: ${r.stdout}${r.stderr}`);
        assert.match(r.stderr, /this database was migrated by a newer orloj \(migration 9999-from-a-newer-orloj\)/);
        assert.doesNotMatch(r.stderr, /corrupted/);
      }
    });

    it('migrate --check lists pending migrations without applying them (exit 3), and exits 0 once up to date', async function () {
      await prepare(this, false);
      const pending = await finish(orloj(['migrate', '--check'], env));
      assert.equal(pending.code, 3, pending.stderr);
      assert.equal(pending.stdout.trim(), `pending: ${MIGRATION_NAMES.join(', ')}`);
      assert.equal((await finish(orloj(['migrate', '--check'], env))).code, 3, 'the check applied nothing');
      assert.equal((await finish(orloj(['migrate'], env))).code, 0);
      const done = await finish(orloj(['migrate', '--check'], env));
      assert.equal(done.code, 0, done.stderr);
      assert.match(done.stdout, /up to date/);
    });

    it('applies every migration exactly once when several processes migrate at the same time', async function () {
      await prepare(this, false);
      const runs = await Promise.all([0, 1, 2].map(() => finish(orloj(['migrate'], env))));
      const applied: string[] = [];
      for (const r of runs) {
        assert.equal(r.code, 0, r.stderr);
        const m = /^applied: (.*)$/m.exec(r.stdout);
        if (m) applied.push(...m[1]!.split(', '));
      }
      // The migration lock: one process migrates, the others wait and find nothing left to do.
      assert.deepEqual(applied.sort(), [...MIGRATION_NAMES]);
    });
  });
}
