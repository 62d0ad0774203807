/**
 * The fair hand-out's reads of the runners' queue (JobQueueRepo,
 * docs/adr/0014, addendum): which PENDING jobs a pass may hand out, checked
 * against the rule written out in full below, and that a pass reads the room
 * it fills and the users with pending work, never the PENDING backlog (the
 * query plans of both engines, no timing).
 */
import assert from 'node:assert/strict';
import type { Job, Workflow } from '@orloj/common/domain';
import { Store } from '@orloj/common/store';
import { analyzeJobs, assertNoBacklogRead, describeEachEngine, insertUser, insertWorkflowsWithJobs, jobFixture, planOf, tracedStore, workflowFixture, type TestDatabase } from '@orloj/common/test-support';

const NOW = Date.UTC(2026, 0, 1, 12);

/** A small deterministic PRNG (mulberry32): the same scenarios on every run. */
function random(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * The rule, over every PENDING job (as the query before issue 25's fix ranked
 * them): of a workflow built, active and without a QUEUED or RUNNING job, due
 * by `now`; one per workflow; each user's in order (manual first, then the
 * oldest, then by id), at most `cap + 1` of them; then the users' first jobs,
 * their second ones and so on, by age and id within a round; the first `limit`.
 */
async function expected(database: TestDatabase, now: number, limit: number, perUser: number): Promise<{ ids: string[]; all: number }> {
  const { db } = database.store;
  const busy = new Set((await db.selectFrom('jobs').select('workflow_id').where('status', 'in', ['QUEUED', 'RUNNING']).execute()).map((r) => r.workflow_id));
  const rows = await db
    .selectFrom('jobs as j')
    .innerJoin('workflows as w', 'w.id', 'j.workflow_id')
    .select(['j.id', 'j.user_id', 'j.workflow_id', 'j.trigger', 'j.scheduled_at'])
    .where('j.status', '=', 'PENDING')
    .where('j.scheduled_at', '<=', now)
    .where('w.build_status', '=', 'COMPLETED')
    .where('w.terminated_at', 'is', null)
    .execute();
  const byId = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
  const order = (a: (typeof rows)[number], b: (typeof rows)[number]) =>
    Number(b.trigger === 'MANUAL') - Number(a.trigger === 'MANUAL') || a.scheduled_at - b.scheduled_at || byId(a.id, b.id);
  const byUser = new Map<string, typeof rows>();
  for (const r of rows.filter((r) => !busy.has(r.workflow_id)).sort(order)) {
    const list = byUser.get(r.user_id) ?? [];
    if (!list.some((o) => o.workflow_id === r.workflow_id)) list.push(r);
    byUser.set(r.user_id, list);
  }
  const cap = Math.min(perUser, limit);
  const ranked = [...byUser.values()].flatMap((list) => list.slice(0, cap + 1).map((r, i) => ({ rank: i + 1, r })));
  ranked.sort((a, b) => a.rank - b.rank || a.r.scheduled_at - b.r.scheduled_at || byId(a.r.id, b.r.id));
  return { ids: ranked.slice(0, limit).map((x) => x.r.id), all: [...byUser.values()].reduce((n, list) => n + list.length, 0) };
}

