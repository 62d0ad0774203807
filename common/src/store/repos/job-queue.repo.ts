/**
 * The runners' queue in the `jobs` table: what the scheduler's hand-out
 * (scheduler/src/hand-out.ts) reads to decide how much may go and which jobs,
 * and its writes as it hands them out: QUEUED as their next attempt, then
 * confirmed sent. The row mapping is job-rows.ts.
 */
import type { Kysely } from 'kysely';
import { openJobOf } from './open-jobs.js';
import { onAttempts, toJob } from './job-rows.js';
import type { Database } from '../schema.js';
import type { Job } from '../../domain/job.js';
import { ALLOWED_FROM } from '../../domain/job-state.js';

export class JobQueueRepo {
  constructor(private readonly db: Kysely<Database>) {}

  /** QUEUED jobs (handed out, not started), counted up to `upTo`. */
  async countQueued(upTo: number): Promise<number> {
    const row = await this.db
      .selectFrom((db) => db.selectFrom('jobs').select('id').where('status', '=', 'QUEUED').limit(upTo).as('queued'))
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }

  /** Of these jobs, those still QUEUED (handed out, not started). */
  async queuedAmong(ids: readonly string[]): Promise<Set<string>> {
    if (ids.length === 0) return new Set();
    const rows = await this.db.selectFrom('jobs').select('id').where('id', 'in', [...ids]).where('status', '=', 'QUEUED').execute();
    return new Set(rows.map((r) => r.id));
  }

  /**
   * The PENDING jobs that may be handed to runners now (of a workflow that is
   * built, active, and has no QUEUED or RUNNING job), one per workflow, taken
   * user by user: each user's first (manual runs before due slots, then the
   * oldest), then each user's second, and so on, so a user with thousands
   * waiting does not hide another user's one from the fair hand-out
   * (scheduler/src/fair-share.ts).
   */
  async dispatchable(now: number, limit: number): Promise<Job[]> {
    const ranked = this.db
      .selectFrom('jobs as j')
      .innerJoin('workflows as w', 'w.id', 'j.workflow_id')
      .selectAll('j')
      .select((eb) =>
        eb.fn
          .agg<number>('row_number')
          .over((ob) => ob.partitionBy('j.user_id').orderBy('j.trigger', 'desc').orderBy('j.scheduled_at').orderBy('j.id'))
          .as('user_rank'),
      )
      .where('j.status', '=', 'PENDING')
      .where('j.scheduled_at', '<=', now)
      .where('w.build_status', '=', 'COMPLETED')
      .where('w.terminated_at', 'is', null)
      .where(({ not, exists, selectFrom }) => not(exists(openJobOf(selectFrom, 'j.workflow_id', ['QUEUED', 'RUNNING']))));
    const rows = await this.db
      .selectFrom(ranked.as('d'))
      .selectAll()
      .orderBy('user_rank')
      .orderBy('scheduled_at')
      .orderBy('id')
      .limit(limit * 4)
      .execute();
    const seen = new Set<string>();
    const out: Job[] = [];
    for (const { user_rank: _rank, ...r } of rows) {
      if (seen.has(r.workflow_id)) continue;
      seen.add(r.workflow_id);
      out.push(toJob(r));
      if (out.length >= limit) break;
    }
    return out;
  }

  /** How many jobs each of these users has handed to the runners (QUEUED or RUNNING); absent: none. */
  async activeCountsByUser(userIds: readonly string[]): Promise<Map<string, number>> {
    if (userIds.length === 0) return new Map();
    const rows = await this.db
      .selectFrom('jobs')
      .select((eb) => ['user_id', eb.fn.countAll<number>().as('n')])
      .where('user_id', 'in', [...new Set(userIds)])
      .where('status', 'in', ['QUEUED', 'RUNNING'])
      .groupBy('user_id')
      .execute();
    return new Map(rows.map((r) => [r.user_id, Number(r.n)]));
  }

  /**
   * Hands out the next attempt of each of these jobs in one statement: to
   * QUEUED (from the state machine's allowed sources), attempts
   * + 1, where the job is still on the attempt given. Returns the jobs moved; a
   * job that moved on meanwhile is left out. All or nothing: when one of them
   * would be a second active job of its workflow the statement fails with the
   * unique violation and nothing moves (the caller then moves them one by one).
   */
  async queueNextAttempts(jobs: readonly { id: string; attempts: number }[], now: number): Promise<Job[]> {
    if (jobs.length === 0) return [];
    const rows = await this.db
      .updateTable('jobs')
      .set((eb) => ({ status: 'QUEUED' as const, updated_at: now, dispatched_at: null, attempts: eb('attempts', '+', 1), queued_at: now }))
      .where('status', 'in', ALLOWED_FROM.QUEUED)
      .where((eb) => onAttempts(eb, jobs))
      .returningAll()
      .execute();
    return rows.map(toJob);
  }

  /** Records that these attempts' messages were confirmed by the bus. */
  async markDispatched(attempts: readonly { id: string; attempts: number }[], now: number): Promise<void> {
    if (attempts.length === 0) return;
    await this.db
      .updateTable('jobs')
      .set({ dispatched_at: now })
      .where('status', '=', 'QUEUED')
      .where((eb) => onAttempts(eb, attempts))
      .execute();
  }
}
