import { newId } from '@orloj/common/core';
import { newJob, newWorkflow, type Job, type Workflow } from '@orloj/common/domain';
import type { Store } from '@orloj/common/store';

/**
 * The test kit's factories: the records every package's tests start from. Each inserts
 * plain rows (no domain events); a test that needs the events goes through the store's
 * lifecycle functions (createWorkflow, applyJobOutcome) instead.
 */

/** A workflow record with neutral defaults (an unbuilt HEARTBEAT one, created at 0); tests override what they care about. */
export function workflowFixture(userId: string, overrides: Partial<Workflow> = {}): Workflow {
  return {
    ...newWorkflow({ userId, name: 'w', kind: 'HEARTBEAT', payload: JSON.stringify({ endpoint: 'https://example.com' }), intervalMinutes: 1, maxConsecutiveJobFailuresAllowed: 3 }, 0),
    ...overrides,
  };
}

/** A user (notifications ALL, created at 0); its id. */
export async function insertUser(store: Store): Promise<string> {
  const id = newId();
  await store.users.insert({ id, email: `${id}@example.com`, passwordHash: 'x', notificationPreference: 'ALL', createdAt: 0, updatedAt: 0 });
  return id;
}

export interface LogJob {
  jobId: string;
  workflowId: string;
  userId: string;
}

/**
 * A user, a built CONTAINER workflow that keeps its logs, and one MANUAL job of it:
 * where log lines are stored, searched and tailed. `job` sets the job's state and
 * attempt (a job that printed lines has attempts ≥ 1).
 */
export async function insertLogJob(store: Store, overrides: { workflow?: Partial<Workflow>; job?: Partial<Job> } = {}): Promise<LogJob> {
  const userId = await insertUser(store);
  const w = workflowFixture(userId, {
    name: 'logs',
    payload: JSON.stringify({ image: 'localhost/orloj-test/busybox:1', cmd: ['true'] }),
    kind: 'CONTAINER',
    buildStatus: 'COMPLETED',
    intervalMinutes: 60,
    logRetention: true,
    buildCompletedAt: 0,
    ...overrides.workflow,
  });
  await store.workflows.insert(w);
  const job = { ...newJob(w, 'MANUAL', 0, 0), ...overrides.job };
  await store.jobs.insert(job);
  return { jobId: job.id, workflowId: w.id, userId };
}
