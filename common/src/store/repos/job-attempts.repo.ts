import type { Kysely } from 'kysely';
import type { AttemptEndCode, EndedAttempt } from '../../domain/job-attempts.js';
import type { Database } from '../schema.js';

/**
 * The attempts a job gave up (migration 0022): written once per retry, in the
 * transaction that hands the job out again, read by the job page.
 */
export class JobAttemptsRepo {
  constructor(private readonly db: Kysely<Database>) {}

  /** Records an attempt given up; a second record of the same attempt (a replayed retry) changes nothing. */
  async recordEnded(a: EndedAttempt): Promise<void> {
    await this.db
      .insertInto('job_attempts')
      .values({
        job_id: a.jobId,
        attempt: a.attempt,
        runner_id: a.runnerId,
        started_at: a.startedAt,
        ended_at: a.endedAt,
        end_code: a.end.code,
        end_message: a.end.message,
      })
      .onConflict((oc) => oc.columns(['job_id', 'attempt']).doNothing())
      .execute();
  }

  /** The job's recorded attempts, oldest first. */
  async ofJob(jobId: string): Promise<EndedAttempt[]> {
    const rows = await this.db.selectFrom('job_attempts').selectAll().where('job_id', '=', jobId).orderBy('attempt').execute();
    return rows.map((r) => ({
      jobId: r.job_id,
      attempt: r.attempt,
      runnerId: r.runner_id,
      startedAt: r.started_at === null ? null : Number(r.started_at),
      endedAt: Number(r.ended_at),
      end: { code: r.end_code as AttemptEndCode, message: r.end_message },
    }));
  }
}
