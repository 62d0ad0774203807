/**
 * The `workflows` table's SQL. Every read and write of a workflow row
 * (insert, the keyset-paged list and its filters, update, build and schedule
 * state, termination) and its row-to-domain mapping; the rules that decide
 * those writes live in the domain and lifecycle modules, not here.
 */
import { sql, type Kysely } from 'kysely';
import type { DialectHelpers } from '../dialect.js';
import type { Database, Selectable, WorkflowsTable } from '../schema.js';
import type { BuildError, BuildStatus, Workflow, WorkflowKind, WorkflowSummary } from '../../domain/workflow.js';
import type { KeysetPosition } from '../../core/cursor.js';
import type { AttentionCounts, AttentionState } from '../../domain/attention.js';
import { DEFAULT_RUN_POLICY, type CatchUpPolicy, type FirstRun, type OverlapPolicy } from '../../domain/run-policy.js';
import { afterPosition, attentionArgs, attentionCounts } from './workflow-attention.js';
import { slot, type ReadRunner } from '../compiled-read.js';
import { buildErrorOf, SUMMARY_COLUMNS, toSummary, WORKFLOW_COLUMNS, type SummaryRow } from './workflow-summary.js';

export interface WorkflowListFilter {
  userId: string;
  /** Case-insensitive literal substring of the name. */
  query?: string;
  kind?: WorkflowKind;
  buildStatus?: BuildStatus;
  /** Active ones (false), terminated ones (true), or both ('all'). */
  terminated: boolean | 'all';
  intervalMin?: number;
  intervalMax?: number;
  /** Only workflows in this attention state (domain/attention.ts). */
  attention?: AttentionState;
  /** `attention`: by attention state, then newest first (`after` then also carries `afterRank`). Default: newest first. */
  sort?: 'attention';
  after?: KeysetPosition & { rank?: number };
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
  /** The next due slot when not rebuilding (the interval may have changed). */
  nextDueAt: number | null;
  // issue 26: the alert policy, when the PUT names it (else kept)
  alertAfterFailures?: number;
  recoverAfterSuccesses?: number;
  /** The schedule (ADR 0015); each left as it is when absent. */
  cron?: string | null;
  timeZone?: string;
  jitterSeconds?: number;
  /** With jitterSeconds when it changes: the new offset (jitterOffsetMs). */
  jitterOffsetMs?: number;
  /** The run policy (run-policy.ts); each left as it is when absent. */
  overlapPolicy?: OverlapPolicy;
  catchUpPolicy?: CatchUpPolicy;
  firstRun?: FirstRun;
}

export interface FailureCount {
  count: number;
  max: number;
  terminated: boolean;
}

export function foldName(name: string): string {
  return name.toLowerCase();
}

export function toWorkflow(r: Selectable<WorkflowsTable>): Workflow {
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
    nextDueAt: r.next_due_at,
    buildToken: r.build_token,
    // bigint on PostgreSQL: the driver may hand it over as a string
    skippedSlots: Number(r.skipped_slots),
    lastSlotSkippedAt: r.last_slot_skipped_at,
    buildError: buildErrorOf(r.build_error_code, r.build_error_message),
    alertAfterFailures: r.alert_after_failures,
    recoverAfterSuccesses: r.recover_after_successes,
    alertDown: r.alert_down === 1,
    cron: r.cron,
    timeZone: r.timezone,
    jitterSeconds: r.jitter_seconds,
    jitterOffsetMs: r.jitter_offset_ms,
    pausedAt: r.paused_at === null ? null : Number(r.paused_at),
    overlapPolicy: r.overlap_policy,
    catchUpPolicy: r.catch_up_policy,
    firstRun: r.first_run,
  };
}


/** Pages read workflows with all their payloads off the event loop (compiled-read.ts, ReadOptions). */
const HEAVY = { heavy: true } as const;
/** Payloads up to this size come with a page's statement; larger ones are read one by one, only while the page has room. */
const INLINE_PAYLOAD_BYTES = 64 * 1024;

