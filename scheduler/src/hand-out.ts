import { afterSystemFailure, queueNextAttempt, type AttemptEnd, type Job, type JobReason, type Workflow } from '@orloj/common/domain';
import { MESSAGE_TYPES, QUEUES, TOPICS, type JobRunMessage, type JobStopMessage } from '@orloj/common/messages';
import { applyJobOutcome } from '@orloj/common/store';
import type { SchedulerContext } from './context.js';

/**
 * Jobs on their way to the runners and back: handing jobs out (job.run), the
 * next attempt after a SYSTEM failure, and stop requests (job.stop). The
 * leader's loop and the job events every replica applies both use it.
 */
export class HandOut {
  constructor(private readonly c: SchedulerContext) {}

  /**
   * Publishes the jobs' messages and records which ones the bus confirmed. A
   * message expires when the sweep would hand its job out again, so a late
   * delivery of an old attempt is refused instead of running twice. A job whose
   * publish failed stays QUEUED and unconfirmed; the sweep hands it out again.
   */
  async send(jobs: readonly (readonly [Job, Workflow])[]): Promise<void> {
    const sent: { id: string; attempts: number }[] = [];
    await Promise.all(
      jobs.map(async ([job, workflow]) => {
        const body: JobRunMessage = {
          job_id: job.id,
          workflow_id: job.workflowId,
          attempt: job.attempts,
          kind: workflow.kind,
          payload: workflow.payload,
          log_retention: workflow.logRetention,
        };
        try {
          // A manual job's message carries the request that created it: the runner's lines for it carry its reqId.
          await this.c.bus.publish(QUEUES.jobs, MESSAGE_TYPES.jobRun, body, { ttlMs: this.c.config.queueTimeoutMs, reqId: job.requestId ?? undefined });
          sent.push({ id: job.id, attempts: job.attempts });
        } catch (err) {
          this.c.log.warn({ err, jobId: job.id }, 'could not hand a job to the runners; it will be retried');
        }
      }),
    );
    await this.c.store.jobs.markDispatched(sent, this.c.clock.now());
  }

  /**
   * Moves the jobs to QUEUED as their next attempt: all in one statement, or,
   * when that would give a workflow a second active job (another leader, or a
   * manual job, got there first), one by one, each job that would overlap
   * waiting.
   */
  async queueAll(jobs: readonly Job[], now: number): Promise<Job[]> {
    const { store } = this.c;
    const all = await this.guardOverlap(() => store.jobs.queueNextAttempts(jobs, now));
    if (all) return all;
    const moved: Job[] = [];
    for (const job of jobs) {
      const one = await this.guardOverlap(() => store.jobs.apply(job.id, queueNextAttempt(job, now), now));
      if (one) moved.push(one);
    }
    return moved;
  }

  /** The one-active-job-per-workflow key refuses a second QUEUED job; that job simply waits. */
  private async guardOverlap<T>(move: () => Promise<T | undefined>): Promise<T | undefined> {
    try {
      return await move();
    } catch (err) {
      if (this.c.store.dialect.isUniqueViolation(err)) return undefined;
      throw err;
    }
  }

  /**
   * A SYSTEM failure of one attempt (runner vanished, runtime unavailable):
   * another attempt while attempts remain, else FAILED SYSTEM_ERROR. A job of
   * a workflow terminated meanwhile is canceled instead. An attempt given up
   * for another is recorded with `end` (why) in the same transaction, for the
   * job page's attempts.
   */
  async retryOrFail(job: Job, now: number, finalReason: JobReason, end: AttemptEnd): Promise<void> {
    const { store } = this.c;
    const workflow = await store.workflows.findById(job.workflowId);
    const next = afterSystemFailure(job, workflow, this.c.config.maxAttempts, now, finalReason);
    if (next.to === 'QUEUED' && workflow) {
      const retried = await this.guardOverlap(() =>
        store.transaction(async (tx) => {
          const moved = await tx.jobs.apply(job.id, next, now);
          if (moved) {
            await tx.jobAttempts.recordEnded({ jobId: job.id, attempt: job.attempts, runnerId: job.runnerId, startedAt: job.startedAt, endedAt: now, end });
          }
          return moved;
        }),
      );
      if (retried) {
        this.c.log.warn({ jobId: job.id, attempt: retried.attempts }, 'retrying a job on another runner');
        await this.send([[retried, workflow]]);
      }
      return;
    }
    await store.transaction(async (tx) => {
      const ended = await tx.jobs.apply(job.id, next, now);
      if (ended) await applyJobOutcome(tx, ended, now);
    });
  }

  /** Asks every runner to stop the job (only `attempt`, when given); a failed broadcast is repeated by the caller's next pass. */
  async stop(jobId: string, reason: JobReason, attempt?: number): Promise<void> {
    const body: JobStopMessage = { job_id: jobId, reason, ...(attempt !== undefined ? { attempt } : {}) };
    try {
      await this.c.bus.broadcast(TOPICS.jobControl, MESSAGE_TYPES.jobStop, body);
    } catch (err) {
      this.c.log.warn({ err, jobId }, 'could not broadcast a stop request; it will be repeated');
    }
  }
}
