/**
 * The `jobs` table's SQL: inserts, reads, leases, cancels and the scheduler's
 * sweep queries. The guarded state transitions are job-moves.repo.ts, the
 * runners' queue job-queue.repo.ts, the row mapping job-rows.ts, the health
 * read-outs job-health.reads.ts. No lifecycle decisions are made here.
 */
import { sql, type Kysely, type Selectable } from 'kysely';
import { onAttempts, toJob, toRow } from './job-rows.js';
import { JobHealthReads } from './job-health.reads.js';
import { slot, type ReadRunner } from '../compiled-read.js';
import type { Database, JobsTable } from '../schema.js';
import type { DialectHelpers } from '../dialect.js';
import type { Job, JobStatus, JobTrigger, ReasonCode } from '../../domain/job.js';
import { RECENT_RUNS, type OpenRun, type RunCounts, type RunSummary } from '../../domain/health.js';
import { CANCELED_WITH_WORKFLOW, LEASED_STATUS } from '../../domain/job-state.js';
import type { KeysetPosition } from '../../core/cursor.js';

export interface JobListFilter {
  workflowId: string;
  status?: JobStatus;
  trigger?: JobTrigger;
  after?: KeysetPosition;
  limit: number;
}

/** What the log routes need of a job: its current attempt and status, and whether its workflow keeps logs. */
export interface JobLogAccess {
  attempts: number;
  status: JobStatus;
  logRetention: boolean;
}

const INSERT_CHUNK = 1_000;

export class JobsRepo {
  private readonly health: JobHealthReads;

  constructor(
    private readonly db: Kysely<Database>,
    private readonly runner: ReadRunner,
    private readonly dialect: DialectHelpers,
  ) {
    this.health = new JobHealthReads(db);
  }

  /**
   * Inserts a job. For AUTOMATIC jobs the unique (workflow, slot) index makes a
   * second insert for the same slot a no-op: returns false then.
   */
  async insert(job: Job): Promise<boolean> {
    return (await this.insertMany([job])).length === 1;
  }

  /**
   * Inserts jobs with multi-row INSERTs (a due batch at once); a job whose
   * AUTOMATIC slot already has one is skipped, as by insert(). Returns the
   * ids of the jobs inserted.
   */
  async insertMany(jobs: readonly Job[]): Promise<string[]> {
    const inserted: string[] = [];
    // 20 columns a row: well under either engine's bind-parameter limit.
    for (let i = 0; i < jobs.length; i += INSERT_CHUNK) {
      const rows = await this.db
        .insertInto('jobs')
        .values(jobs.slice(i, i + INSERT_CHUNK).map(toRow))
        .onConflict((oc) => oc.doNothing())
        .returning('id')
        .execute();
      for (const r of rows) inserted.push(r.id);
    }
    return inserted;
  }

  async findById(id: string): Promise<Job | undefined> {
    const row = await this.db.selectFrom('jobs').selectAll().where('id', '=', id).executeTakeFirst();
    return row && toJob(row);
  }

  /** These jobs, those that exist, in no particular order: one statement text for any count. */
  async findByIds(ids: readonly string[]): Promise<Job[]> {
    if (ids.length === 0) return [];
    const { rows } = await sql<Selectable<JobsTable>>`select * from jobs where ${this.dialect.idIn('id', [...new Set(ids)])}`.execute(this.db);
    return rows.map(toJob);
  }

  async findForUser(userId: string, workflowId: string, jobId: string): Promise<Job | undefined> {
    const row = await this.db
      .selectFrom('jobs')
      .selectAll()
      .where('id', '=', jobId)
      .where('workflow_id', '=', workflowId)
      .where('user_id', '=', userId)
      .executeTakeFirst();
    return row && toJob(row);
  }

