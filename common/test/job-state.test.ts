import assert from 'node:assert/strict';
import { newId } from '@orloj/common/core';
import { ALLOWED_FROM, canTransition, DEFAULT_RUN_POLICY, JOB_STATUSES, type Job, type JobStatus } from '@orloj/common/domain';
import { describeEachEngine } from './support/stores.js';

describe('job state machine', () => {
  it('allows exactly the documented transitions', () => {
    const allowed = JOB_STATUSES.flatMap((from) => JOB_STATUSES.filter((to) => canTransition(from, to)).map((to) => `${from}→${to}`));
    assert.deepEqual(allowed.sort(), [
      'PENDING→CANCELED',
      'PENDING→QUEUED',
      'QUEUED→CANCELED',
      'QUEUED→COMPLETED',
      'QUEUED→FAILED',
      'QUEUED→QUEUED',
      'QUEUED→RUNNING',
      'RUNNING→CANCELED',
      'RUNNING→COMPLETED',
      'RUNNING→FAILED',
      'RUNNING→QUEUED',
    ]);
  });

  it('leaves no way out of a terminal status', () => {
    for (const terminal of ['COMPLETED', 'FAILED', 'CANCELED'] as const) {
      for (const to of JOB_STATUSES) assert.equal(ALLOWED_FROM[to].includes(terminal), false, `${terminal}→${to}`);
    }
  });
});