export class WorkflowsRepo {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly dialect: DialectHelpers,
    private readonly runner: ReadRunner,
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
        next_due_at: w.nextDueAt,
        build_token: w.buildToken,
        // Written only when not the columns' default (1), so an insert also serves a schema before migration 0018 (upgrade tests).
        ...(w.alertAfterFailures !== 1 ? { alert_after_failures: w.alertAfterFailures } : {}),
        ...(w.recoverAfterSuccesses !== 1 ? { recover_after_successes: w.recoverAfterSuccesses } : {}),
        // The schedule's columns (0017) only where they differ from their defaults.
        ...(w.cron !== null ? { cron: w.cron } : {}),
        ...(w.timeZone !== 'UTC' ? { timezone: w.timeZone } : {}),
        ...(w.jitterSeconds !== 0 ? { jitter_seconds: w.jitterSeconds } : {}),
        ...(w.jitterOffsetMs !== 0 ? { jitter_offset_ms: w.jitterOffsetMs } : {}),
        ...(w.pausedAt !== null ? { paused_at: w.pausedAt } : {}),
        // The run policy's columns (0021) likewise.
        ...(w.overlapPolicy !== DEFAULT_RUN_POLICY.overlapPolicy ? { overlap_policy: w.overlapPolicy } : {}),
        ...(w.catchUpPolicy !== DEFAULT_RUN_POLICY.catchUpPolicy ? { catch_up_policy: w.catchUpPolicy } : {}),
        ...(w.firstRun !== DEFAULT_RUN_POLICY.firstRun ? { first_run: w.firstRun } : {}),
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

  /**
   * The user's workflows, newest first, at most `limit`: a compiled read per
   * combination of filters.
   */
  async list(f: WorkflowListFilter): Promise<WorkflowSummary[]> {
    const rows = await this.runner.rows(this.listRead(f, false), this.listArgs(f), HEAVY);
    return (rows as SummaryRow[]).map(toSummary);
  }

  /**
   * A page of the user's workflows, newest first, as `GET /workflows` sends
   * it, the dashboard's busiest request: at most `limit`, and fewer when their
   * payloads would together pass `maxPayloadBytes` (UTF-8) — the first always
   * comes, so a page always moves on. `more`: rows follow the page.
   *
   * Payloads of up to 1 MiB (UTF-8: up to 3) each made a page of 100 a
   * 100-MiB read and a 200-MiB answer (issue 29). The statement returns each
   * payload's size and only the payloads of at most INLINE_PAYLOAD_BYTES
   * (SQLite and PostgreSQL take a value's size from its header, without
   * reading it); larger ones that fit the page are read one by one after.
   */
  async page(f: WorkflowListFilter, maxPayloadBytes: number): Promise<{ workflows: WorkflowSummary[]; more: boolean }> {
    const rows = (await this.runner.rows(this.listRead({ ...f, limit: f.limit + 1 }, true), { ...this.listArgs({ ...f, limit: f.limit + 1 }), inline: INLINE_PAYLOAD_BYTES }, HEAVY)) as [
      ...SummaryRow,
      payloadBytes: number,
    ][];
    const kept: [...SummaryRow, number][] = [];
    let bytes = 0;
    for (const row of rows.slice(0, f.limit)) {
      const size = Number(row[SUMMARY_COLUMNS.length]);
      if (kept.length > 0 && bytes + size > maxPayloadBytes) break;
      bytes += size;
      kept.push(row);
    }
    const workflows: WorkflowSummary[] = [];
    for (const row of kept) {
      if (row[2] === null) {
        // Read alone, past the page's first statement: gone meanwhile (deleted), it is left out.
        const payload = await this.payloadOf(f.userId, row[0]);
        if (payload === undefined) continue;
        row[2] = payload;
      }
      workflows.push(toSummary(row as unknown as SummaryRow));
    }
    return { workflows, more: rows.length > kept.length };
  }

  private async payloadOf(userId: string, id: string): Promise<string | undefined> {
    const read = this.runner.reads.get('workflows.payload', (db) =>
      db.selectFrom('workflows').select('payload').where('id', '=', slot<string>('id')).where('user_id', '=', slot<string>('userId')),
    );
    const [row] = (await this.runner.rows(read, { id, userId }, HEAVY)) as [payload: string][];
    return row?.[0];
  }