  /**
   * The user's job of this workflow, as the log routes check it before every
   * page, download or tail: one compiled read over the job and its workflow.
   */
  async logAccess(userId: string, workflowId: string, jobId: string): Promise<JobLogAccess | undefined> {
    const read = this.runner.reads.get('jobs.logAccess', (db) =>
      db
        .selectFrom('jobs as j')
        .innerJoin('workflows as w', 'w.id', 'j.workflow_id')
        .select(['j.attempts', 'j.status', 'w.log_retention'])
        .where('j.id', '=', slot<string>('jobId'))
        .where('j.workflow_id', '=', slot<string>('workflowId'))
        .where('j.user_id', '=', slot<string>('userId'))
        .where('w.user_id', '=', slot<string>('userId')),
    );
    const [row] = (await this.runner.rows(read, { userId, workflowId, jobId })) as [attempts: number, status: JobStatus, logRetention: number][];
    return row && { attempts: row[0], status: row[1], logRetention: row[2] === 1 };
  }

  /** Newest first by (scheduled_at, id). */
  async list(f: JobListFilter): Promise<Job[]> {
    let q = this.db.selectFrom('jobs').selectAll().where('workflow_id', '=', f.workflowId);
    if (f.status) q = q.where('status', '=', f.status);
    if (f.trigger) q = q.where('trigger', '=', f.trigger);
    if (f.after) {
      const { k, id } = f.after;
      q = q.where((eb) => eb.or([eb('scheduled_at', '<', k), eb.and([eb('scheduled_at', '=', k), eb('id', '<', id)])]));
    }
    const rows = await q.orderBy('scheduled_at', 'desc').orderBy('id', 'desc').limit(f.limit).execute();
    return rows.map(toJob);
  }

  /**
   * Hands these QUEUED jobs out again on the same attempt, for when their
   * message is known to be gone (refused by a runner and dead-lettered, or
   * lost with the in-process bus): queued_at restarts and the bus must confirm
   * the new message. Only where the job is still QUEUED on that attempt and
   * not started; returns the jobs it moved.
   */
  async resendSameAttempt(jobs: readonly { id: string; attempts: number }[], now: number): Promise<Job[]> {
    if (jobs.length === 0) return [];
    const rows = await this.db
      .updateTable('jobs')
      .set({ updated_at: now, dispatched_at: null, queued_at: now })
      .where('status', '=', 'QUEUED')
      .where('started_at', 'is', null)
      .where((eb) => onAttempts(eb, jobs))
      .returningAll()
      .execute();
    return rows.map(toJob);
  }

  /** Extends the lease of a running attempt; false when the job is no longer on it. */
  async renewLease(id: string, attempts: number, leaseExpiresAt: number, now: number): Promise<boolean> {
    const r = await this.db
      .updateTable('jobs')
      .set({ lease_expires_at: leaseExpiresAt, updated_at: now })
      .where('id', '=', id)
      .where('status', '=', LEASED_STATUS)
      .where('attempts', '=', attempts)
      .executeTakeFirst();
    return Number(r.numUpdatedRows) === 1;
  }

  /** Cancels the workflow's PENDING and QUEUED jobs (CANCELED_WITH_WORKFLOW; optionally only those of older generations). */
  async cancelOpen(workflowId: string, reason: { code: ReasonCode; message: string }, now: number, olderThanGeneration?: number): Promise<Job[]> {
    let q = this.db
      .updateTable('jobs')
      .set({ status: 'CANCELED', status_reason_code: reason.code, status_reason_message: reason.message, completed_at: now, updated_at: now })
      .where('workflow_id', '=', workflowId)
      .where('status', 'in', CANCELED_WITH_WORKFLOW);
    if (olderThanGeneration !== undefined) q = q.where('generation', '<', olderThanGeneration);
    return (await q.returningAll().execute()).map(toJob);
  }

  async withStatus(workflowId: string, statuses: readonly JobStatus[]): Promise<Job[]> {
    const rows = await this.db.selectFrom('jobs').selectAll().where('workflow_id', '=', workflowId).where('status', 'in', statuses).execute();
    return rows.map(toJob);
  }


