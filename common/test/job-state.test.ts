import assert from 'node:assert/strict';
import { ALLOWED_FROM, canTransition, JOB_STATUSES, newId, type Job, type JobStatus } from '@orloj/common';
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
      updatedAt: 0, terminatedAt: null, buildCompletedAt: 0, nextDueAt: null, buildToken: 0,
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
        const moved = await db().store.jobs.transition(job.id, to, 1);
        assert.equal(moved !== undefined, canTransition(from, to), `${from}→${to}`);
        assert.equal((await db().store.jobs.findById(job.id))?.status, moved ? to : from);
        // free the workflow's one active slot for the next case
        if (moved && (to === 'QUEUED' || to === 'RUNNING')) await db().store.jobs.transition(job.id, 'CANCELED', 1);
      }
    }
  });

  it('applies a transition once: the same transition again changes nothing', async () => {
    const job = await jobIn('PENDING');
    assert.ok(await db().store.jobs.transition(job.id, 'CANCELED', 1));
    assert.equal(await db().store.jobs.transition(job.id, 'CANCELED', 2), undefined);
  });

  it('ignores a transition guarded by another attempt', async () => {
    const job = await jobIn('PENDING');
    assert.equal(await db().store.jobs.transition(job.id, 'QUEUED', 1, {}, { attempts: 2 }), undefined);
    assert.ok(await db().store.jobs.transition(job.id, 'QUEUED', 1, {}, { attempts: 1 }));
    await db().store.jobs.transition(job.id, 'CANCELED', 2);
  });

  it('keeps at most one QUEUED or RUNNING job per workflow', async () => {
    const a = await jobIn('PENDING');
    const b = await jobIn('PENDING');
    assert.ok(await db().store.jobs.transition(a.id, 'QUEUED', 1));
    await assert.rejects(db().store.jobs.transition(b.id, 'QUEUED', 1), (err) => db().handle.dialect.isUniqueViolation(err));
    await db().store.jobs.transition(a.id, 'CANCELED', 2);
    assert.ok(await db().store.jobs.transition(b.id, 'QUEUED', 3));
    await db().store.jobs.transition(b.id, 'CANCELED', 4);
  });

  it('keeps one AUTOMATIC job per (workflow, slot)', async () => {
    const job = await jobIn('PENDING');
    const again = { ...job, id: newId(), trigger: 'AUTOMATIC' as const };
    assert.equal(await db().store.jobs.insert(again), true);
    assert.equal(await db().store.jobs.insert({ ...again, id: newId() }), false);
    assert.equal(await db().store.jobs.insert({ ...again, id: newId(), trigger: 'MANUAL' }), true);
  });
});
