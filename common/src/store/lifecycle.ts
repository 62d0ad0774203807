import type { Store } from './store.js';
import type { LastTwoOutcomes } from './repos/jobs.repo.js';
import type { Workflow } from '../domain/workflow.js';
import type { Job } from '../domain/job.js';
import { cancelReason } from '../domain/job-state.js';
import { scheduleOf } from '../domain/schedule.js';
import { domainEvents, type DomainEvent, type TerminationCause } from '../domain/events.js';

/**
 * Workflow and job state changes that span several rows. Each runs inside the
 * caller's transaction, so either all of it happens or none of it does — the
 * domain event it writes to the outbox included (docs/notifications.md): a
 * change that rolls back leaves no event, and a committed one always has its
 * event.
 */

/** A new workflow (POST /workflows). */
export async function createWorkflow(tx: Store, workflow: Workflow): Promise<void> {
  await tx.workflows.insert(workflow);
  await tx.users.countWorkflow(workflow.userId, 1);
  await tx.outbox.add(domainEvents.workflowCreated(workflow));
}

/**
 * Terminates an active workflow and cancels its PENDING and QUEUED jobs;
 * RUNNING jobs are stopped by the scheduler (it asks their runners). Returns
 * false when the workflow was already terminated. `cause.automatic`: the
 * service terminates it after too many consecutive failed jobs.
 */
export async function terminateWorkflow(tx: Store, userId: string, workflowId: string, now: number, cause: TerminationCause = { automatic: false }): Promise<boolean> {
  const terminated = await tx.workflows.terminate(userId, workflowId, now);
  if (!terminated) return false;
  await tx.outbox.add(domainEvents.workflowTerminated(terminated, now, cause));
  await cancelJobs(tx, terminated, await tx.jobs.cancelOpen(workflowId, cancelReason('terminated'), now), now);
  return true;
}

/** After a PUT: the PENDING and QUEUED jobs of older generations belong to the old definition. */
export async function cancelOutdatedJobs(tx: Store, workflow: Workflow, now: number): Promise<void> {
  await cancelJobs(tx, workflow, await tx.jobs.cancelOpen(workflow.id, cancelReason('updated'), now, workflow.generation + 1), now);
}

async function cancelJobs(tx: Store, workflow: Workflow, canceled: readonly Job[], now: number): Promise<void> {
  for (const job of canceled) await tx.outbox.add(domainEvents.jobEnded(workflow, job, now));
}

/** Deletes a terminated workflow (its jobs, logs and notifications go with it; its analytics stay). */
export async function deleteWorkflow(tx: Store, workflow: Workflow, now: number): Promise<boolean> {
  if (!(await tx.workflows.deleteTerminated(workflow.userId, workflow.id))) return false;
  await tx.users.countWorkflow(workflow.userId, -1);
  await tx.outbox.add(domainEvents.workflowDeleted(workflow, now));
  return true;
}

/** Records a build's result; false when it is stale (another build started, or the workflow was terminated). */
export async function recordBuildResult(tx: Store, workflowId: string, token: number, ok: boolean, now: number): Promise<boolean> {
  const built = await tx.workflows.finishBuild(workflowId, token, ok, now);
  // finishBuild puts the first slot one interval on; a cron schedule or a jitter offset puts it elsewhere.
  const first = built && ok ? scheduleOf(built)?.firstSlotAfter(now) : undefined;
  if (built && first !== undefined && first !== built.nextDueAt) {
    await tx.workflows.setNextDue(built.id, first);
    built.nextDueAt = first;
  }
  if (built) await tx.outbox.add(domainEvents.buildFinished(built, ok, now));
  return built !== undefined;
}

/**
 * Applies a job's terminal outcome to its workflow: a FAILED job adds one
 * consecutive failure and terminates the workflow at its limit; a COMPLETED
 * job resets the count; a CANCELED job does neither. Every outcome writes its
 * event; a failure that turns the workflow down is marked so (`down`), and a
 * completion that turns it up again writes workflow.recovered too. Call it
 * only with the job returned by the transition that made it terminal, so a
 * result delivered twice is counted once.
 */
export async function applyJobOutcome(tx: Store, job: Job, now: number): Promise<{ autoTerminated: boolean }> {
  // Locked: see runMissedSlot.
  const workflow = await tx.workflows.findById(job.workflowId, { lock: true });
  const change = workflow && job.status !== 'CANCELED' ? await stateChange(tx, job) : undefined;
  if (workflow) await tx.outbox.add(domainEvents.jobEnded(workflow, job, now, change === 'down'));
  if (job.status === 'COMPLETED') {
    if (workflow && change === 'recovered') await tx.outbox.add(domainEvents.workflowRecovered(workflow, job, now));
    // `workflow` is locked: a count of 0 read here stays 0, and there is nothing to reset.
    if (!workflow || workflow.consecutiveJobFailuresCount > 0) await tx.workflows.resetFailures(job.workflowId, now);
  } else if (job.status === 'FAILED') {
    const failures = await tx.workflows.recordFailure(job.workflowId, now);
    if (failures && !failures.terminated && failures.count >= failures.max) {
      return { autoTerminated: await terminateWorkflow(tx, job.userId, job.workflowId, now, { automatic: true, requestId: job.requestId }) };
    }
  }
  if (workflow) await runMissedSlot(tx, workflow, job, now);
  return { autoTerminated: false };
}