  /** Whether the workflow has a job that is QUEUED or RUNNING. */
  async hasActive(workflowId: string): Promise<boolean> {
    const row = await this.db
      .selectFrom('jobs')
      .select('id')
      .where('workflow_id', '=', workflowId)
      .where('status', 'in', ['QUEUED', 'RUNNING'])
      .limit(1)
      .executeTakeFirst();
    return row !== undefined;
  }

  /** Jobs in each of `statuses` right now (for metrics: the open ones are few, and indexed). */
  async countByStatus(statuses: readonly JobStatus[]): Promise<Record<string, number>> {
    const counts: Record<string, number> = Object.fromEntries(statuses.map((s) => [s, 0]));
    if (statuses.length === 0) return counts;
    const rows = await this.db
      .selectFrom('jobs')
      .select(['status', (eb) => eb.fn.countAll<number>().as('n')])
      .where('status', 'in', [...statuses])
      .groupBy('status')
      .execute();
    for (const r of rows) counts[r.status] = Number(r.n);
    return counts;
  }

  /** When the earliest pending job (a manual run, or a due slot that waits for room) that may be handed out now was scheduled. */
  async nextPendingAt(): Promise<number | undefined> {
    // Along jobs_pending_idx (scheduled_at) to the first that may go, which is nearly always the first: SQLite's
    // statistics would read every PENDING job by status and sort them (90 ms at 30,000 waiting, each leader pass).
    const byTime = this.dialect.indexedBy('jobs_pending_idx');
    const { rows } = await sql<{ scheduled_at: number }>`select j.scheduled_at from jobs as j ${byTime}
      where j.status = 'PENDING'
        and not exists (select 1 from jobs as busy where busy.workflow_id = j.workflow_id and busy.status in ('QUEUED', 'RUNNING'))
      order by j.scheduled_at limit 1`.execute(this.db);
    const [row] = rows;
    return row?.scheduled_at;
  }

  /**
   * QUEUED jobs presumed lost: sent before `sentBefore` and never started
   * (the message expired), or never confirmed sent by `unsentBefore` (the
   * leader died between queueing and publishing).
   */
  async staleQueued(sentBefore: number, unsentBefore: number, limit: number): Promise<Job[]> {
    const rows = await this.db
      .selectFrom('jobs')
      .selectAll()
      .where('status', '=', 'QUEUED')
      .where((eb) =>
        eb.or([
          eb.and([eb('dispatched_at', 'is not', null), eb('queued_at', '<', sentBefore)]),
          eb.and([eb('dispatched_at', 'is', null), eb('queued_at', '<', unsentBefore)]),
        ]),
      )
      .orderBy('queued_at')
      .limit(limit)
      .execute();
    return rows.map(toJob);
  }

  /** QUEUED and RUNNING jobs handed out before `before` (oldest first): after a restart of the in-process bus, their messages and runners are gone. */
  async openSince(before: number, limit: number): Promise<Job[]> {
    const rows = await this.db
      .selectFrom('jobs')
      .selectAll()
      .where('status', 'in', ['QUEUED', 'RUNNING'])
      .where('queued_at', '<', before)
      .orderBy('queued_at')
      .limit(limit)
      .execute();
    return rows.map(toJob);
  }

  /** RUNNING jobs whose runner stopped renewing the lease. */
  async expiredLeases(now: number, limit: number): Promise<Job[]> {
    const rows = await this.db
      .selectFrom('jobs')
      .selectAll()
      .where('status', '=', LEASED_STATUS)
      .where('lease_expires_at', '<', now)
      .orderBy('lease_expires_at')
      .limit(limit)
      .execute();
    return rows.map(toJob);
  }