describeEachEngine('job transitions in the store', (db) => {
  let workflowId: string;
  let userId: string;

  before(async () => {
    userId = newId();
    workflowId = newId();
    const store = db().store;
    await store.users.insert({ id: userId, email: `${userId}@x.io`, passwordHash: 'x', notificationPreference: 'ALL', createdAt: 0, updatedAt: 0 });
    await store.workflows.insert({
      id: workflowId, userId, name: 'w', payload: '{}', kind: 'HEARTBEAT', buildStatus: 'COMPLETED', intervalMinutes: 1,
      consecutiveJobFailuresCount: 0, maxConsecutiveJobFailuresAllowed: 3, logRetention: false, generation: 0, createdAt: 0,
      updatedAt: 0, terminatedAt: null, buildCompletedAt: 0, nextDueAt: null, buildToken: 0, skippedSlots: 0, lastSlotSkippedAt: null, cron: null, timeZone: 'UTC', jitterSeconds: 0, jitterOffsetMs: 0, pausedAt: null,
        buildError: null, alertAfterFailures: 1, recoverAfterSuccesses: 1, alertDown: false, ...DEFAULT_RUN_POLICY,
    });
  });

  async function jobIn(status: JobStatus, slotAt = Math.floor(Math.random() * 1e12)): Promise<Job> {
    const job: Job = {
      id: newId(), workflowId, userId, generation: 0, trigger: 'MANUAL', status, slotAt, scheduledAt: slotAt, attempts: 1,
      queuedAt: null, runnerId: null, leaseExpiresAt: null, containerId: null, startedAt: null, completedAt: null,
      statusReasonCode: null, statusReasonMessage: null, createdAt: 0, updatedAt: 0,
    };
    assert.equal(await db().store.jobs.insert(job), true);
    return job;
  }

  it('refuses every illegal transition and applies every legal one', async () => {
    for (const from of ['PENDING', 'COMPLETED', 'FAILED', 'CANCELED'] as const) {
      for (const to of JOB_STATUSES) {
        const job = await jobIn(from);
        const moved = await db().store.jobMoves.transition(job.id, to, 1);
        assert.equal(moved !== undefined, canTransition(from, to), `${from}→${to}`);
        assert.equal((await db().store.jobs.findById(job.id))?.status, moved ? to : from);
        // free the workflow's one active slot for the next case
        if (moved && (to === 'QUEUED' || to === 'RUNNING')) await db().store.jobMoves.transition(job.id, 'CANCELED', 1);
      }
    }
  });

  it('applies a transition once: the same transition again changes nothing', async () => {
    const job = await jobIn('PENDING');
    assert.ok(await db().store.jobMoves.transition(job.id, 'CANCELED', 1));
    assert.equal(await db().store.jobMoves.transition(job.id, 'CANCELED', 2), undefined);
  });

  it('ignores a transition guarded by another attempt', async () => {
    const job = await jobIn('PENDING');
    assert.equal(await db().store.jobMoves.transition(job.id, 'QUEUED', 1, {}, { attempts: 2 }), undefined);
    assert.ok(await db().store.jobMoves.transition(job.id, 'QUEUED', 1, {}, { attempts: 1 }));
    await db().store.jobMoves.transition(job.id, 'CANCELED', 2);
  });

  it('moves exactly where the state machine allows, on the attempt guarded, and answers the job only when it moved', async () => {
    for (const from of ['PENDING', 'COMPLETED', 'FAILED', 'CANCELED'] as const) {
      for (const to of JOB_STATUSES) {
        const job = await jobIn(from);
        const moved = (await db().store.jobMoves.transition(job.id, to, 1)) !== undefined;
        assert.equal(moved, canTransition(from, to), `${from}→${to}`);
        assert.equal((await db().store.jobs.findById(job.id))?.status, moved ? to : from);
        if (moved && (to === 'QUEUED' || to === 'RUNNING')) await db().store.jobMoves.transition(job.id, 'CANCELED', 1);
      }
    }
    const job = await jobIn('PENDING');
    assert.equal((await db().store.jobMoves.transition(job.id, 'QUEUED', 1, { attempts: 2 }, { attempts: 2 })) !== undefined, false);
    assert.equal((await db().store.jobMoves.transition(job.id, 'QUEUED', 1, { attempts: 2 }, { attempts: 1 })) !== undefined, true);
    assert.equal((await db().store.jobMoves.transition(job.id, 'RUNNING', 2, { runnerId: 'r', startedAt: 2, leaseExpiresAt: 9 }, { attempts: 1 })) !== undefined, false);
    assert.equal((await db().store.jobMoves.transition(job.id, 'RUNNING', 2, { runnerId: 'r', startedAt: 2, leaseExpiresAt: 9 }, { attempts: 2 })) !== undefined, true);
    assert.equal((await db().store.jobMoves.transition(job.id, 'RUNNING', 3, { runnerId: 'r', startedAt: 2, leaseExpiresAt: 9 }, { attempts: 2 })) !== undefined, false);
    const running = await db().store.jobs.findById(job.id);
    assert.deepEqual(
      [running?.status, running?.attempts, running?.runnerId, running?.startedAt, running?.leaseExpiresAt, running?.updatedAt],
      ['RUNNING', 2, 'r', 2, 9, 2],
    );
    await db().store.jobMoves.transition(job.id, 'CANCELED', 4);
  });

  it('sets the values of every call, nulls included, when the same shape of transition runs again', async () => {
    // Transitions are compiled once per shape; the values must come from every call.
    const done = [] as Job[];
    for (const [i, reason] of [[1, { code: 'TIME_LIMIT_EXCEEDED' as const, message: 'first' }], [2, null], [3, { code: 'UNEXPECTED_STATUS_CODE' as const, message: 'third' }]] as const) {
      const job = await jobIn('PENDING');
      await db().store.jobMoves.transition(job.id, 'QUEUED', i, { attempts: 2, queuedAt: i });
      const failed = await db().store.jobMoves.transition(job.id, 'FAILED', 10 + i, { completedAt: 20 + i, leaseExpiresAt: null, reason }, { attempts: 2 });
      assert.ok(failed);
      done.push(failed);
    }
    assert.deepEqual(
      done.map((j) => [j.status, j.attempts, j.queuedAt, j.completedAt, j.updatedAt, j.statusReasonCode, j.statusReasonMessage]),
      [
        ['FAILED', 2, 1, 21, 11, 'TIME_LIMIT_EXCEEDED', 'first'],
        ['FAILED', 2, 2, 22, 12, null, null],
        ['FAILED', 2, 3, 23, 13, 'UNEXPECTED_STATUS_CODE', 'third'],
      ],
    );
  });

  it('keeps at most one QUEUED or RUNNING job per workflow', async () => {
    const a = await jobIn('PENDING');
    const b = await jobIn('PENDING');
    assert.ok(await db().store.jobMoves.transition(a.id, 'QUEUED', 1));
    await assert.rejects(db().store.jobMoves.transition(b.id, 'QUEUED', 1), (err) => db().handle.dialect.isUniqueViolation(err));
    await db().store.jobMoves.transition(a.id, 'CANCELED', 2);
    assert.ok(await db().store.jobMoves.transition(b.id, 'QUEUED', 3));
    await db().store.jobMoves.transition(b.id, 'CANCELED', 4);
  });

  it('keeps one AUTOMATIC job per (workflow, slot)', async () => {
    const job = await jobIn('PENDING');
    const again = { ...job, id: newId(), trigger: 'AUTOMATIC' as const };
    assert.equal(await db().store.jobs.insert(again), true);
    assert.equal(await db().store.jobs.insert({ ...again, id: newId() }), false);
    assert.equal(await db().store.jobs.insert({ ...again, id: newId(), trigger: 'MANUAL' }), true);
  });
});

