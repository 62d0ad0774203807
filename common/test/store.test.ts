import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import { newId } from '@orloj/common/core';
import type { Workflow } from '@orloj/common/domain';
import { createWorkflow, deleteWorkflow, openDatabase, terminateWorkflow } from '@orloj/common/store';
import { describeEachEngine } from './support/stores.js';
import { insertJob, workflowFixture } from './support/fixtures.js';

function workflow(userId: string, overrides: Partial<Workflow> = {}): Workflow {
  const now = Date.UTC(2026, 0, 1);
  return workflowFixture(userId, {
    name: 'Ping',
    payload: '{"endpoint":"https://example.com"}',
    intervalMinutes: 5,
    createdAt: now,
    updatedAt: now,
    ...overrides,
  });
}

describeEachEngine('store', (db) => {
  let userId: string;
  let otherId: string;

  before(async () => {
    userId = newId();
    otherId = newId();
    const now = Date.now();
    for (const [id, email] of [
      [userId, `a-${userId}@example.com`],
      [otherId, `b-${otherId}@example.com`],
    ] as const) {
      assert.equal(
        await db().store.users.insert({ id, email, passwordHash: 'x', notificationPreference: 'ALL', createdAt: now, updatedAt: now }),
        true,
      );
    }
  });

  describe('users', () => {
    it('refuses a second user with the same email', async () => {
      const now = Date.now();
      const taken = await db().store.users.insert({
        id: newId(),
        email: `a-${userId}@example.com`,
        passwordHash: 'y',
        notificationPreference: 'ALL',
        createdAt: now,
        updatedAt: now,
      });
      assert.equal(taken, false);
    });

    it("keeps the user's workflow count as workflows are created and deleted, and not when a create rolls back", async () => {
      const store = db().store;
      const id = newId();
      const now = Date.now();
      await store.users.insert({ id, email: `count-${id}@example.com`, passwordHash: 'x', notificationPreference: 'ALL', createdAt: now, updatedAt: now });
      assert.equal(await store.users.workflowCount(id), 0);
      const made = [workflow(id), workflow(id), workflow(id)];
      for (const w of made) await store.transaction((tx) => createWorkflow(tx, w));
      await store.transaction((tx) => createWorkflow(tx, workflow(otherId)));
      assert.equal(await store.users.workflowCount(id), 3);
      await assert.rejects(
        store.transaction(async (tx) => {
          await createWorkflow(tx, workflow(id));
          throw new Error('roll back');
        }),
        /roll back/,
      );
      assert.equal(await store.users.workflowCount(id), 3);
      const gone = made[0]!;
      assert.equal(await store.transaction((tx) => deleteWorkflow(tx, gone, now)), false, 'an active workflow is not deleted');
      assert.equal(await store.users.workflowCount(id), 3);
      await store.transaction((tx) => terminateWorkflow(tx, id, gone.id, now));
      assert.equal(await store.transaction((tx) => deleteWorkflow(tx, gone, now)), true);
      assert.equal(await store.transaction((tx) => deleteWorkflow(tx, gone, now)), false, 'deleted once');
      assert.equal(await store.users.workflowCount(id), 2);
    });

    it('updates the notification preference', async () => {
      await db().store.users.setNotificationPreference(userId, 'NONE', Date.now());
      assert.equal((await db().store.users.findById(userId))?.notificationPreference, 'NONE');
      await db().store.users.setNotificationPreference(userId, 'ALL', Date.now());
    });
  });

  describe('sessions', () => {
    it('finds an active session and stops finding it once revoked or expired', async () => {
      const s = { id: newId(), userId, createdAt: 1000, expiresAt: 5000 };
      await db().store.sessions.insert(s);
      const found = await db().store.sessions.findActive(s.id, 2000);
      assert.deepEqual(found, { ...s, workflowListVersion: found?.workflowListVersion });
      assert.equal(typeof found?.workflowListVersion, 'number');
      assert.equal(await db().store.sessions.findActive(s.id, 5000), undefined);
      await db().store.sessions.revoke(s.id, 3000);
      assert.equal(await db().store.sessions.findActive(s.id, 2000), undefined);
    });
  });

  describe('workflows', () => {
    it('round-trips every field', async () => {
      const w = workflow(userId, { logRetention: true, kind: 'CONTAINER', payload: '{ "image" : "busybox" }' });
      await db().store.workflows.insert(w);
      assert.deepEqual(await db().store.workflows.findForUser(userId, w.id), w);
      assert.equal(await db().store.workflows.findForUser(otherId, w.id), undefined);
    });

    it('matches names case-insensitively with % and _ taken literally', async () => {
      const names = ['100% Uptime', 'Under_score', 'UNDERXscore', 'Grüße'];
      for (const name of names) await db().store.workflows.insert(workflow(otherId, { name }));
      const find = async (query: string) =>
        (await db().store.workflows.list({ userId: otherId, query, terminated: false, limit: 100 })).map((w) => w.name).sort();
      assert.deepEqual(await find('0% up'), ['100% Uptime']);
      assert.deepEqual(await find('r_s'), ['Under_score']);
      assert.deepEqual(await find('GRÜ'), ['Grüße']);
      assert.deepEqual(await find('%'), ['100% Uptime']);
    });

    it('terminates once, then refuses; deletes only terminated workflows', async () => {
      const w = workflow(userId);
      await db().store.workflows.insert(w);
      assert.equal(await db().store.workflows.deleteTerminated(userId, w.id), false);
      assert.equal((await db().store.workflows.terminate(userId, w.id, 10))?.terminatedAt, 10);
      assert.equal(await db().store.workflows.terminate(userId, w.id, 11), undefined);
      const t = await db().store.workflows.findForUser(userId, w.id);
      assert.equal(t?.terminatedAt, 10);
      assert.equal(t?.buildStatus, 'CANCELED');
      assert.equal(await db().store.workflows.deleteTerminated(userId, w.id), true);
      assert.equal(await db().store.workflows.findForUser(userId, w.id), undefined);
    });

    it('update bumps the generation, resets failures and reactivates', async () => {
      const w = workflow(userId, { consecutiveJobFailuresCount: 2, buildStatus: 'COMPLETED', buildCompletedAt: 5 });
      await db().store.workflows.insert(w);
      await db().store.workflows.terminate(userId, w.id, 10);
      await db().store.workflows.update(
        userId,
        w.id,
        { name: 'New', payload: '{}', intervalMinutes: 7, maxConsecutiveJobFailuresAllowed: 9, logRetention: false, rebuild: true, nextDueAt: null },
        20,
      );
      const u = await db().store.workflows.findForUser(userId, w.id);
      assert.equal(u?.generation, 1);
      assert.equal(u?.consecutiveJobFailuresCount, 0);
      assert.equal(u?.terminatedAt, null);
      assert.equal(u?.buildStatus, 'QUEUED');
      assert.equal(u?.name, 'New');
    });
  });

  describe('workflow list version', () => {
    it('moves when a workflow is added, deleted or changes what the list shows, and only then', async () => {
      const owner = newId();
      const now = Date.now();
      await db().store.users.insert({ id: owner, email: `v-${owner}@example.com`, passwordHash: 'x', notificationPreference: 'ALL', createdAt: now, updatedAt: now });
      const { workflows, sessions } = db().store;
      // Signed-in requests read the version with their session.
      const session = { id: newId(), userId: owner, createdAt: now, expiresAt: now + 60_000 };
      await sessions.insert(session);
      const listVersion = async () => (await sessions.findActive(session.id, now))!.workflowListVersion;
      const w = workflow(owner);
      let seen = await listVersion();
      assert.equal(seen, 0);
      const step = async (label: string, change: () => Promise<unknown>, moves: boolean) => {
        await change();
        const version = await listVersion();
        assert.equal(version !== seen, moves, `${label}: version ${seen} → ${version}`);
        seen = version;
      };
      await step('insert', () => workflows.insert(w), true);
      await step('next due slot', () => workflows.setNextDue(w.id, 123), false);
      await step('row lock', () => db().store.transaction((tx) => tx.workflows.lock([w.id])), false);
      await step('build started', () => workflows.startBuild(w.id, w.buildToken, 1), true);
      await step('build finished', () => workflows.finishBuild(w.id, w.buildToken + 1, true, 2), true);
      await step('failure', () => workflows.recordFailure(w.id, 3), true);
      await step('failures reset', () => workflows.resetFailures(w.id, 4), true);
      await step('failures reset again (already 0)', () => workflows.resetFailures(w.id, 5), false);
      await step(
        'rolled back rename',
        () =>
          db()
            .store.transaction(async (tx) => {
              await tx.workflows.update(
                owner,
                w.id,
                { name: 'Gone', payload: w.payload, intervalMinutes: 5, maxConsecutiveJobFailuresAllowed: 3, logRetention: false, rebuild: false, nextDueAt: null },
                6,
              );
              throw new Error('roll back');
            })
            .catch(() => undefined),
        false,
      );
      await step('terminate', () => workflows.terminate(owner, w.id, 7), true);
      await step('delete', () => workflows.deleteTerminated(owner, w.id), true);
    });

    it('lists the same page inside a transaction as outside it', async () => {
      for (const name of ['Alpha', 'Beta', 'Gamma']) await db().store.workflows.insert(workflow(userId, { name, createdAt: Date.UTC(2026, 1, 1) }));
      const filter = { userId, terminated: false, query: 'a', limit: 2 };
      const outside = await db().store.workflows.list(filter);
      assert.equal(outside.length, 2);
      assert.deepEqual(await db().store.transaction((tx) => tx.workflows.list(filter)), outside);
    });
  });

  describe('jobs', () => {
    it('finds jobs by their ids in one read, whatever their count, leaving out ids it does not hold', async () => {
      const w = workflow(userId, { name: 'Found' });
      await db().store.workflows.insert(w);
      const a = await insertJob(db().store, w, 'COMPLETED', { at: 1 });
      const b = await insertJob(db().store, w, 'PENDING', { at: 2 });
      const found = await db().store.jobs.findByIds([b.id, newId(), a.id, b.id]);
      assert.deepEqual(found.map((j) => j.id).sort(), [a.id, b.id].sort());
      assert.deepEqual(found.find((j) => j.id === a.id), await db().store.jobs.findById(a.id));
      assert.deepEqual(await db().store.jobs.findByIds([]), []);
    });
  });

  describe('transactions', () => {
    it("runs compiled statements in the transaction: its writes are seen in it and undone with it", async () => {
      const w = workflow(userId, { name: 'Tx' });
      await db().store.workflows.insert(w);
      const job = await insertJob(db().store, w, 'PENDING', { at: 1 });
      await assert.rejects(
        db().store.transaction(async (tx) => {
          // transition and logAccess are compiled statements; findById goes through Kysely
          assert.equal((await tx.jobMoves.transition(job.id, 'QUEUED', 2, { attempts: 1, queuedAt: 2 }))?.status, 'QUEUED');
          assert.equal((await tx.jobs.findById(job.id))?.status, 'QUEUED');
          assert.equal((await tx.jobs.logAccess(userId, w.id, job.id))?.attempts, 1);
          throw new Error('roll back');
        }),
        /roll back/,
      );
      assert.equal((await db().store.jobs.findById(job.id))?.status, 'PENDING');
      assert.equal((await db().store.jobs.logAccess(userId, w.id, job.id))?.attempts, 0);
    });

    it("refuses compiled statements from a transaction's store once the transaction ended", async () => {
      const w = workflow(userId, { name: 'Kept' });
      await db().store.workflows.insert(w);
      const kept = await db().store.transaction((tx) => Promise.resolve(tx));
      await assert.rejects(kept.workflows.findById(w.id), /after the transaction ended/);
    });
  });

  describe('idempotency', () => {
    it('claims a key once, replays the same request and refuses a different one', async () => {
      const key = `k-${newId()}`;
      const store = db().store;
      assert.deepEqual(await store.idempotency.claim(userId, key, 'fp1', 1000, 100), { outcome: 'claimed' });
      await store.idempotency.complete(userId, key, 201, '{"id":"x"}');
      assert.deepEqual(await store.idempotency.claim(userId, key, 'fp1', 1050, 100), {
        outcome: 'replay',
        status: 201,
        body: '{"id":"x"}',
      });
      assert.deepEqual(await store.idempotency.claim(userId, key, 'fp2', 1050, 100), { outcome: 'conflict' });
      // another user's identical key is independent
      assert.deepEqual(await store.idempotency.claim(otherId, key, 'fp2', 1050, 100), { outcome: 'claimed' });
      // after the TTL the key is free again
      assert.deepEqual(await store.idempotency.claim(userId, key, 'fp2', 1100, 100), { outcome: 'claimed' });
    });

    it('leaves no claim behind when the guarded transaction rolls back', async () => {
      const key = `k-${newId()}`;
      await assert.rejects(
        db().store.transaction(async (tx) => {
          await tx.idempotency.claim(userId, key, 'fp', 1000, 100);
          throw new Error('boom');
        }),
      );
      assert.deepEqual(await db().store.idempotency.claim(userId, key, 'fp', 1000, 100), { outcome: 'claimed' });
    });
  });
});