  /**
   * The workflow's latest `n` finished runs that count for its up/down state
   * (COMPLETED or FAILED, CANCELED passed over, in the order the health state
   * reads them: scheduled_at, id), latest first; served by
   * jobs_workflow_list_idx. The alert policy reads them (lifecycle.ts).
   */
  async lastOutcomes(workflowId: string, n: number): Promise<Job[]> {
    const rows = await this.db
      .selectFrom('jobs')
      .selectAll()
      .where('workflow_id', '=', workflowId)
      .where('status', 'in', ['COMPLETED', 'FAILED'])
      .orderBy('scheduled_at', 'desc')
      .orderBy('id', 'desc')
      .limit(n)
      .execute();
    return rows.map(toJob);
  }

  /** Of these workflows, the ones with a PENDING, QUEUED or RUNNING job. */
  async workflowsWithOpenJobs(workflowIds: readonly string[]): Promise<Set<string>> {
    if (workflowIds.length === 0) return new Set();
    // One statement text for any count (the leader asks this of every due batch), each workflow
    // a seek per open status on jobs_status_idx (status, workflow_id), never through its history:
    // SQLite's statistics would take jobs_workflow_list_idx, which reads every job the workflow has kept.
    const byStatus = this.dialect.indexedBy('jobs_status_idx');
    const { rows } = await sql<{ workflow_id: string }>`select distinct workflow_id from jobs ${byStatus}
      where ${this.dialect.idIn('workflow_id', workflowIds)} and status in ('PENDING', 'QUEUED', 'RUNNING')`.execute(this.db);
    return new Set(rows.map((r) => r.workflow_id));
  }

  /** RUNNING jobs of terminated workflows whose runners were not asked to stop since `askedBefore`. */
  async needingStop(askedBefore: number, limit: number): Promise<Job[]> {
    const rows = await this.db
      .selectFrom('jobs as j')
      .innerJoin('workflows as w', 'w.id', 'j.workflow_id')
      .selectAll('j')
      .where('j.status', '=', 'RUNNING')
      .where('w.terminated_at', 'is not', null)
      .where((eb) => eb.or([eb('j.stop_requested_at', 'is', null), eb('j.stop_requested_at', '<', askedBefore)]))
      .limit(limit)
      .execute();
    return rows.map(toJob);
  }

  async markStopRequested(id: string, now: number): Promise<void> {
    await this.db.updateTable('jobs').set({ stop_requested_at: now }).where('id', '=', id).execute();
  }

  /** The latest finished runs of each workflow, newest first, at most `perWorkflow` each (job-health.reads.ts). */
  recentRuns(workflowIds: readonly string[], perWorkflow: number = RECENT_RUNS): Promise<Map<string, RunSummary[]>> {
    return this.health.recentRuns(workflowIds, perWorkflow);
  }

  /** Per workflow, its runs scheduled since `since` that finished, by outcome (job-health.reads.ts). */
  outcomeCounts(workflowIds: readonly string[], since: number): Promise<Map<string, RunCounts>> {
    return this.health.outcomeCounts(workflowIds, since);
  }

  /** Per workflow, its jobs not yet finished (job-health.reads.ts). */
  openRuns(workflowIds: readonly string[]): Promise<Map<string, OpenRun[]>> {
    return this.health.openRuns(workflowIds);
  }

  /**
   * The workflow's AUTOMATIC jobs with slots in [from, to) (at most `limit`),
   * and the last one before `from`: what the slot listing tells fates from
   * (slot-fates.ts). jobs_automatic_slot_uq serves both.
   */
  async automaticAround(workflowId: string, from: number, to: number, limit: number): Promise<Job[]> {
    const automatic = () => this.db.selectFrom('jobs').selectAll().where('workflow_id', '=', workflowId).where('trigger', '=', 'AUTOMATIC');
    const before = await automatic().where('slot_at', '<', from).orderBy('slot_at', 'desc').limit(1).execute();
    const inRange = await automatic().where('slot_at', '>=', from).where('slot_at', '<', to).orderBy('slot_at').limit(limit).execute();
    return [...before, ...inRange].map(toJob);
  }
}
