import { newId } from '@orloj/common/core';
import { jitterOffsetMs, newJob, newWorkflow, reasons, type Job, type JobStatus, type Workflow } from '@orloj/common/domain';
import type { Store } from '@orloj/common/store';

/**
 * The test kit's factories: the records every package's tests start from. Each inserts
 * plain rows (no domain events); a test that needs the events goes through the store's
 * lifecycle functions (createWorkflow, applyJobOutcome) instead.
 */

/** A workflow record with neutral defaults (an unbuilt HEARTBEAT one, created at 0); tests override what they care about. */
export function workflowFixture(userId: string, overrides: Partial<Workflow> = {}): Workflow {
  const w = newWorkflow({ userId, name: 'w', kind: 'HEARTBEAT', payload: JSON.stringify({ endpoint: 'https://example.com' }), intervalMinutes: 1, maxConsecutiveJobFailuresAllowed: 3 }, 0);
  const id = overrides.id ?? w.id;
  // A jitter takes its offset, as a created workflow does, unless the test sets one.
  return { ...w, jitterOffsetMs: jitterOffsetMs(id, overrides.jitterSeconds ?? 0), ...overrides };
}

/** A user (notifications ALL, created at 0); its id. */
export async function insertUser(store: Store): Promise<string> {
  const id = newId();
  await store.users.insert({ id, email: `${id}@example.com`, passwordHash: 'x', notificationPreference: 'ALL', createdAt: 0, updatedAt: 0 });
  return id;
}

/** What a job fixture may set: `at`, when it was scheduled (a minute ago by default), and any field of the row. */
export type JobFixtureOptions = Partial<Job> & { at?: number };

/**
 * A job row of `w` as the scheduler and a runner leave it in `status`: MANUAL, scheduled at
 * `at`; on attempt 1 once queued (0 while PENDING), in container `c0ffee` and started at
 * `at + 1` once past QUEUED, ended at `at + 2` with the reason a FAILED (by the workflow's kind)
 * or CANCELED job carries. `options` override any field (`attempts`, `trigger`, `completedAt`, …).
 */
export function jobFixture(w: Workflow, status: JobStatus = 'PENDING', options: JobFixtureOptions = {}): Job {
  const { at = Date.now() - 60_000, ...overrides } = options;
  const ended = status === 'COMPLETED' || status === 'FAILED' || status === 'CANCELED';
  const failure = w.kind === 'HEARTBEAT' ? reasons.unexpectedStatusCode(200, 500) : reasons.nonZeroExit(1);
  const reason = status === 'FAILED' ? failure : status === 'CANCELED' ? reasons.workflowTerminated() : null;
  const queued = status !== 'PENDING';
  return {
    ...newJob(w, 'MANUAL', at, at),
    status,
    attempts: queued ? 1 : 0,
    queuedAt: queued ? at : null,
    containerId: queued ? 'c0ffee' : null,
    startedAt: queued && status !== 'QUEUED' ? at + 1 : null,
    completedAt: ended ? at + 2 : null,
    statusReasonCode: reason?.code ?? null,
    statusReasonMessage: reason?.message ?? null,
    ...overrides,
  };
}

/**
 * The test kit's one job factory: inserts `jobFixture(workflow, status, options)` (the
 * workflow by record or by id) and returns the row. A test that needs the job's events
 * goes through the store's transitions instead.
 */
export async function insertJob(store: Store, workflow: Workflow | string, status: JobStatus = 'PENDING', options: JobFixtureOptions = {}): Promise<Job> {
  const w = typeof workflow === 'string' ? await store.workflows.findById(workflow) : workflow;
  if (!w) throw new Error(`insertJob: no workflow ${String(workflow)}`);
  const job = jobFixture(w, status, options);
  if (!(await store.jobs.insert(job))) throw new Error(`insertJob: the store refused job ${job.id} (a second AUTOMATIC job of slot ${job.slotAt}, or a second QUEUED or RUNNING one of the workflow?)`);
  return job;
}

/**
 * `count` built HEARTBEAT workflows of the user (inserted 500 a statement), each
 * with one AUTOMATIC job in `status`, the i-th scheduled (and its slot) at
 * `from + i`: a backlog of PENDING jobs, or a fleet's QUEUED or RUNNING ones.
 * Returns the jobs.
 */
export async function insertWorkflowsWithJobs(store: Store, userId: string, count: number, status: JobStatus, from: number): Promise<Job[]> {
  const jobs: Job[] = [];
  for (let start = 0; start < count; start += 500) {
    const flows = Array.from({ length: Math.min(500, count - start) }, () => workflowFixture(userId, { buildStatus: 'COMPLETED', buildCompletedAt: 0 }));
    await store.db
      .insertInto('workflows')
      .values(
        flows.map((w) => ({
          id: w.id,
          user_id: userId,
          name: w.name,
          name_folded: w.name,
          payload: w.payload,
          kind: w.kind,
          build_status: 'COMPLETED' as const,
          build_completed_at: 0,
          generation: 0,
          interval_minutes: w.intervalMinutes,
          consecutive_job_failures_count: 0,
          max_consecutive_job_failures_allowed: w.maxConsecutiveJobFailuresAllowed,
          log_retention: 0,
          created_at: 0,
          updated_at: 0,
        })),
      )
      .execute();
    const batch = flows.map((w, i) => jobFixture(w, status, { at: from + start + i, trigger: 'AUTOMATIC', slotAt: from + start + i }));
    await store.jobs.insertMany(batch);
    jobs.push(...batch);
  }
  return jobs;
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
  const job = await insertJob(store, w, 'PENDING', { at: 0, ...overrides.job });
  return { jobId: job.id, workflowId: w.id, userId };
}