describeEachEngine("the fair hand-out's reads of the runners' queue", (db, engine) => {
  const store = (): Store => db().store;

  it('takes users in turn, manual runs first, then the oldest, one per workflow, of workflows free to run', async function () {
    this.timeout(300_000);
    const next = random(25);
    const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)]!;
    for (let scenario = 0; scenario < 12; scenario++) {
      const users: string[] = [];
      for (let u = 1 + Math.floor(next() * 5); u > 0; u--) users.push(await insertUser(store()));
      const jobs: Job[] = [];
      for (const user of users) {
        for (let f = Math.floor(next() * 7); f > 0; f--) {
          const built = next() < 0.9;
          const w: Workflow = workflowFixture(user, {
            buildStatus: built ? 'COMPLETED' : 'QUEUED',
            buildCompletedAt: built ? 0 : null,
            terminatedAt: next() < 0.1 ? NOW - 1 : null,
            nextDueAt: NOW + 3_600_000,
          });
          await store().workflows.insert(w);
          if (next() < 0.2) jobs.push(jobFixture(w, pick(['QUEUED', 'RUNNING'] as const), { at: NOW - 10_000 }));
          // Ties in scheduled_at, so the id decides; some not due yet.
          for (let j = Math.floor(next() * 4); j > 0; j--) {
            const at = NOW + pick([-3_000, -2_000, -2_000, -1_000, 0, 1_000]);
            jobs.push(jobFixture(w, 'PENDING', { at, trigger: pick(['MANUAL', 'AUTOMATIC'] as const), slotAt: at + j }));
          }
        }
      }
      await store().jobs.insertMany(jobs);
      for (const [limit, perUser] of [
        [500, 500],
        [7, 7],
        [20, 3],
        [1, 1],
        [13, 2],
        [4, 500],
      ] as const) {
        const got = await store().jobQueue.dispatchable(NOW, limit, perUser);
        const want = await expected(db(), NOW, limit, perUser);
        const what = `scenario ${scenario}, limit ${limit}, per user ${perUser}`;
        assert.deepEqual(
          got.jobs.map((j) => j.id),
          want.ids,
          what,
        );
        if (want.all > got.jobs.length) assert.ok(got.more, `${what}: more wait`);
        if (!got.more) assert.equal(want.all, got.jobs.length, `${what}: nothing more waits`);
      }
      await store().db.deleteFrom('jobs').where('user_id', 'in', users).execute();
      await store().db.updateTable('workflows').set({ terminated_at: 1 }).where('user_id', 'in', users).execute();
    }
  });

  it("reads the room it fills and each user's first jobs, not the PENDING backlog: 5,000 of one user's, and another user's one", async function () {
    this.timeout(300_000);
    const greedy = await insertUser(store());
    const other = await insertUser(store());
    await insertWorkflowsWithJobs(store(), greedy, 20, 'QUEUED', NOW - 120_000);
    await insertWorkflowsWithJobs(store(), greedy, 20, 'RUNNING', NOW - 120_000);
    await insertWorkflowsWithJobs(store(), greedy, 5_000, 'PENDING', NOW - 60_000);
    // The other user's one job is the newest of all.
    const [lone] = await insertWorkflowsWithJobs(store(), other, 1, 'PENDING', NOW);
    // As a new installation (or a table grown since its last analysis) plans them, and with fresh statistics.
    for (const stats of ['the statistics the tables have', 'fresh statistics']) {
      if (stats === 'fresh statistics') await analyzeJobs(store().db, engine);
      const trace = tracedStore(store());
      const room = 10;
      assert.equal(await trace.store.jobQueue.countQueued(2_000), 20);
      const pending = await trace.store.jobQueue.dispatchable(NOW, 500, room);
      assert.ok(pending.more);
      assert.equal(pending.jobs.length, room + 2, "the greedy user's first room + 1, the other's one");
      assert.ok(pending.jobs.slice(0, 2).some((j) => j.id === lone!.id), "the other user's job is in the first round");
      const active = await trace.store.jobQueue.activeCountsByUser(pending.jobs.map((j) => j.userId));
      assert.deepEqual([...active], [[greedy, 40]]);

      const statements = trace.statements();
      assert.equal(statements.length, 4, 'countQueued, pendingUsers, firstPendingOf, activeCountsByUser');
      for (const q of statements) await assertNoBacklogRead(store().db, engine, q, 100);
      // The users' skip and each user's seek walk the index that orders each user's PENDING jobs.
      for (const q of statements.filter((s) => s.sql.includes("'PENDING'"))) assert.match((await planOf(store().db, engine, q)).steps.join('; '), /jobs_pending_user_idx/, stats);
    }
  });
});