/**
 * applyJobOutcome for the jobs a batch of runner results ended, with the
 * same effects, in a few statements for the lot: their workflows read (and
 * locked) at once, one recovery lookup, one insert of their events. A FAILED
 * job (a failure count that may terminate the workflow) goes through
 * applyJobOutcome itself. The jobs must belong to different workflows: the
 * outcomes of one workflow are applied one after the other (the caller
 * splits its batch so).
 */
export async function applyJobOutcomes(tx: Store, jobs: readonly Job[], now: number): Promise<void> {
  if (new Set(jobs.map((j) => j.workflowId)).size !== jobs.length) throw new Error('applyJobOutcomes: one job a workflow');
  const rest: Job[] = [];
  for (const job of jobs) {
    if (job.status === 'FAILED') await applyJobOutcome(tx, job, now);
    else rest.push(job);
  }
  if (rest.length === 0) return;
  // Locked: see runMissedSlot.
  const workflows = new Map((await tx.workflows.findByIds(rest.map((j) => j.workflowId), { lock: true })).map((w) => [w.id, w]));
  const completed = rest.filter((j) => j.status === 'COMPLETED' && workflows.has(j.workflowId));
  const outcomes = await tx.jobs.lastTwoOutcomes(completed.map((j) => j.workflowId));
  const events: DomainEvent[] = [];
  for (const job of rest) {
    const workflow = workflows.get(job.workflowId);
    if (!workflow) continue;
    events.push(domainEvents.jobEnded(workflow, job, now));
    if (stateChangeOf(job, outcomes.get(job.workflowId)) === 'recovered') events.push(domainEvents.workflowRecovered(workflow, job, now));
  }
  await tx.outbox.addMany(events);
  for (const job of completed) {
    // `workflow` is locked: a count of 0 read here stays 0, and there is nothing to reset.
    if (workflows.get(job.workflowId)!.consecutiveJobFailuresCount > 0) await tx.workflows.resetFailures(job.workflowId, now);
  }
  for (const job of rest) {
    const workflow = workflows.get(job.workflowId);
    if (workflow) await runMissedSlot(tx, workflow, job, now);
  }
}

/**
 * Whether the finished job changes the workflow's up/down state: it is now
 * the latest finished run, and the one before it (CANCELED runs passed over)
 * FAILED while this one completed (`recovered`), or did not fail (or there was
 * none) while this one FAILED (`down`) — the same reading as the health
 * state's `down` and `up` (common/src/domain/health.ts). The workflow row is
 * locked by the caller, so outcomes of one workflow are applied one at a time
 * and each transition is seen by exactly one job.
 */
async function stateChange(tx: Store, job: Job): Promise<'down' | 'recovered' | undefined> {
  return stateChangeOf(job, (await tx.jobs.lastTwoOutcomes([job.workflowId])).get(job.workflowId));
}

/** stateChange() from the workflow's last two outcomes as JobsRepo.lastTwoOutcomes reads them (after this job's own transition). */
function stateChangeOf(job: Job, last: LastTwoOutcomes | undefined): 'down' | 'recovered' | undefined {
  if (last?.latestId !== job.id) return undefined;
  if (job.status === 'COMPLETED') return last.beforeStatus === 'FAILED' ? 'recovered' : undefined;
  if (job.status === 'FAILED') return last.beforeStatus === 'FAILED' ? undefined : 'down';
  return undefined;
}

/**
 * A slot that came while the job ran was skipped (runs never overlap) and the
 * workflow was set to wait for its next slot. Its most recent missed slot runs
 * now instead, once, as after any downtime.
 */
async function runMissedSlot(tx: Store, w: Workflow, job: Job, now: number): Promise<void> {
  // `w` was read locked: the leader locks a due workflow before it decides the
  // workflow is busy, so it either sees this job ended or has set the workflow
  // aside before `w` was read (see DueSlots.createDueJobs in scheduler/src/due-slots.ts).
  // A paused workflow has no automatic slots: resuming sets its next one.
  const schedule = scheduleOf(w);
  if (w.terminatedAt !== null || w.pausedAt !== null || !schedule || w.nextDueAt === null || w.nextDueAt <= now) return;
  const missed = schedule.mostRecentSlot(now);
  if (missed <= now && missed > job.scheduledAt) {
    await tx.workflows.setNextDue(w.id, now);
    // The slots between the job's and the one that runs now never run.
    const skipped = schedule.countIn(job.scheduledAt + 1, missed);
    if (skipped > 0 && job.trigger === 'AUTOMATIC') await tx.workflows.recordSkippedSlots([{ id: w.id, skipped, at: now }]);
  }
}