  /** The list statement for the filters `f` sets; with `sized`, payloads over `inline` bytes left out and every size added. */
  private listRead(f: WorkflowListFilter, sized: boolean) {
    const filters = { query: !!f.query, kind: !!f.kind, buildStatus: !!f.buildStatus, intervalMin: !!f.intervalMin, intervalMax: !!f.intervalMax, after: !!f.after };
    const byAttention = { attention: f.attention !== undefined, byAttention: f.sort === 'attention' };
    const key = `workflows.${sized ? 'page' : 'list'}:${f.terminated}:${Object.entries({ ...filters, ...byAttention }).map(([name, on]) => (on ? name : '')).join(',')}`;
    return this.runner.reads.get(key, (db) => {
      let q = db
        .selectFrom('workflows')
        .select(SUMMARY_COLUMNS.map((c) => (sized && c === 'payload' ? sql<string | null>`case when octet_length(payload) <= ${slot<number>('inline')} then payload end`.as('payload') : c)))
        .$if(sized, (qb) => qb.select(sql<number>`octet_length(payload)`.as('payload_bytes')))
        .where('user_id', '=', slot<string>('userId'));
      if (f.terminated !== 'all') q = q.where('terminated_at', f.terminated ? 'is not' : 'is', null);
      if (filters.query) q = q.where(({ ref }) => this.dialect.contains(ref('name_folded'), slot<string>('query')));
      if (filters.kind) q = q.where('kind', '=', slot<WorkflowKind>('kind'));
      if (filters.buildStatus) q = q.where('build_status', '=', slot<BuildStatus>('buildStatus'));
      if (filters.intervalMin) q = q.where('interval_minutes', '>=', slot<number>('intervalMin'));
      if (filters.intervalMax) q = q.where('interval_minutes', '<=', slot<number>('intervalMax'));
      if (byAttention.attention) q = q.where('attention', '=', slot<number>('attention'));
      if (filters.after) q = q.where((eb) => afterPosition(eb, byAttention.byAttention));
      return (byAttention.byAttention ? q.orderBy('attention', 'asc') : q).orderBy('created_at', 'desc').orderBy('id', 'desc').limit(slot<number>('limit'));
    });
  }

  private listArgs(f: WorkflowListFilter): Record<string, unknown> {
    return {
      userId: f.userId,
      query: f.query && foldName(f.query),
      kind: f.kind,
      buildStatus: f.buildStatus,
      intervalMin: f.intervalMin,
      intervalMax: f.intervalMax,
      afterKey: f.after?.k,
      afterId: f.after?.id,
      ...attentionArgs(f),
      limit: f.limit,
    };
  }