describe('store on SQLite: planner statistics', () => {
  it('analyzes grown tables at open, so the job queue is searched by id, not by status; a handle without upkeep does not', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'orloj-stats-'));
    try {
      const url = `sqlite:${path.join(dir, 'orloj.db')}`;
      // As `orloj migrate` opens it: no upkeep of its own beyond the analysis after migrating.
      const first = openDatabase(url, { upkeep: false });
      await first.migrate();
      // 2,000 workflows with a queued job each: before analysis "status = ?" looks as selective as an id.
      await sql`insert into users (id, email, password_hash, notification_preference, created_at, updated_at) values ('u', 'stats@example.com', 'x', 'ALL', 1, 1)`.execute(first.db);
      await sql`with recursive n(i) as (select 1 union all select i + 1 from n where i < 2000)
        insert into workflows (id, user_id, name, name_folded, payload, kind, build_status, interval_minutes, max_consecutive_job_failures_allowed, log_retention, created_at, updated_at)
        select 'w' || i, 'u', 'w', 'w', '{}', 'HEARTBEAT', 'COMPLETED', 1, 3, 0, i, i from n`.execute(first.db);
      await sql`insert into jobs (id, workflow_id, user_id, generation, trigger, status, slot_at, scheduled_at, attempts, created_at, updated_at)
        select 'j' || substr(id, 2), id, 'u', 0, 'AUTOMATIC', 'QUEUED', created_at, created_at, 1, created_at, created_at from workflows`.execute(first.db);
      await first.close();

      // A process beside the server (orloj accounts, migrate --check) leaves the statistics and
      // checkpoints to it: its PRAGMA optimize would take the write lock on a timer of its own.
      const tool = openDatabase(url, { upkeep: false });
      try {
        assert.equal(tool.checkpointer, undefined);
        const stats = await sql<{ idx: string }>`select idx from sqlite_stat1 where tbl = 'jobs'`.execute(tool.db);
        assert.ok(!stats.rows.some((r) => r.idx === 'jobs_status_idx'), 'jobs analyzed by a handle without upkeep');
      } finally {
        await tool.close();
      }

      const second = openDatabase(url);
      try {
        const stats = await sql<{ idx: string }>`select idx from sqlite_stat1 where tbl = 'jobs'`.execute(second.db);
        assert.ok(stats.rows.some((r) => r.idx === 'jobs_status_idx'), 'jobs analyzed at open');
        assert.ok(second.checkpointer, 'the server handle checkpoints');
        const plan = await sql<{ detail: string }>`explain query plan
          update jobs set dispatched_at = 1 where status = 'QUEUED' and ((id = 'j1' and attempts = 1) or (id = 'j2' and attempts = 1))`.execute(second.db);
        const steps = plan.rows.map((r) => r.detail).join('; ');
        assert.ok(!steps.includes('jobs_status_idx'), steps);
        // The leader's scans walk their own indexes, never every built workflow or every job.
        for (const [query, index] of [
          [sql`explain query plan select * from workflows where next_due_at <= 5 and build_status = 'COMPLETED' and terminated_at is null order by next_due_at limit 500`, 'workflows_due_idx'],
          [sql`explain query plan select j.* from jobs j join workflows w on w.id = j.workflow_id where j.status = 'PENDING' and j.scheduled_at <= 5 and w.build_status = 'COMPLETED' order by j.scheduled_at, j.id limit 500`, 'jobs_pending_idx'],
        ] as const) {
          const detail = (await query.execute(second.db)).rows.map((r) => (r as { detail: string }).detail).join('; ');
          assert.match(detail, new RegExp(`^SEARCH \\w+ USING INDEX ${index} `));
        }
      } finally {
        await second.close();
      }
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
