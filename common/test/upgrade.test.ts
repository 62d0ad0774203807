import assert from 'node:assert/strict';
import { Migrator, sql, type Kysely } from 'kysely';
import { newId } from '@orloj/common/core';
import { jitterOffsetMs, type JobStatus } from '@orloj/common/domain';
import { fnv1a32 } from '../src/domain/jitter.js';
import { DatabaseTooNewError, openDatabase, ROLLUP_BUCKET_COLUMNS, Store } from '@orloj/common/store';
import { MIGRATION_NAMES, migrationProvider } from '../src/store/migrations/index.js';
import { insertJob, insertUser, workflowFixture } from './support/fixtures.js';
import { createTestDatabase, ENGINES, type TestDatabase } from './support/stores.js';

/** A migrator over the test database's own schema, to stop at a given migration. */
async function migratorOf(database: TestDatabase): Promise<Migrator> {
  const { db, dialect } = database.handle;
  const schema = dialect.name === 'postgres' ? (await sql<{ s: string }>`select current_schema() as s`.execute(db)).rows[0]!.s : undefined;
  return new Migrator({ db, provider: migrationProvider(dialect), ...(schema ? { migrationTableSchema: schema } : {}) });
}

for (const engine of ENGINES) {
  describe(`database upgrades [${engine}]`, function () {
    let database: TestDatabase | undefined;
    afterEach(async () => {
      await database?.drop();
      database = undefined;
    });

    /** A new database migrated up to `name` and no further, a store over it, and the migrator to go on with. */
    async function migratedTo(ctx: Mocha.Context, name: string): Promise<{ migrator: Migrator; store: Store; handle: TestDatabase['handle'] }> {
      database = await createTestDatabase(engine, ctx, { migrate: false });
      const migrator = await migratorOf(database);
      assert.equal((await migrator.migrateTo(name)).error, undefined);
      return { migrator, store: Store.fromHandle(database.handle), handle: database.handle };
    }

    /** migratedTo(), with a user and a built workflow of theirs; `db` untyped, for tables as they were then. */
    async function builtWorkflowAt(ctx: Mocha.Context, name: string) {
      const { migrator, store, handle } = await migratedTo(ctx, name);
      const userId = await insertUser(store);
      const w = workflowFixture(userId, { buildStatus: 'COMPLETED', buildCompletedAt: 0 });
      await store.workflows.insert(w);
      return { migrator, store, userId, w, db: handle.db as Kysely<any> };
    }

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

    it("0016 counts each user's workflows, terminated ones included", async function () {
      const { migrator, store } = await migratedTo(this, '0015-notification-state-changes');

      const [busy, idle] = [newId(), newId()];
      for (const id of [busy, idle]) {
        await store.users.insert({ id, email: `${id}@example.com`, passwordHash: 'x', notificationPreference: 'ALL', createdAt: 0, updatedAt: 0 });
      }
      for (let i = 0; i < 3; i++) await store.workflows.insert(workflowFixture(busy, { buildStatus: 'COMPLETED', buildCompletedAt: 0 }));
      await store.workflows.insert(workflowFixture(busy, { buildStatus: 'COMPLETED', buildCompletedAt: 0, terminatedAt: 1 }));

      assert.equal((await migrator.migrateToLatest()).error, undefined);
      assert.equal(await store.users.workflowCount(busy), 4);
      assert.equal(await store.users.workflowCount(idle), 0);
    });

    it("0023 turns each workflow's hourly rollups into running totals", async function () {
      const { migrator, store, userId, w, db } = await builtWorkflowAt(this, '0019-workflow-attention');
      const hour = (h: number, runs: number, failures: number, first: number) => ({
        workflow_id: w.id,
        user_id: userId,
        hour_at: h * 3_600_000,
        runs,
        failures,
        histogram: JSON.stringify([first, runs - first]),
      });
      await db.insertInto('workflow_rollups').values([hour(2, 3, 1, 2), hour(1, 2, 0, 2), hour(7, 1, 1, 0)]).execute();

      assert.equal((await migrator.migrateTo('0024-attention-paused')).error, undefined);
      const rows = await db.selectFrom('workflow_rollups').select(['hour_at', 'runs', 'failures', 'histogram']).orderBy('hour_at').execute();
      assert.deepEqual(
        rows.map((r) => [Number(r.hour_at) / 3_600_000, r.runs, r.failures, JSON.parse(r.histogram as string)]),
        [
          [1, 2, 0, [2, 0]],
          [2, 5, 1, [4, 1]],
          [7, 6, 2, [4, 2]],
        ],
      );
      assert.equal((await migrator.migrateToLatest()).error, undefined);
      assert.deepEqual([...(await store.rollups.totals(userId, 2 * 3_600_000)).values()].map((t) => [t.runs, t.failures, t.histogram.slice(0, 3)]), [[4, 2, [2, 2, 0]]]);
    });

    it("0026 moves each rollup's histogram from JSON text to a column a bucket", async function () {
      const { migrator, userId, w, db } = await builtWorkflowAt(this, '0024-attention-paused');
      const full = ROLLUP_BUCKET_COLUMNS.map((_, i) => i * 1_000 + 1);
      await db
        .insertInto('workflow_rollups')
        .values([
          { workflow_id: w.id, user_id: userId, hour_at: 3_600_000, runs: 40, failures: 1, histogram: JSON.stringify(full) },
          { workflow_id: w.id, user_id: userId, hour_at: 0, runs: 3, failures: 0, histogram: '[1,2]' },
        ])
        .execute();

      assert.equal((await migrator.migrateToLatest()).error, undefined);
      const rows = await db.selectFrom('workflow_rollups').select(['hour_at', 'runs', 'failures', ...ROLLUP_BUCKET_COLUMNS]).orderBy('hour_at').execute();
      assert.deepEqual(
        rows.map((r) => [Number(r.hour_at), r.runs, r.failures, ROLLUP_BUCKET_COLUMNS.map((c) => r[c])]),
        [
          [0, 3, 0, [1, 2, ...new Array<number>(ROLLUP_BUCKET_COLUMNS.length - 2).fill(0)]],
          [3_600_000, 40, 1, full],
        ],
      );
    });

    it('0024 ranks paused workflows as paused, below the active ones and above the terminated', async function () {
      const { migrator, store, handle } = await migratedTo(this, '0019-workflow-attention');
      const userId = await insertUser(store);
      const built = { buildStatus: 'COMPLETED' as const, buildCompletedAt: 0 };
      const flows = {
        healthy: workflowFixture(userId, built),
        paused: workflowFixture(userId, { ...built, pausedAt: 1, consecutiveJobFailuresCount: 1 }),
        terminated: workflowFixture(userId, { ...built, terminatedAt: 1 }),
      };
      for (const w of Object.values(flows)) await store.workflows.insert(w);

      assert.equal((await migrator.migrateToLatest()).error, undefined);
      const { db } = handle;
      const rank = async (id: string) => Number((await db.selectFrom('workflows').select('attention').where('id', '=', id).executeTakeFirstOrThrow()).attention);
      assert.deepEqual([await rank(flows.healthy.id), await rank(flows.paused.id), await rank(flows.terminated.id)], [3, 4, 5]);
    });

    it('0029 stores the whole-second jitter offsets workflows had, so no slot moves on the upgrade', async function () {
      const { migrator, store, userId } = await builtWorkflowAt(this, '0028-queued-jobs');
      const built = { buildStatus: 'COMPLETED' as const, buildCompletedAt: 0 };
      // As an older orloj wrote them: jitter_seconds only (an offset of 0 is not written).
      const jittered = [1, 40, 3600].map((jitterSeconds) => workflowFixture(userId, { ...built, jitterSeconds, jitterOffsetMs: 0 }));
      const plain = workflowFixture(userId, built);
      for (const w of [...jittered, plain]) await store.workflows.insert(w);

      assert.equal((await migrator.migrateToLatest()).error, undefined);
      const stored = new Map((await store.workflows.findByIds([...jittered, plain].map((w) => w.id))).map((w) => [w.id, w.jitterOffsetMs]));
      for (const w of jittered) {
        // What every build before 0029 derived at each pass: whole seconds in [0, jitter_seconds].
        assert.equal(stored.get(w.id), (fnv1a32(w.id) % (w.jitterSeconds + 1)) * 1000, `jitter ${w.jitterSeconds} s`);
      }
      assert.equal(stored.get(plain.id), 0);
      // A workflow created after it takes an offset to the millisecond.
      const fresh = workflowFixture(userId, { ...built, jitterSeconds: 59 });
      await store.workflows.insert(fresh);
      assert.equal((await store.workflows.findByIds([fresh.id]))[0]!.jitterOffsetMs, jitterOffsetMs(fresh.id, 59));
    });

    it('0015 marks the state changes among older notifications, WEB_RECOVERED ones becoming WEB_SUCCESS', async function () {
      const { store, handle } = await migratedTo(this, '0014-job-request-id');
      const { db } = handle;

      const userId = await insertUser(store);
      const w = workflowFixture(userId, { buildStatus: 'COMPLETED', buildCompletedAt: 0 });
      const fresh = workflowFixture(userId, { buildStatus: 'COMPLETED', buildCompletedAt: 0 });
      for (const x of [w, fresh]) await store.workflows.insert(x);
      const jobs: Record<string, string> = {};
      const job = async (name: string, wf: typeof w, status: JobStatus, at: number) => {
        const j = await insertJob(store, wf, status, { at, completedAt: at });
        jobs[name] = j.id;
      };
      // w: C F F (canceled) C F — down twice; fresh: its first run failed — down.
      await job('c1', w, 'COMPLETED', 1_000);
      await job('f2', w, 'FAILED', 2_000);
      await job('f3', w, 'FAILED', 3_000);
      await job('x4', w, 'CANCELED', 4_000);
      await job('c5', w, 'COMPLETED', 5_000);
      await job('f6', w, 'FAILED', 6_000);
      await job('f1', fresh, 'FAILED', 1_000);
      const payload = (title: string) => JSON.stringify({ title, message: 'm', entity_type: 'WORKFLOW', entity_id: w.id, workflow_id: w.id, action_url: `/workflows/${w.id}` });
      const rows: [key: string, kind: string, title: string, workflowId?: string][] = [
        [`job.completed:${jobs.c1}`, 'WEB_SUCCESS', 'Job completed'],
        [`job.failed:${jobs.f2}`, 'WEB_ERROR', 'Job failed'],
        [`job.failed:${jobs.f3}`, 'WEB_ERROR', 'Job failed'],
        [`job.canceled:${jobs.x4}`, 'WEB_INFO', 'Job canceled'],
        [`workflow.recovered:${w.id}:${jobs.c5}`, 'WEB_RECOVERED', 'Workflow recovered'],
        [`job.failed:${jobs.f6}`, 'WEB_ERROR', 'Job failed'],
        [`job.failed:${jobs.f1}`, 'WEB_ERROR', 'Job failed', fresh.id],
        [`build.failed:${w.id}:0`, 'WEB_ERROR', 'Build failed'],
        [`workflow.terminated:${w.id}:1`, 'WEB_ALERT', 'Workflow terminated automatically'],
        [`workflow.terminated:${fresh.id}:0`, 'WEB_INFO', 'Workflow terminated', fresh.id],
      ];
      for (const [i, [key, kind, title, workflowId]] of rows.entries()) {
        await db
          .insertInto('notifications')
          .values({ id: newId(), user_id: userId, workflow_id: workflowId ?? w.id, dedupe_key: `${userId}:${key}`, kind, payload: payload(title), read_at: null, created_at: i, updated_at: i })
          .execute();
      }

      await handle.migrate();
      const after = await db.selectFrom('notifications').select(['dedupe_key', 'kind', 'state_change', 'payload']).orderBy('created_at').execute();
      assert.deepEqual(
        after.map((r) => [r.dedupe_key.slice(userId.length + 1), r.kind, r.state_change]),
        [
          [`job.completed:${jobs.c1}`, 'WEB_SUCCESS', null],
          [`job.failed:${jobs.f2}`, 'WEB_ERROR', 'down'],
          [`job.failed:${jobs.f3}`, 'WEB_ERROR', null],
          [`job.canceled:${jobs.x4}`, 'WEB_INFO', null],
          [`workflow.recovered:${w.id}:${jobs.c5}`, 'WEB_SUCCESS', 'recovered'],
          [`job.failed:${jobs.f6}`, 'WEB_ERROR', 'down'],
          [`job.failed:${jobs.f1}`, 'WEB_ERROR', 'down'],
          [`build.failed:${w.id}:0`, 'WEB_ERROR', 'build_failed'],
          [`workflow.terminated:${w.id}:1`, 'WEB_ALERT', 'terminated'],
          [`workflow.terminated:${fresh.id}:0`, 'WEB_INFO', null],
        ],
      );
      // The payload says it as the notifier writes it; the others are left as they were.
      for (const r of after) {
        const p = JSON.parse(r.payload) as Record<string, string>;
        assert.equal(p.state_change ?? null, r.state_change, r.payload);
        assert.equal(p.title, rows.find(([key]) => r.dedupe_key.endsWith(key))![2]);
      }
      const listed = await store.notifications.list({ userId, unreadOnly: false, stateChange: true, limit: 100 });
      assert.equal(listed.length, 6);
    });
  });
}