  /** Workflows per attention state, all of the user's (workflow-attention.ts). */
  readonly attentionCounts = (userId: string): Promise<AttentionCounts> => attentionCounts(this.runner, userId);

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
        ...(u.cron !== undefined ? { cron: u.cron } : {}),
        ...(u.timeZone !== undefined ? { timezone: u.timeZone } : {}),
        ...(u.jitterSeconds !== undefined ? { jitter_seconds: u.jitterSeconds } : {}),
        ...(u.jitterOffsetMs !== undefined ? { jitter_offset_ms: u.jitterOffsetMs } : {}),
        ...(u.overlapPolicy !== undefined ? { overlap_policy: u.overlapPolicy } : {}),
        ...(u.catchUpPolicy !== undefined ? { catch_up_policy: u.catchUpPolicy } : {}),
        ...(u.firstRun !== undefined ? { first_run: u.firstRun } : {}),
        consecutive_job_failures_count: 0,
        generation: eb('generation', '+', 1),
        terminated_at: null,
        updated_at: now,
        ...(u.rebuild
          ? { build_status: 'QUEUED' as const, build_completed_at: null, next_due_at: null, build_error_code: null, build_error_message: null }
          : { next_due_at: u.nextDueAt }),
        ...(u.alertAfterFailures !== undefined ? { alert_after_failures: u.alertAfterFailures } : {}),
        ...(u.recoverAfterSuccesses !== undefined ? { recover_after_successes: u.recoverAfterSuccesses } : {}),
      }))
      .where('id', '=', id)
      .where('user_id', '=', userId)
      .execute();
  }

  /**
   * Terminates an active workflow and returns it as terminated, or undefined
   * when it was already terminated (or does not exist): the conditional update
   * is the guard, so two concurrent terminations cannot both succeed.
   */
  async terminate(userId: string, id: string, now: number): Promise<Workflow | undefined> {
    const row = await this.db
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
      .returningAll()
      .executeTakeFirst();
    return row && toWorkflow(row);
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

  /** Active workflows whose build has not started (QUEUED). */
  async queuedBuilds(limit: number): Promise<Workflow[]> {
    const rows = await this.db
      .selectFrom('workflows')
      .selectAll()
      .where('build_status', '=', 'QUEUED')
      .where('terminated_at', 'is', null)
      .orderBy('updated_at')
      .limit(limit)
      .execute();
    return rows.map(toWorkflow);
  }

  /** Builds STARTED before `requestedBefore` whose result never came (lost message, dead runner). */
  async staleBuilds(requestedBefore: number, limit: number): Promise<Workflow[]> {
    const rows = await this.db
      .selectFrom('workflows')
      .selectAll()
      .where('build_status', '=', 'STARTED')
      .where('terminated_at', 'is', null)
      .where('build_requested_at', '<', requestedBefore)
      .limit(limit)
      .execute();
    return rows.map(toWorkflow);
  }

  /** QUEUED (or a stale STARTED) → STARTED with a new build token; returns the token, or undefined if it moved on. */
  async startBuild(id: string, expectedToken: number, now: number): Promise<number | undefined> {
    const row = await this.db
      .updateTable('workflows')
      .set({ build_status: 'STARTED', build_token: expectedToken + 1, build_requested_at: now, updated_at: now })
      .where('id', '=', id)
      .where('build_token', '=', expectedToken)
      .where('build_status', 'in', ['QUEUED', 'STARTED'])
      .where('terminated_at', 'is', null)
      .returning('build_token')
      .executeTakeFirst();
    return row?.build_token;
  }

  /**
   * Records a build result for the build with this token and returns the
   * workflow as updated, or undefined when the result is stale. A COMPLETED
   * build anchors the schedule: the first run is due one interval later.
   */
  async finishBuild(id: string, token: number, ok: boolean, now: number, error: BuildError | null = null): Promise<Workflow | undefined> {
    // Compiled once per outcome: every created workflow's build ends here.
    const update = this.runner.reads.get(`workflows.finishBuild:${ok}`, (db) => {
      const at = slot<number>('now');
      return db
        .updateTable('workflows')
        .set((eb) => ({
          build_status: ok ? ('COMPLETED' as const) : ('FAILED' as const),
          build_error_code: ok ? null : slot<string | null>('code'),
          build_error_message: ok ? null : slot<string | null>('message'),
          build_completed_at: ok ? at : null,
          // bigint arithmetic: PostgreSQL would type interval_minutes * 60000 + now as a 32-bit integer
          next_due_at: ok ? sql<number>`cast(${eb.ref('interval_minutes')} as bigint) * 60000 + ${at}` : null,
          updated_at: at,
        }))
        .where('id', '=', slot<string>('id'))
        .where('build_token', '=', slot<number>('token'))
        .where('build_status', 'in', ['QUEUED', 'STARTED'])
        .where('terminated_at', 'is', null)
        .returningAll();
    });
    const [row] = (await this.runner.execute(update, { id, token, now, ...(ok ? {} : { code: error?.code ?? null, message: error?.message ?? null }) })).rows;
    return row && toWorkflow(row as Selectable<WorkflowsTable>);
  }

  /** Built, active workflows whose next slot is due, earliest first. */
  async due(now: number, limit: number): Promise<Workflow[]> {
    // Compiled once, rows as arrays of the columns a Workflow holds: the leader reads this at every pass.
    const read = this.runner.reads.get('workflows.due', (db) =>
      db.selectFrom('workflows').select([...WORKFLOW_COLUMNS]).where('build_status', '=', 'COMPLETED').where('terminated_at', 'is', null).where('paused_at', 'is', null)
        .where('next_due_at', '<=', slot<number>('now')).orderBy('next_due_at').limit(slot<number>('limit')),
    );
    const rows = await this.runner.rows(read, { now, limit });
    return rows.map((row) => toWorkflow(Object.fromEntries(WORKFLOW_COLUMNS.map((column, i) => [column, row[i]])) as Selectable<WorkflowsTable>));
  }

  /** The earliest next slot of a built, active workflow. */
  async nextDueAt(): Promise<number | undefined> {
    const row = await this.scheduled()
      .select('next_due_at')
      .where('next_due_at', 'is not', null)
      .orderBy('next_due_at')
      .limit(1)
      .executeTakeFirst();
    return row?.next_due_at ?? undefined;
  }

  /** Built, active and not paused: the workflows with automatic slots. */
  private scheduled() {
    return this.db.selectFrom('workflows').where('build_status', '=', 'COMPLETED').where('terminated_at', 'is', null).where('paused_at', 'is', null);
  }

  /**
   * Pauses an active, unpaused workflow (ADR 0015); false when it is absent,
   * terminated or paused already (a repeated pause keeps the first one's time).
   */
  async pause(userId: string, id: string, now: number): Promise<boolean> {
    const result = await this.db
      .updateTable('workflows')
      .set({ paused_at: now, updated_at: now })
      .where('id', '=', id)
      .where('user_id', '=', userId)
      .where('terminated_at', 'is', null)
      .where('paused_at', 'is', null)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) === 1;
  }

  /** Resumes a paused workflow at `nextDueAt` (its next slot, no catch-up); a workflow not paused is left as it is. */
  async resume(id: string, nextDueAt: number | null, now: number): Promise<void> {
    await this.db
      .updateTable('workflows')
      .set({ paused_at: null, next_due_at: nextDueAt, updated_at: now })
      .where('id', '=', id)
      .where('paused_at', 'is not', null)
      .execute();
  }

  async setNextDue(id: string, nextDueAt: number): Promise<void> {
    await this.db.updateTable('workflows').set({ next_due_at: nextDueAt }).where('id', '=', id).execute();
  }

  /**
   * setNextDue for many workflows in one statement (a due batch): joined with
   * the batch as one bound value (dialect.rowsOf), so each row is found by its
   * key and the text is the same for every batch. (A CASE over the ids was
   * compared once per row and id: 9 ms for a batch of 500 on SQLite.)
   */
  async setNextDueMany(next: readonly { id: string; nextDueAt: number }[]): Promise<void> {
    if (next.length === 0) return;
    const batch = this.dialect.rowsOf('batch', { id: 'id', next_due_at: 'int' }, next.map((n) => [n.id, n.nextDueAt]));
    await sql`update workflows set next_due_at = batch.next_due_at from ${batch} where workflows.id = batch.id`.execute(this.db);
  }

  /** Adds skipped due slots to each workflow's count (Scheduler, docs/heartbeat.md). */
  async recordSkippedSlots(skips: readonly { id: string; skipped: number; at: number }[]): Promise<void> {
    for (const k of skips) {
      await this.db
        .updateTable('workflows')
        .set((eb) => ({ skipped_slots: eb('skipped_slots', '+', k.skipped), last_slot_skipped_at: k.at }))
        .where('id', '=', k.id)
        .execute();
    }
  }

  /** +1 consecutive failure, atomically; returns the new count and the limit. */
  async recordFailure(id: string, now: number): Promise<FailureCount | undefined> {
    const row = await this.db
      .updateTable('workflows')
      .set((eb) => ({ consecutive_job_failures_count: eb('consecutive_job_failures_count', '+', 1), updated_at: now }))
      .where('id', '=', id)
      .returning(['consecutive_job_failures_count', 'max_consecutive_job_failures_allowed', 'terminated_at'])
      .executeTakeFirst();
    return (
      row && {
        count: row.consecutive_job_failures_count,
        max: row.max_consecutive_job_failures_allowed,
        terminated: row.terminated_at !== null,
      }
    );
  }

  /** Down (or up) by the workflow's alert policy (issue 26; lifecycle.ts). */
  async setAlertDown(id: string, down: boolean): Promise<void> {
    await this.db.updateTable('workflows').set({ alert_down: down ? 1 : 0 }).where('id', '=', id).execute();
  }

  async resetFailures(id: string, now: number): Promise<void> {
    await this.db
      .updateTable('workflows')
      .set({ consecutive_job_failures_count: 0, updated_at: now })
      .where('id', '=', id)
      .where('consecutive_job_failures_count', '>', 0)
      .execute();
  }

  /**
   * Which of these workflows exist; in PostgreSQL their rows are then locked
   * against deletion (FOR KEY SHARE) until the transaction ends, so rows
   * referencing them can be written next. SQLite's single writer gives the same.
   */
  async holdExisting(ids: readonly string[]): Promise<Set<string>> {
    if (ids.length === 0) return new Set();
    const unique = [...new Set(ids)];
    const one = this.runner.reads.get('workflows.exists', (db) => db.selectFrom('workflows').select('id').where('id', '=', slot<string>('id')));
    const held = this.runner.eachRow(one, unique, (id) => ({ id }));
    if (held) return new Set(held.flat().map((r) => r.id as string));
    let q = this.db.selectFrom('workflows').select('id').where('id', 'in', unique).orderBy('id');
    if (this.dialect.rowLocks) q = q.forKeyShare();
    return new Set((await q.execute()).map((r) => r.id));
  }

  /**
   * With `lock`, the row stays locked until the transaction ends. Compiled
   * once per shape: every job's outcome reads its workflow (locked) this way.
   */
  async findById(id: string, options: { lock?: boolean } = {}): Promise<Workflow | undefined> {
    const [row] = (await this.runner.execute(this.findByIdStatement(options.lock), { id })).rows;
    return row && toWorkflow(row as Selectable<WorkflowsTable>);
  }

  private findByIdStatement(lockOption: boolean | undefined) {
    const lock = lockOption === true && this.dialect.rowLocks;
    return this.runner.reads.get(`workflows.findById:${lock}`, (db) => {
      const q = db.selectFrom('workflows').selectAll().where('id', '=', slot<string>('id'));
      return lock ? q.forNoKeyUpdate() : q;
    });
  }

  /**
   * Locks these rows until the transaction ends (in id order, so two lockers
   * cannot deadlock). The scheduler's locks are FOR NO KEY UPDATE, the lock an
   * UPDATE of the row takes: they exclude each other and every writer of the
   * row, but not the FOR KEY SHARE holds of log-ingest and the notifier,
   * which only keep the row from being deleted under them.
   */
  async lock(ids: readonly string[]): Promise<void> {
    if (ids.length === 0 || !this.dialect.rowLocks) return;
    await this.db.selectFrom('workflows').select('id').where('id', 'in', ids).orderBy('id').forNoKeyUpdate().execute();
  }

  /** With `lock`, the rows stay locked until the transaction ends (taken in id order, as lock()). */
  async findByIds(ids: readonly string[], options: { lock?: boolean } = {}): Promise<Workflow[]> {
    if (ids.length === 0) return [];
    // SQLite in a transaction (every batch of results): findById's statement for each (no row locks there).
    const held = this.runner.eachRow(this.findByIdStatement(options.lock), [...new Set(ids)].sort(), (id) => ({ id }));
    if (held) return held.flat().map((row) => toWorkflow(row as Selectable<WorkflowsTable>));
    let q = this.db.selectFrom('workflows').selectAll().where('id', 'in', [...new Set(ids)]);
    if (options.lock === true && this.dialect.rowLocks) q = q.orderBy('id').forNoKeyUpdate();
    return (await q.execute()).map(toWorkflow);
  }

  /** Each workflow's next automatic slot and its skipped slots (the scheduler's bookkeeping, which the list leaves out). */
  async scheduleFacts(ids: readonly string[]): Promise<Map<string, { nextDueAt: number | null; skipped: { count: number; lastAt: number | null } }>> {
    if (ids.length === 0) return new Map();
    const rows = await this.db.selectFrom('workflows').select(['id', 'next_due_at', 'skipped_slots', 'last_slot_skipped_at']).where('id', 'in', ids).execute();
    return new Map(
      rows.map((r) => [
        r.id,
        {
          nextDueAt: r.next_due_at === null ? null : Number(r.next_due_at),
          skipped: { count: Number(r.skipped_slots), lastAt: r.last_slot_skipped_at === null ? null : Number(r.last_slot_skipped_at) },
        },
      ]),
    );
  }
}

