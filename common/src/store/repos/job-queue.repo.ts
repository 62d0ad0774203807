/**
 * The runners' queue in the `jobs` table: what the scheduler's hand-out
 * (scheduler/src/hand-out.ts) reads to decide how much may go and which jobs,
 * and its writes as it hands them out: QUEUED as their next attempt, then
 * confirmed sent. The row mapping is job-rows.ts.
 */
import { sql, type Kysely, type RawBuilder, type Selectable } from 'kysely';
import { onAttempts, toJob } from './job-rows.js';
import type { Database, JobsTable } from '../schema.js';
import type { Job } from '../../domain/job.js';
import { ALLOWED_FROM } from '../../domain/job-state.js';
import type { DialectHelpers } from '../dialect.js';
import { slot, type ReadRunner } from '../compiled-read.js';

/** A user's reads of PENDING jobs stop at this many times what the user may give (duplicates of a workflow among them). */
const READ_FACTOR = 4;
/** The lowest uuid: below every user id on PostgreSQL. */
const NIL_UUID = '00000000-0000-0000-0000-000000000000';

/** A user's PENDING jobs in the order the hand-out takes them: manual runs first, then the oldest, then by id (as jobs_pending_user_idx and its ORDER BY). */
function inHandOutOrder(a: Selectable<JobsTable>, b: Selectable<JobsTable>): number {
  return Number(b.trigger === 'MANUAL') - Number(a.trigger === 'MANUAL') || a.scheduled_at - b.scheduled_at || byId(a, b);
}

/** Of jobs in the hand-out's order, each workflow's first. */
function onePerWorkflow(rows: readonly Selectable<JobsTable>[]): Selectable<JobsTable>[] {
  const seen = new Set<string>();
  return rows.filter((r) => !seen.has(r.workflow_id) && seen.add(r.workflow_id));
}

/** Ids in the databases' order: uuids in lowercase text compare as PostgreSQL's uuid and SQLite's text do. */
function byId(a: { id: string }, b: { id: string }): number {
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}

