import type { Store } from './store.js';
import type { Job } from '../domain/job-record.js';
import { reasons } from '../domain/job.js';
import { mostRecentSlot } from '../domain/due-slots.js';

/**
 * Workflow and job state changes that span several rows. Each runs inside the
 * caller's transaction, so either all of it happens or none of it does.
 */

/**
 * Terminates an active workflow and cancels its PENDING and QUEUED jobs;
 * RUNNING jobs are stopped by the scheduler (it asks their runners). Returns
 * false when the workflow was already terminated.
 */
export async function terminateWorkflow(tx: Store, userId: string, workflowId: string, now: number): Promise<boolean> {
  if (!(await tx.workflows.terminate(userId, workflowId, now))) return false;
  await tx.jobs.cancelOpen(workflowId, reasons.workflowTerminated(), now);
  return true;
}

/**
 * Applies a job's terminal outcome to its workflow: a FAILED job adds one
 * consecutive failure and terminates the workflow at its limit; a COMPLETED
 * job resets the count; a CANCELED job does neither. Call it only with the job
 * returned by the transition that made it terminal, so a result delivered
 * twice is counted once.
 */
export async function applyJobOutcome(tx: Store, job: Job, now: number): Promise<{ autoTerminated: boolean }> {
  if (job.status === 'COMPLETED') {
    await tx.workflows.resetFailures(job.workflowId, now);
  } else if (job.status === 'FAILED') {
    const failures = await tx.workflows.recordFailure(job.workflowId, now);
    if (failures && !failures.terminated && failures.count >= failures.max) {
      return { autoTerminated: await terminateWorkflow(tx, job.userId, job.workflowId, now) };
    }
  }
  await runMissedSlot(tx, job, now);
  return { autoTerminated: false };
}

/**
 * A slot that came while the job ran was skipped (runs never overlap) and the
 * workflow was set to wait for its next slot. Its most recent missed slot runs
 * now instead, once, as after any downtime.
 */
async function runMissedSlot(tx: Store, job: Job, now: number): Promise<void> {
  // Locked: the leader locks a due workflow before it decides the workflow is
  // busy, so it either sees this job ended or has set the workflow aside
  // before this reads it (see Scheduler.createDueJobs).
  const w = await tx.workflows.findById(job.workflowId, { lock: true });
  if (!w || w.terminatedAt !== null || w.buildCompletedAt === null || w.nextDueAt === null || w.nextDueAt <= now) return;
  const missed = mostRecentSlot(w.buildCompletedAt, w.intervalMinutes * 60_000, now);
  if (missed <= now && missed > job.scheduledAt) await tx.workflows.setNextDue(w.id, now);
}