describeEachEngine('batched job writes in the store', (db) => {
  let userId: string;

  before(async () => {
    userId = newId();
    await db().store.users.insert({ id: userId, email: `${userId}@x.io`, passwordHash: 'x', notificationPreference: 'ALL', createdAt: 0, updatedAt: 0 });
  });

  async function workflows(n: number): Promise<string[]> {
    const ids = Array.from({ length: n }, () => newId());
    for (const id of ids) {
      await db().store.workflows.insert({
        id, userId, name: 'w', payload: '{}', kind: 'HEARTBEAT', buildStatus: 'COMPLETED', intervalMinutes: 1,
        consecutiveJobFailuresCount: 0, maxConsecutiveJobFailuresAllowed: 3, logRetention: false, generation: 0, createdAt: 0,
        updatedAt: 0, terminatedAt: null, buildCompletedAt: 0, nextDueAt: 1, buildToken: 0, skippedSlots: 0, lastSlotSkippedAt: null, cron: null, timeZone: 'UTC', jitterSeconds: 0, jitterOffsetMs: 0, pausedAt: null,
        buildError: null, alertAfterFailures: 1, recoverAfterSuccesses: 1, alertDown: false, ...DEFAULT_RUN_POLICY,
      });
    }
    return ids;
  }

  function job(workflowId: string, status: JobStatus, attempts = 0, slotAt = 60_000): Job {
    return {
      id: newId(), workflowId, userId, generation: 0, trigger: 'AUTOMATIC', status, slotAt, scheduledAt: slotAt, attempts,
      queuedAt: null, runnerId: null, leaseExpiresAt: null, containerId: null, startedAt: null, completedAt: null,
      statusReasonCode: null, statusReasonMessage: null, createdAt: 0, updatedAt: 0,
    };
  }

  it('inserts many jobs at once, skipping a slot that already has its job', async () => {
    const [a, b, c] = await workflows(3);
    const existing = job(a!, 'PENDING');
    assert.deepEqual(await db().store.jobs.insertMany([existing]), [existing.id]);
    const batch = [job(a!, 'PENDING'), job(b!, 'PENDING'), job(c!, 'PENDING'), job(c!, 'PENDING', 0, 120_000)];
    assert.deepEqual((await db().store.jobs.insertMany(batch)).sort(), batch.slice(1).map((j) => j.id).sort());
    assert.equal(await db().store.jobs.findById(batch[0]!.id), undefined);
    for (const j of batch.slice(1)) assert.equal((await db().store.jobs.findById(j.id))?.status, 'PENDING');
  });

  it('queues many next attempts at once, each only from an allowed status and on the attempt named', async () => {
    const ids = await workflows(4);
    const [pending, retried, stale, done] = [job(ids[0]!, 'PENDING'), job(ids[1]!, 'RUNNING', 2), job(ids[2]!, 'PENDING', 1), job(ids[3]!, 'COMPLETED')];
    await db().store.jobs.insertMany([pending, retried, stale, done]);
    const moved = await db().store.jobQueue.queueNextAttempts(
      [
        { id: pending.id, attempts: 0 },
        { id: retried.id, attempts: 2 },
        { id: stale.id, attempts: 0 }, // the job is on attempt 1: moved on
        { id: done.id, attempts: 0 }, // COMPLETED → QUEUED is not a transition
      ],
      500,
    );
    assert.deepEqual(moved.map((j) => [j.id, j.status, j.attempts, j.queuedAt]).sort(), [
      [pending.id, 'QUEUED', 1, 500],
      [retried.id, 'QUEUED', 3, 500],
    ].sort());
    assert.equal((await db().store.jobs.findById(stale.id))?.status, 'PENDING');
    assert.equal((await db().store.jobs.findById(done.id))?.status, 'COMPLETED');
    // Its message is confirmed for the attempt it is on, not for an older one.
    await db().store.jobQueue.markDispatched([{ id: pending.id, attempts: 1 }, { id: retried.id, attempts: 2 }], 600);
    const dispatchedAt = async (id: string) => (await db().store.db.selectFrom('jobs').select('dispatched_at').where('id', '=', id).executeTakeFirst())?.dispatched_at;
    assert.equal(await dispatchedAt(pending.id), 600);
    assert.equal(await dispatchedAt(retried.id), null);
  });

  it('queues none of them when one would be a second active job of its workflow', async () => {
    const [a, b] = await workflows(2);
    const first = job(a!, 'PENDING');
    const second = job(a!, 'PENDING', 0, 120_000);
    const other = job(b!, 'PENDING');
    await db().store.jobs.insertMany([first, second, other]);
    await assert.rejects(
      db().store.jobQueue.queueNextAttempts([first, second, other].map((j) => ({ id: j.id, attempts: 0 })), 1),
      (err) => db().handle.dialect.isUniqueViolation(err),
    );
    for (const j of [first, second, other]) assert.equal((await db().store.jobs.findById(j.id))?.status, 'PENDING');
  });

  it('sets the next due slot of many workflows at once', async () => {
    const ids = await workflows(3);
    const big = 4_102_444_800_000; // beyond 32 bits
    await db().store.workflows.setNextDueMany(ids.slice(0, 2).map((id, i) => ({ id, nextDueAt: big + i })));
    assert.deepEqual(
      await Promise.all(ids.map(async (id) => (await db().store.workflows.findById(id))?.nextDueAt)),
      [big, big + 1, 1],
    );
  });
});