export class JobQueueRepo {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly dialect: DialectHelpers,
    private readonly runner: ReadRunner,
  ) {}

  /**
   * QUEUED jobs (handed out, not started), counted up to `upTo`. Asked at
   * every pass of the hand-out: compiled once (built by Kysely at each pass
   * it was 3 % of the embedded process's busy time at 200 checks a second).
   */
  async countQueued(upTo: number): Promise<number> {
    const read = this.runner.reads.get('jobQueue.countQueued', (db) =>
      db
        .selectFrom((q) => q.selectFrom('jobs').select('id').where('status', '=', 'QUEUED').limit(slot<number>('upTo')).as('queued'))
        .select((eb) => eb.fn.countAll<number>().as('n')),
    );
    const [row] = (await this.runner.rows(read, { upTo })) as [n: number | string | bigint][];
    return Number(row?.[0] ?? 0);
  }

  /** Of these jobs, those still QUEUED (handed out, not started). */
  async queuedAmong(ids: readonly string[]): Promise<Set<string>> {
    if (ids.length === 0) return new Set();
    // One statement text for any count: the hand-out asks this at every pass, of all it has waiting.
    // Each id a seek in jobs_queued_idx, which holds the QUEUED jobs' ids alone: no job row is read.
    const byQueued = this.dialect.indexedBy('jobs_queued_idx');
    const { rows } = await sql<{ id: string }>`select id from jobs ${byQueued}
      where ${this.dialect.idIn('id', ids)} and status = 'QUEUED'`.execute(this.db);
    return new Set(rows.map((r) => r.id));
  }

  /**
   * The PENDING jobs that may be handed to runners now (of a workflow that is
   * built, active, and has no QUEUED or RUNNING job), one per workflow, taken
   * user by user: each user's first (manual runs before due slots, then the
   * oldest, then by id), then each user's second, and so on, up to `limit`,
   * so a user with thousands waiting does not hide another user's one from
   * the fair hand-out (scheduler/src/fair-share.ts). At most `perUser + 1` of
   * a user's: the fair hand-out gives no user more than its room, and the one
   * beyond tells it that more wait. `more`: some that may go now are left out.
   *
   * A pass reads the jobs it returns and the users with PENDING work, never
   * the PENDING backlog (docs/adr/0014, addendum): the users come from a skip
   * along jobs_pending_user_idx (pendingUsers), each user's first k jobs from
   * a seek on it (firstPendingOf), k an even part of `limit` at first, larger
   * only while some users have too few for the others to fill `limit`. A
   * workflow's second job waiting (a run-now asked for while one waits) takes
   * a read of its own; past READ_FACTOR times what a user may give, the rest
   * of that user's wait for the next pass.
   */
  async dispatchable(now: number, limit: number, perUser = limit): Promise<{ jobs: Job[]; more: boolean }> {
    const users = await this.pendingUsers();
    if (users.length === 0 || limit <= 0) return { jobs: [], more: false };
    const want = Math.min(perUser, limit) + 1;
    // Each user's first jobs that may go, one per workflow, in the hand-out's order: all of them, or the first `want`, or (`open`) a first part.
    const firsts = new Map<string, Selectable<JobsTable>[]>();
    // Users whose last read came full: more of theirs may wait.
    let full: readonly string[] = users;
    let open: readonly string[] = users;
    let k = Math.min(want, Math.ceil(limit / users.length) + 1);
    for (;;) {
      const read = new Map(open.map((user) => [user, [] as Selectable<JobsTable>[]]));
      for (const row of await this.firstPendingOf(open, now, k)) read.get(row.user_id)?.push(row);
      for (const [user, rows] of read) firsts.set(user, onePerWorkflow(rows.sort(inHandOutOrder)));
      full = full.filter((user) => !read.has(user) || read.get(user)!.length === k);
      open = open.filter((user) => read.get(user)!.length === k && firsts.get(user)!.length < want);
      if (open.length === 0 || k >= READ_FACTOR * want) break;
      // Every user's jobs up to the shortest open one's count are known: when they make `limit`, the first `limit` are among them.
      const known = open.reduce((least, user) => Math.min(least, firsts.get(user)!.length), want);
      let n = 0;
      for (const list of firsts.values()) n += Math.min(list.length, known);
      if (n >= limit) break;
      k = Math.min(READ_FACTOR * want, Math.max(2 * k, k + Math.ceil((limit - n) / open.length)));
    }
    const ranked: { rank: number; row: Selectable<JobsTable> }[] = [];
    for (const list of firsts.values()) list.slice(0, want).forEach((row, i) => ranked.push({ rank: i + 1, row }));
    ranked.sort((a, b) => a.rank - b.rank || a.row.scheduled_at - b.row.scheduled_at || byId(a.row, b.row));
    return { jobs: ranked.slice(0, limit).map((r) => toJob(r.row)), more: ranked.length > limit || full.length > 0 };
  }

  /**
   * The users with PENDING jobs, each found by one seek along
   * jobs_pending_user_idx from the user before (a loose index scan), however
   * many jobs each has waiting.
   */
  async pendingUsers(): Promise<string[]> {
    // Below every id (a uuid is never ''): the first seek starts from a bound, as every later one does.
    const lowest = this.dialect.name === 'postgres' ? NIL_UUID : '';
    const byUser = this.pendingByUser();
    const { rows } = await sql<{ user_id: string }>`with recursive pending_users(user_id) as (
        select (select user_id from jobs ${byUser} where status = 'PENDING' and user_id >= ${lowest} order by user_id limit 1)
        union all
        select (select p.user_id from jobs p ${byUser} where p.status = 'PENDING' and p.user_id > u.user_id order by p.user_id limit 1)
          from pending_users u where u.user_id is not null)
      select user_id from pending_users where user_id is not null`.execute(this.db);
    return rows.map((r) => r.user_id);
  }

  /**
   * Each of these users' first `k` PENDING jobs that may be handed out now,
   * in the hand-out's order (unordered across users), each a seek on
   * jobs_pending_user_idx: LATERAL on PostgreSQL, a correlated IN … LIMIT on
   * SQLite.
   */
  private async firstPendingOf(users: readonly string[], now: number, k: number): Promise<Selectable<JobsTable>[]> {
    const byUser = this.pendingByUser();
    const mayGo = sql`c.status = 'PENDING' and c.scheduled_at <= ${now}
      and w.build_status = 'COMPLETED' and w.terminated_at is null
      and not exists (select 1 from jobs busy where busy.workflow_id = c.workflow_id and busy.status in ('QUEUED', 'RUNNING'))
      order by c.trigger desc, c.scheduled_at, c.id limit ${k}`;
    const query =
      this.dialect.name === 'postgres'
        ? sql<Selectable<JobsTable>>`select f.* from unnest(${[...users]}::uuid[]) as u(user_id)
            cross join lateral (select c.* from jobs c ${byUser} join workflows w on w.id = c.workflow_id where c.user_id = u.user_id and ${mayGo}) f`
        : sql<Selectable<JobsTable>>`select f.* from json_each(${JSON.stringify(users)}) u
            join jobs f on f.id in (select c.id from jobs c ${byUser} join workflows w on w.id = c.workflow_id where c.user_id = u.value and ${mayGo})`;
    return (await query.execute(this.db)).rows;
  }

  /**
   * SQLite: the PENDING jobs' reads above walk jobs_pending_user_idx whatever
   * the planner statistics say. Without statistics (a new installation, a
   * table grown since the last analysis) SQLite reads "status = 'PENDING'" by
   * jobs_status_idx and sorts: every PENDING job, the backlog this index is
   * for. PostgreSQL's autovacuum keeps its statistics, and its plans (checked
   * in common/test/job-queue.test.ts) take the index.
   */
  private pendingByUser(): RawBuilder<unknown> {
    return this.dialect.indexedBy('jobs_pending_user_idx');
  }

  /** A column compared without its index: SQLite takes no index for `+column`; PostgreSQL plans by its statistics. */
  private notIndexed(column: string): RawBuilder<unknown> {
    return this.dialect.name === 'sqlite' ? sql`+${sql.ref(column)}` : sql.ref(column);
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
    // One statement text for any batch, each job found by its key (an `in` list per attempt was a new text at every length).
    const sent = this.dialect.rowsOf('sent', { id: 'id', attempts: 'int' }, attempts.map((a) => [a.id, a.attempts]));
    await sql`update jobs set dispatched_at = ${now} from ${sent}
      where jobs.id = sent.id and jobs.attempts = sent.attempts and ${this.notIndexed('jobs.status')} = 'QUEUED'`.execute(this.db);
  }
}
