/**
 * A job's lifecycle moves in the `jobs` table: the conditional UPDATE that
 * applies a unit of domain/job-state.ts (its WHERE clause is the state table,
 * ALLOWED_FROM, and the attempt guard), one job at a time or a batch of
 * runners' results at once (the scheduler's job events settle with
 * applyMany), compiled once per shape. No lifecycle decisions are made here.
 */
import type { Kysely, Selectable, Updateable } from 'kysely';
import { unnestUpdate } from './unnest-update.js';
import { PG_TYPES, toJob, transitionValues } from './job-rows.js';
import type { DialectHelpers } from '../dialect.js';
import { slot, type ReadRunner } from '../compiled-read.js';
import type { Database, JobsTable } from '../schema.js';
import type { Job, JobStatus } from '../../domain/job.js';
import { ALLOWED_FROM, type JobTransition, type TransitionFields, type TransitionGuard } from '../../domain/job-state.js';

/** One job's lifecycle move, for applyMany. */
export interface JobMove {
  id: string;
  t: JobTransition;
}

export class JobMovesRepo {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly runner: ReadRunner,
    private readonly dialect: DialectHelpers,
  ) {}

  /**
   * Moves a job to `to` if the state machine allows it from the job's current
   * status (and the guard holds). Returns the job as updated, or undefined when
   * nothing changed: an illegal or repeated transition is a no-op.
   */
  async transition(id: string, to: JobStatus, now: number, fields: TransitionFields = {}, guard: TransitionGuard = {}): Promise<Job | undefined> {
    const row = (await this.runTransition(id, to, now, fields, guard))?.rows[0];
    return row && toJob(row as Selectable<JobsTable>);
  }

  /** Applies a lifecycle unit's move (domain/job-state.ts): transition() with its target, fields and guard. */
  async apply(id: string, t: JobTransition, now: number): Promise<Job | undefined> {
    return this.transition(id, t.to, now, t.fields, t.guard);
  }

  /**
   * Applies many lifecycle moves, each exactly as apply() does (the same
   * conditional UPDATE: allowed sources, attempt guard), and returns the jobs
   * that moved, in no particular order. A job may appear once. On PostgreSQL
   * the moves of one shape (target status, columns set, guard) go in one
   * statement (unnest-update.ts), a round trip for the lot instead of one per
   * job; on SQLite, where a statement is a function call, one by one.
   */
  async applyMany(moves: readonly JobMove[], now: number): Promise<Job[]> {
    if (moves.length === 0) return [];
    if (new Set(moves.map((m) => m.id)).size !== moves.length) throw new Error('applyMany: a job may move once per call');
    if (this.dialect.name !== 'postgres') {
      const moved: Job[] = [];
      for (const m of moves) {
        const job = await this.apply(m.id, m.t, now);
        if (job) moved.push(job);
      }
      return moved;
    }
    const shapes = new Map<string, { to: JobStatus; guarded: boolean; columns: string[]; rows: { id: string; attempts: number | undefined; values: Record<string, unknown> }[] }>();
    for (const { id, t } of moves) {
      if (ALLOWED_FROM[t.to].length === 0) continue; // nothing moves into PENDING
      const values = transitionValues(t.to, now, t.fields) as Record<string, unknown>;
      const columns = Object.keys(values).filter((c) => c !== 'status' && c !== 'updated_at');
      const guarded = t.guard.attempts !== undefined;
      const key = `${t.to}:${columns.join(',')}:${guarded}`;
      let shape = shapes.get(key);
      if (!shape) shapes.set(key, (shape = { to: t.to, guarded, columns, rows: [] }));
      shape.rows.push({ id, attempts: t.guard.attempts, values });
    }
    const moved: Job[] = [];
    for (const { to, guarded, columns, rows } of shapes.values()) {
      const statement = unnestUpdate({
        table: 'jobs',
        constant: { status: to, updated_at: now },
        perRow: Object.fromEntries(columns.map((c) => [c, [PG_TYPES[c as keyof JobsTable], rows.map((r) => r.values[c] ?? null)]])),
        ids: ['uuid', rows.map((r) => r.id)],
        ...(guarded ? { match: { attempts: ['integer', 'attempts', rows.map((r) => r.attempts)] } } : {}),
        where: `"jobs"."status" in (${ALLOWED_FROM[to].map((from) => `'${from}'`).join(', ')})`,
        returning: '"jobs".*',
      });
      const result = await this.db.executeQuery<Selectable<JobsTable>>(statement);
      for (const row of result.rows) moved.push(toJob(row));
    }
    return moved;
  }

  /**
   * The conditional UPDATE of a transition, its WHERE clause from the state
   * machine (ALLOWED_FROM). Compiled once per shape (target status, columns
   * set, guard) and run with this call's values: two of them
   * run for every job, and building them with Kysely each time cost more than
   * running them.
   */
  private async runTransition(id: string, to: JobStatus, now: number, fields: TransitionFields, guard: TransitionGuard) {
    if (ALLOWED_FROM[to].length === 0) return undefined; // nothing moves into PENDING
    const values = transitionValues(to, now, fields);
    const columns = Object.keys(values) as (keyof typeof values)[];
    const guarded = guard.attempts !== undefined;
    const statement = this.runner.reads.get(`jobs.transition:${to}:${columns.join(',')}:${guarded}`, (db) => {
      let q = db
        .updateTable('jobs')
        .set(Object.fromEntries(columns.map((c) => [c, slot(`set:${c}`)])) as Updateable<JobsTable>)
        .where('id', '=', slot<string>('id'))
        .where('status', 'in', ALLOWED_FROM[to]);
      if (guarded) q = q.where('attempts', '=', slot<number>('guard:attempts'));
      return q.returningAll();
    });
    const args: Record<string, unknown> = { id, 'guard:attempts': guard.attempts };
    for (const c of columns) args[`set:${c}`] = values[c];
    return this.runner.execute(statement, args);
  }

  /** The workflow of each of these jobs that exists: job id → workflow id. */
  async workflowsOf(jobIds: readonly string[]): Promise<Map<string, string>> {
    if (jobIds.length === 0) return new Map();
    const ids = [...new Set(jobIds)];
    const one = this.runner.reads.get('jobs.workflowOf', (db) => db.selectFrom('jobs').select(['id', 'workflow_id']).where('id', '=', slot<string>('id')));
    const rows = (this.runner.eachRow(one, ids, (id) => ({ id }))?.flat() as { id: string; workflow_id: string }[] | undefined) ??
      (await this.db.selectFrom('jobs').select(['id', 'workflow_id']).where('id', 'in', ids).execute());
    return new Map(rows.map((r) => [r.id, r.workflow_id]));
  }
}
