import assert from 'node:assert/strict';
import { newId, OrlojError } from '@orloj/common/core';
import {
  afterSystemFailure,
  ALLOWED_FROM,
  awaitsRunner,
  cancelReason,
  CANCELED_WITH_WORKFLOW,
  createDueJob,
  createManualJob,
  finishAttempt,
  heartbeatInterval,
  isOpenAttempt,
  leaseExpiry,
  newJob,
  queueNextAttempt,
  reasons,
  staleAttemptStop,
  startAttempt,
  type Job,
  type JobTransition,
} from '@orloj/common/domain';
import { SETTINGS } from '@orloj/common/config';
import { workflowFixture } from './support/fixtures.js';

const NOW = 1_000_000;
const workflow = workflowFixture(newId(), { buildStatus: 'COMPLETED', buildCompletedAt: 0 });
const job = (overrides: Partial<Job> = {}): Job => ({ ...newJob(workflow, 'AUTOMATIC', 0, 0), ...overrides });

/** Every unit's move must be one the state table allows from the statuses it is meant for. */
function assertAllowed(t: JobTransition, from: Job['status']): void {
  assert.ok(ALLOWED_FROM[t.to].includes(from), `${from}→${t.to} is not in the state table`);
}

describe('job lifecycle units', () => {
  describe('createManualJob', () => {
    it('creates a PENDING manual job due now when the workflow is active and built', () => {
      const created = createManualJob(workflow, NOW);
      assert.equal(created.status, 'PENDING');
      assert.equal(created.trigger, 'MANUAL');
      assert.equal(created.scheduledAt, NOW);
      assert.equal(created.attempts, 0);
      assert.equal(created.workflowId, workflow.id);
    });

    it('refuses a terminated workflow with workflow_terminated', () => {
      assert.throws(
        () => createManualJob({ ...workflow, terminatedAt: 5 }, NOW),
        (err) => err instanceof OrlojError && err.code === 'workflow_terminated',
      );
    });

    it('refuses a workflow whose build failed with workflow_build_failed', () => {
      assert.throws(
        () => createManualJob({ ...workflow, buildStatus: 'FAILED' }, NOW),
        (err) => err instanceof OrlojError && err.code === 'workflow_build_failed',
      );
    });

    it('accepts a workflow whose build has not finished yet (the job waits for it)', () => {
      assert.equal(createManualJob({ ...workflow, buildStatus: 'STARTED', buildCompletedAt: null }, NOW).status, 'PENDING');
    });
  });

  describe('createDueJob', () => {
    it('creates the slot job QUEUED on its first attempt', () => {
      const created = createDueJob(workflow, 60_000, NOW);
      assert.deepEqual(
        { status: created.status, trigger: created.trigger, attempts: created.attempts, queuedAt: created.queuedAt, slotAt: created.slotAt, updatedAt: created.updatedAt },
        { status: 'QUEUED', trigger: 'AUTOMATIC', attempts: 1, queuedAt: NOW, slotAt: 60_000, updatedAt: NOW },
      );
      assert.ok(ALLOWED_FROM.QUEUED.includes('PENDING'));
    });
  });

  describe('queueNextAttempt', () => {
    it('hands out the next attempt, guarded by the attempt seen', () => {
      const t = queueNextAttempt(job({ attempts: 2 }), NOW);
      assert.deepEqual(t, { to: 'QUEUED', fields: { attempts: 3, queuedAt: NOW }, guard: { attempts: 2 } });
      assertAllowed(t, 'PENDING');
    });
  });

  describe('awaitsRunner', () => {
    it('holds only for a QUEUED job on that attempt', () => {
      assert.equal(awaitsRunner(job({ status: 'QUEUED', attempts: 1 }), 1), true);
      assert.equal(awaitsRunner(job({ status: 'QUEUED', attempts: 2 }), 1), false);
      assert.equal(awaitsRunner(job({ status: 'RUNNING', attempts: 1 }), 1), false);
      assert.equal(awaitsRunner(undefined, 1), false);
    });
  });

  describe('startAttempt', () => {
    it('moves to RUNNING under a lease from now, guarded by the attempt', () => {
      const t = startAttempt({ attempt: 1, runnerId: 'r1', startedAt: NOW - 5, containerId: 'c1' }, NOW, 30_000);
      assert.deepEqual(t, {
        to: 'RUNNING',
        fields: { runnerId: 'r1', startedAt: NOW - 5, leaseExpiresAt: NOW + 30_000, containerId: 'c1' },
        guard: { attempts: 1 },
      });
      assertAllowed(t, 'QUEUED');
    });

    it('leaves the container id alone when the runner names none', () => {
      assert.equal('containerId' in startAttempt({ attempt: 1, runnerId: 'r1', startedAt: NOW }, NOW, 30_000).fields, false);
    });
  });

  describe('lease and heartbeat', () => {
    it('renews the lease to now plus its time to live', () => {
      assert.equal(leaseExpiry(NOW, 30_000), NOW + 30_000);
    });

    it('has runners renew at a third of the lease, at least every millisecond', () => {
      assert.equal(heartbeatInterval(SETTINGS.JOB_LEASE_TTL.default), 10_000);
      assert.equal(heartbeatInterval(2), 1);
    });
  });

  describe('staleAttemptStop', () => {
    it('says nothing while the store expects the attempt', () => {
      assert.equal(staleAttemptStop(job({ status: 'RUNNING', attempts: 2 }), 2), undefined);
    });

    it("stops a canceled attempt with the job's own reason", () => {
      const canceled = job({ status: 'CANCELED', attempts: 2, statusReasonCode: 'WORKFLOW_TERMINATED', statusReasonMessage: 'The workflow was terminated.' });
      assert.deepEqual(staleAttemptStop(canceled, 2), reasons.workflowTerminated());
      assert.deepEqual(staleAttemptStop({ ...canceled, statusReasonCode: null }, 2), reasons.cancellationUnavailable());
    });

    it('stops an attempt the job has moved past, or a job that is gone', () => {
      assert.deepEqual(staleAttemptStop(job({ status: 'RUNNING', attempts: 3 }), 2), reasons.cancellationUnavailable());
      assert.deepEqual(staleAttemptStop(undefined, 2), reasons.cancellationUnavailable());
    });
  });

  describe('finishAttempt', () => {
    it('completes without a reason and ends the lease', () => {
      const t = finishAttempt({ attempt: 1, status: 'COMPLETED', startedAt: 10, finishedAt: 20, reason: reasons.nonZeroExit(1) });
      assert.deepEqual(t, { to: 'COMPLETED', fields: { startedAt: 10, completedAt: 20, leaseExpiresAt: null, reason: null }, guard: { attempts: 1 } });
      assertAllowed(t, 'RUNNING');
      assertAllowed(t, 'QUEUED');
    });

    it("fails with the runner's reason, or the unavailable one", () => {
      assert.deepEqual(finishAttempt({ attempt: 1, status: 'FAILED', startedAt: 10, finishedAt: 20, reason: reasons.nonZeroExit(2) }).fields.reason, reasons.nonZeroExit(2));
      assert.deepEqual(finishAttempt({ attempt: 1, status: 'FAILED', startedAt: 10, finishedAt: 20 }).fields.reason, reasons.failureUnavailable());
      assert.deepEqual(finishAttempt({ attempt: 1, status: 'CANCELED', startedAt: 10, finishedAt: 20 }).fields.reason, reasons.cancellationUnavailable());
    });

    it('carries the container, the truncated log and the check only when reported', () => {
      const check = { statusCode: 200, responseTimeMs: 12, failure: null };
      const t = finishAttempt({ attempt: 1, status: 'COMPLETED', startedAt: 10, finishedAt: 20, containerId: 'c1', logTruncated: true, check });
      assert.deepEqual(t.fields, { startedAt: 10, completedAt: 20, leaseExpiresAt: null, reason: null, containerId: 'c1', logTruncated: true, check });
      const bare = finishAttempt({ attempt: 1, status: 'COMPLETED', startedAt: 10, finishedAt: 20, logTruncated: false });
      assert.deepEqual(Object.keys(bare.fields).sort(), ['completedAt', 'leaseExpiresAt', 'reason', 'startedAt']);
      assert.equal(finishAttempt({ attempt: 1, status: 'COMPLETED', startedAt: 10, finishedAt: 20, check: null }).fields.check, null);
    });
  });

  describe('isOpenAttempt', () => {
    it('holds for a QUEUED or RUNNING job on that attempt', () => {
      assert.equal(isOpenAttempt(job({ status: 'QUEUED', attempts: 1 }), 1), true);
      assert.equal(isOpenAttempt(job({ status: 'RUNNING', attempts: 1 }), 1), true);
      assert.equal(isOpenAttempt(job({ status: 'FAILED', attempts: 1 }), 1), false);
      assert.equal(isOpenAttempt(job({ status: 'RUNNING', attempts: 2 }), 1), false);
      assert.equal(isOpenAttempt(undefined, 1), false);
    });
  });

  describe('afterSystemFailure', () => {
    const running = job({ status: 'RUNNING', attempts: 1, runnerId: 'r1', startedAt: 5, leaseExpiresAt: 100, containerId: 'c1' });

    it('retries as a new attempt with the runner fields cleared while attempts remain', () => {
      const t = afterSystemFailure(running, workflow, 3, NOW, reasons.runtimeUnavailable());
      assert.deepEqual(t, {
        to: 'QUEUED',
        fields: { attempts: 2, queuedAt: NOW, runnerId: null, leaseExpiresAt: null, startedAt: null, containerId: null },
        guard: { attempts: 1 },
      });
      assertAllowed(t, 'RUNNING');
    });

    it('fails with a SYSTEM_ERROR reason given, else the lease-lost one, after the last attempt', () => {
      const last = { ...running, attempts: 3 };
      const t = afterSystemFailure(last, workflow, 3, NOW, reasons.runtimeUnavailable());
      assert.deepEqual(t, { to: 'FAILED', fields: { completedAt: NOW, leaseExpiresAt: null, reason: reasons.runtimeUnavailable() }, guard: { attempts: 3 } });
      assert.deepEqual(afterSystemFailure(last, workflow, 3, NOW, reasons.failureUnavailable()).fields.reason, reasons.leaseLost(3));
      assertAllowed(t, 'RUNNING');
    });

    it('cancels the job of a terminated or deleted workflow', () => {
      for (const w of [{ ...workflow, terminatedAt: 1 }, undefined]) {
        const t = afterSystemFailure(running, w, 3, NOW, reasons.runtimeUnavailable());
        assert.deepEqual(t, { to: 'CANCELED', fields: { completedAt: NOW, leaseExpiresAt: null, reason: reasons.workflowTerminated() }, guard: { attempts: 1 } });
        assertAllowed(t, 'RUNNING');
      }
    });
  });

  describe('cancel with the workflow', () => {
    it('cancels PENDING and QUEUED jobs, with the reason of the cause', () => {
      assert.deepEqual([...CANCELED_WITH_WORKFLOW], ['PENDING', 'QUEUED']);
      for (const from of CANCELED_WITH_WORKFLOW) assert.ok(ALLOWED_FROM.CANCELED.includes(from));
      assert.deepEqual(cancelReason('terminated'), reasons.workflowTerminated());
      assert.deepEqual(cancelReason('updated'), reasons.workflowUpdated());
    });
  });
});
