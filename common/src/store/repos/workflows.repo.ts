import type { Kysely } from 'kysely';
import type { DialectHelpers } from '../dialect.js';
import type { Database, WorkflowsTable } from '../schema.js';
import type { BuildStatus, Workflow, WorkflowKind } from '../../domain/workflow.js';
import type { KeysetPosition } from '../../cursor.js';

export interface WorkflowListFilter {
  userId: string;
  /** Case-insensitive literal substring of the name. */
  query?: string;
  kind?: WorkflowKind;
  buildStatus?: BuildStatus;
  terminated: boolean;
  intervalMin?: number;
  intervalMax?: number;
  after?: KeysetPosition;
  limit: number;
}

export interface WorkflowUpdate {
  name: string;
  payload: string;
  intervalMinutes: number;
  maxConsecutiveJobFailuresAllowed: number;
  logRetention: boolean;
  /** Whether the build must run again (image changed, or the workflow was terminated). */
  rebuild: boolean;
}

export function foldName(name: string): string {
  return name.toLowerCase();
}

function toWorkflow(r: WorkflowsTable): Workflow {
  return {
    id: r.id,
    userId: r.user_id,
    name: r.name,
    payload: r.payload,
    kind: r.kind,
    buildStatus: r.build_status,
    intervalMinutes: r.interval_minutes,
    consecutiveJobFailuresCount: r.consecutive_job_failures_count,
    maxConsecutiveJobFailuresAllowed: r.max_consecutive_job_failures_allowed,
    logRetention: r.log_retention === 1,
    generation: r.generation,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
    terminatedAt: r.terminated_at,
    buildCompletedAt: r.build_completed_at,
  };
}

export class WorkflowsRepo {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly dialect: DialectHelpers,
  ) {}

  async insert(w: Workflow): Promise<void> {
    await this.db
      .insertInto('workflows')
      .values({
        id: w.id,
        user_id: w.userId,
        name: w.name,
        name_folded: foldName(w.name),
        payload: w.payload,
        kind: w.kind,
        build_status: w.buildStatus,
        interval_minutes: w.intervalMinutes,
        consecutive_job_failures_count: w.consecutiveJobFailuresCount,
        max_consecutive_job_failures_allowed: w.maxConsecutiveJobFailuresAllowed,
        log_retention: w.logRetention ? 1 : 0,
        generation: w.generation,
        created_at: w.createdAt,
        updated_at: w.updatedAt,
        terminated_at: w.terminatedAt,
        build_completed_at: w.buildCompletedAt,
      })
      .execute();
  }

  /** The user's workflow; with `lock`, the row stays locked until the transaction ends. */
  async findForUser(userId: string, id: string, options: { lock?: boolean } = {}): Promise<Workflow | undefined> {
    let q = this.db.selectFrom('workflows').selectAll().where('id', '=', id).where('user_id', '=', userId);
    if (options.lock && this.dialect.rowLocks) q = q.forUpdate();
    const row = await q.executeTakeFirst();
    return row && toWorkflow(row);
  }

  async list(f: WorkflowListFilter): Promise<Workflow[]> {
    let q = this.db
      .selectFrom('workflows')
      .selectAll()
      .where('user_id', '=', f.userId)
      .where('terminated_at', f.terminated ? 'is not' : 'is', null);
    if (f.query) q = q.where(({ ref }) => this.dialect.contains(ref('name_folded'), foldName(f.query!)));
    if (f.kind) q = q.where('kind', '=', f.kind);
    if (f.buildStatus) q = q.where('build_status', '=', f.buildStatus);
    if (f.intervalMin) q = q.where('interval_minutes', '>=', f.intervalMin);
    if (f.intervalMax) q = q.where('interval_minutes', '<=', f.intervalMax);
    if (f.after) {
      const { k, id } = f.after;
      q = q.where((eb) => eb.or([eb('created_at', '<', k), eb.and([eb('created_at', '=', k), eb('id', '<', id)])]));
    }
    const rows = await q.orderBy('created_at', 'desc').orderBy('id', 'desc').limit(f.limit).execute();
    return rows.map(toWorkflow);
  }

  /** Applies a PUT: bumps the generation, resets failures, reactivates, optionally rebuilds. */
  async update(userId: string, id: string, u: WorkflowUpdate, now: number): Promise<void> {
    await this.db
      .updateTable('workflows')
      .set((eb) => ({
        name: u.name,
        name_folded: foldName(u.name),
        payload: u.payload,
        interval_minutes: u.intervalMinutes,
        max_consecutive_job_failures_allowed: u.maxConsecutiveJobFailuresAllowed,
        log_retention: u.logRetention ? 1 : 0,
        consecutive_job_failures_count: 0,
        generation: eb('generation', '+', 1),
        terminated_at: null,
        updated_at: now,
        ...(u.rebuild ? { build_status: 'QUEUED' as const, build_completed_at: null } : {}),
      }))
      .where('id', '=', id)
      .where('user_id', '=', userId)
      .execute();
  }

  /**
   * Terminates an active workflow. Returns false when it was already
   * terminated (or does not exist): the conditional update is the guard, so two
   * concurrent terminations cannot both succeed.
   */
  async terminate(userId: string, id: string, now: number): Promise<boolean> {
    const result = await this.db
      .updateTable('workflows')
      .set((eb) => ({
        terminated_at: now,
        updated_at: now,
        build_status: eb
          .case()
          .when('build_status', 'in', ['QUEUED', 'STARTED'])
          .then('CANCELED' as const)
          .else(eb.ref('build_status'))
          .end(),
      }))
      .where('id', '=', id)
      .where('user_id', '=', userId)
      .where('terminated_at', 'is', null)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) === 1;
  }

  /** Deletes a terminated workflow. Returns false when it is active or absent. */
  async deleteTerminated(userId: string, id: string): Promise<boolean> {
    const result = await this.db
      .deleteFrom('workflows')
      .where('id', '=', id)
      .where('user_id', '=', userId)
      .where('terminated_at', 'is not', null)
      .executeTakeFirst();
    return Number(result.numDeletedRows) === 1;
  }

  async countForUser(userId: string): Promise<number> {
    const row = await this.db
      .selectFrom('workflows')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('user_id', '=', userId)
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }
}
