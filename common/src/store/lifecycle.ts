import type { Store } from './store.js';
import type { RollupSample } from './repos/rollups.repo.js';
import { newId } from '../core/ids.js';
import type { BuildError, Workflow } from '../domain/workflow.js';
import type { Job } from '../domain/job.js';
import { cancelReason } from '../domain/job-state.js';
import { scheduleOf } from '../domain/schedule.js';
import { isMuted } from '../domain/maintenance-window.js';
import { domainEvents, type DomainEvent, type TerminationCause } from '../domain/events.js';

/**
 * Workflow and job state changes that span several rows. Each runs inside the
 * caller's transaction, so either all of it happens or none of it does — the
 * domain event it writes to the outbox included (docs/notifications.md): a
 * change that rolls back leaves no event, and a committed one always has its
 * event.
 */

/** A failed build's reason when the runner gave none. */
const BUILD_FAILED: BuildError = { code: 'FAILURE_REASON_UNAVAILABLE', message: 'The build failed.' };

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
  await tx.incidents.close(workflowId, 'terminated', now);
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

/**
 * Records a build's result; false when it is stale (another build started, or
 * the workflow was terminated). A failed build keeps its reason (`error`, or
 * "The build failed." when none came) on the workflow until the next build.
 */
export async function recordBuildResult(tx: Store, workflowId: string, token: number, ok: boolean, now: number, error?: BuildError): Promise<boolean> {
  const built = await tx.workflows.finishBuild(workflowId, token, ok, now, ok ? null : (error ?? BUILD_FAILED));
  // finishBuild puts the first slot one interval on; a cron schedule, a jitter offset or first run `now` (a slot at the build itself) put it elsewhere.
  const first = built && ok ? scheduleOf(built)?.firstSlotAfter(now - 1) : undefined;
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
 * event; a failure that turns the workflow down by its alert policy is marked
 * so (`down`) and opens an incident, and a completion that turns it up again
 * writes workflow.recovered too and closes the incident (alertChange). Call
 * it only with the job returned by the transition that made it terminal, so a
 * result delivered twice is counted once.
 */
export async function applyJobOutcome(tx: Store, job: Job, now: number): Promise<{ autoTerminated: boolean }> {
  const rollups: RollupSample[] = [];
  const outcome = await applyOne(tx, job, now, rollups);
  await tx.rollups.addMany(rollups);
  return outcome;
}

/** applyJobOutcome, but the run's rollup sample is left in `rollups` for the caller to write. */
async function applyOne(tx: Store, job: Job, now: number, rollups: RollupSample[]): Promise<{ autoTerminated: boolean }> {
  // Locked: see runMissedSlot.
  const workflow = await tx.workflows.findById(job.workflowId, { lock: true });
  const alerting = workflow && (job.status === 'FAILED' || (job.status === 'COMPLETED' && workflow.alertDown));
  const muted = alerting ? await mutedFor(tx, workflow, job, now) : false;
  const change = alerting ? await alertChange(tx, workflow, job, now, muted) : undefined;
  if (workflow) await tx.outbox.add(domainEvents.jobEnded(workflow, job, now, change === 'down', muted));
  if (workflow) rollUp(rollups, job, now);
  if (job.status === 'COMPLETED') {
    if (workflow && change === 'recovered') await tx.outbox.add(domainEvents.workflowRecovered(workflow, job, now, muted));
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
 * locked) at once, one insert of their events. A FAILED job (a failure count
 * that may terminate the workflow, an incident) and a COMPLETED job of a
 * workflow that is down (a possible recovery) go through applyJobOutcome
 * itself. The rollups of all of them are written together
 * (RollupsRepo.addMany: on SQLite mostly one UPDATE a run, on PostgreSQL a
 * read and a write for the lot). The jobs must belong to different
 * workflows: the outcomes of one workflow are applied one after the other
 * (the caller splits its batch so).
 */
export async function applyJobOutcomes(tx: Store, jobs: readonly Job[], now: number): Promise<void> {
  if (new Set(jobs.map((j) => j.workflowId)).size !== jobs.length) throw new Error('applyJobOutcomes: one job a workflow');
  // Locked: see runMissedSlot.
  const workflows = new Map((await tx.workflows.findByIds(jobs.map((j) => j.workflowId), { lock: true })).map((w) => [w.id, w]));
  const rest: Job[] = [];
  const rollups: RollupSample[] = [];
  for (const job of jobs) {
    if (job.status === 'FAILED' || (job.status === 'COMPLETED' && workflows.get(job.workflowId)?.alertDown)) await applyOne(tx, job, now, rollups);
    else rest.push(job);
  }
  for (const job of rest) if (workflows.has(job.workflowId)) rollUp(rollups, job, now);
  await tx.rollups.addMany(rollups);
  if (rest.length === 0) return;
  const events: DomainEvent[] = [];
  for (const job of rest) {
    const workflow = workflows.get(job.workflowId);
    if (workflow) events.push(domainEvents.jobEnded(workflow, job, now));
  }
  await tx.outbox.addMany(events);
  for (const job of rest) {
    // `workflow` is locked: a count of 0 read here stays 0, and there is nothing to reset.
    if (job.status === 'COMPLETED' && (workflows.get(job.workflowId)?.consecutiveJobFailuresCount ?? 0) > 0) await tx.workflows.resetFailures(job.workflowId, now);
  }
  for (const job of rest) {
    const workflow = workflows.get(job.workflowId);
    if (workflow) await runMissedSlot(tx, workflow, job, now);
  }
}

/**
 * Whether the finished job changes the workflow's up/down state by its alert
 * policy (issue 26, docs/notifications.md): it is now the latest finished run
 * (CANCELED runs passed over, in the order the health state reads them), and
 * an up workflow's latest `alertAfterFailures` runs all FAILED (`down`: an
 * incident opens), or a down workflow's latest `recoverAfterSuccesses` runs
 * all COMPLETED (`recovered`: the incident closes). With both at 1 this is
 * the reading before the policy: down when a failure follows a run that did
 * not fail, up when a completion follows a failure. While `muted` (a
 * maintenance window or a snooze) a failure turns nothing down. A failure of a workflow
 * that is down already counts in its open incident (or opens one, after a
 * termination closed the last). The workflow row is locked by the caller, so
 * outcomes of one workflow are applied one at a time and each transition is
 * seen by exactly one job.
 */
async function alertChange(tx: Store, w: Workflow, job: Job, now: number, muted: boolean): Promise<'down' | 'recovered' | undefined> {
  if (job.status === 'FAILED' && w.alertDown) {
    if (!(await tx.incidents.addFailedRun(w.id, now)) && !muted) await openIncident(tx, w, job, [job], now);
    return undefined;
  }
  if (job.status === 'COMPLETED' && !w.alertDown) return undefined;
  // Muted, a failure turns nothing down (no incident); a recovery still closes the incident, silently (its event says muted).
  if (muted && job.status === 'FAILED') return undefined;
  const n = job.status === 'FAILED' ? w.alertAfterFailures : w.recoverAfterSuccesses;
  const last = await tx.jobs.lastOutcomes(w.id, n);
  if (last[0]?.id !== job.id || last.length < n || !last.every((j) => j.status === job.status)) return undefined;
  await tx.workflows.setAlertDown(w.id, job.status === 'FAILED');
  if (job.status === 'COMPLETED') {
    await tx.incidents.close(w.id, 'recovered', now);
    return 'recovered';
  }
  await openIncident(tx, w, job, last, now);
  return 'down';
}

/**
 * Whether a maintenance window or a snooze mutes the workflow's alerts
 * (docs/adr/0019-maintenance-windows.md): one applies now, or applied at the
 * job's slot (a run that began in the window finishes without alerting).
 */
async function mutedFor(tx: Store, w: Workflow, job: Job, now: number): Promise<boolean> {
  const windows = await tx.maintenanceWindows.inForce([w.userId], Math.min(job.scheduledAt, now));
  return windows.length > 0 && (isMuted(windows, w, now) || isMuted(windows, w, job.scheduledAt));
}

/** Opens the workflow's incident: `streak` the failed runs that turned it down, latest first. */
async function openIncident(tx: Store, w: Workflow, job: Job, streak: readonly Job[], now: number): Promise<void> {
  const first = streak[streak.length - 1]!;
  await tx.incidents.open(
    {
      id: newId(),
      userId: w.userId,
      workflowId: w.id,
      openedByJobId: job.id,
      startedAt: first.completedAt ?? first.scheduledAt,
      openedAt: now,
      firstFailureJobId: first.id,
      firstFailureCode: first.statusReasonCode,
      firstFailureMessage: first.statusReasonMessage,
      failedRuns: streak.length,
    },
    now,
  );
}

/** A COMPLETED or FAILED run's sample for its workflow's hourly rollup (issue 26): its check's response time, or else how long it ran. */
function rollUp(rollups: RollupSample[], job: Job, now: number): void {
  if (job.status !== 'COMPLETED' && job.status !== 'FAILED') return;
  const ran = job.startedAt !== null && job.completedAt !== null ? job.completedAt - job.startedAt : null;
  rollups.push({ workflowId: job.workflowId, userId: job.userId, at: job.completedAt ?? now, failed: job.status === 'FAILED', responseMs: job.check?.responseTimeMs ?? ran });
}

/**
 * A slot that came while the job ran got no job (runs never overlap) and the
 * workflow was set to wait for its next slot. By the overlap policy
 * (run-policy.ts): `run_after` runs the most recent such slot now instead,
 * once, as after any downtime; `skip` leaves them all unrun.
 */
async function runMissedSlot(tx: Store, w: Workflow, job: Job, now: number): Promise<void> {
  // `w` was read locked: the leader locks a due workflow before it decides the
  // workflow is busy, so it either sees this job ended or has set the workflow
  // aside before `w` was read (see DueSlots.createDueJobs in scheduler/src/due-slots.ts).
  // A paused workflow has no automatic slots: resuming sets its next one.
  const schedule = scheduleOf(w);
  if (w.terminatedAt !== null || w.pausedAt !== null || !schedule || w.nextDueAt === null) return;
  const missed = schedule.mostRecentSlot(now);
  // No slot came while the job ran.
  if (missed > now || missed <= job.scheduledAt) return;
  let skipped: number;
  if (w.overlapPolicy === 'skip') {
    // Not even a slot the leader has not come to yet runs: the workflow waits for its next one.
    if (w.nextDueAt <= now) await tx.workflows.setNextDue(w.id, schedule.firstSlotAfter(now));
    skipped = schedule.countIn(job.scheduledAt + 1, missed + 1);
  } else {
    // A slot the leader has not come to yet runs as it comes.
    if (w.nextDueAt <= now) return;
    await tx.workflows.setNextDue(w.id, now);
    // The slots between the job's and the one that runs now never run.
    skipped = schedule.countIn(job.scheduledAt + 1, missed);
  }
  if (skipped > 0 && job.trigger === 'AUTOMATIC') await tx.workflows.recordSkippedSlots([{ id: w.id, skipped, at: now }]);
}
