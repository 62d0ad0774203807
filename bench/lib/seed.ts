// Runs inside the orloj server process (bench/servers/orloj.ts): it imports the
// @orloj/common sources, which the load generator process never does.
import { sql } from 'kysely';
import { newId } from '@orloj/common/core';
import type { LogLineInput, Store } from '@orloj/common/store';
import { RARE_TERM } from './log-terms.js';

const BATCH = 500; // 16 columns × 500 rows stays under both engines' bind-parameter limits

/**
 * Inserts `count` active workflows for the user, newest created last, one per
 * minute back from now; every fifth is a CONTAINER workflow. Bulk inserts in
 * one transaction, then refreshes the planner statistics as autovacuum would.
 */
export async function seedWorkflows(store: Store, userId: string, count: number): Promise<void> {
  const now = Date.now();
  await store.transaction(async (tx) => {
    for (let start = 0; start < count; start += BATCH) {
      const rows = [];
      for (let i = start; i < Math.min(count, start + BATCH); i++) {
        const container = i % 5 === 0;
        const name = container ? `Nightly export ${i}` : `Health check ${i} — service-${i % 97}.example.com`;
        const createdAt = now - (count - i) * 60_000;
        rows.push({
          id: newId(),
          user_id: userId,
          name,
          name_folded: name.toLowerCase(),
          payload: container
            ? JSON.stringify({ image: 'ghcr.io/example/exporter:1.4.2', cmd: ['export', '--since', '24h'], env: { STAGE: 'prod' }, timeout: '15m' })
            : JSON.stringify({ endpoint: `https://service-${i % 97}.example.com/health`, method: 'GET', expected_status_code: 200, timeout: '10s' }),
          kind: container ? ('CONTAINER' as const) : ('HEARTBEAT' as const),
          build_status: 'COMPLETED' as const,
          interval_minutes: container ? 1_440 : 5,
          consecutive_job_failures_count: i % 7 === 0 ? 1 : 0,
          max_consecutive_job_failures_allowed: 3,
          log_retention: container ? 1 : 0,
          generation: 0,
          created_at: createdAt,
          updated_at: createdAt,
          terminated_at: null,
          build_completed_at: createdAt + 30_000,
        });
      }
      await tx.db.insertInto('workflows').values(rows).execute();
    }
    await recountWorkflows(tx, userId);
  });
  if (store.dialect.name === 'postgres') await sql`analyze workflows`.execute(store.db);
}

/** Seeds insert workflow rows directly: the user's kept count (users.workflow_count) is set to match. */
export async function recountWorkflows(store: Store, userId: string): Promise<void> {
  await sql`update users set workflow_count = (select count(*) from workflows w where w.user_id = users.id) where id = ${userId}`.execute(store.db);
}

export async function engineVersion(store: Store): Promise<string> {
  if (store.dialect.name === 'postgres') {
    const { rows } = await sql<{ v: string }>`select current_setting('server_version') as v`.execute(store.db);
    return `PostgreSQL ${rows[0]?.v ?? '?'}`;
  }
  const { rows } = await sql<{ v: string }>`select sqlite_version() as v`.execute(store.db);
  return `SQLite ${rows[0]?.v ?? '?'}`;
}

const RARE_PER_JOB = 5;
const LOG_BATCH = 5_000;
const LEVELS = ['INFO', 'INFO', 'INFO', 'DEBUG', 'WARN', 'INFO', 'DEBUG', 'INFO', 'ERROR', 'INFO'];

/** Line i of a seeded job: an ordinary service log line; every 10th mentions a timeout, RARE_PER_JOB spread ones the rare needle. */
function logLine(i: number, lines: number): string {
  const level = LEVELS[i % LEVELS.length]!;
  const ts = `2026-01-01T12:${String(Math.floor(i / 60_000) % 60).padStart(2, '0')}:${String(Math.floor(i / 1000) % 60).padStart(2, '0')}.${String(i % 1000).padStart(3, '0')}Z`;
  const rare = i % Math.max(1, Math.floor(lines / RARE_PER_JOB)) === Math.floor(lines / (2 * RARE_PER_JOB)) ? ` trace=${RARE_TERM}` : '';
  const body =
    i % 10 === 7
      ? `upstream service-${i % 13}.internal did not answer: timeout after 5000ms, retrying (${i % 3}/3)`
      : `worker-${i % 7} processed request id=${(i * 2654435761) % 4294967296} method=GET path=/api/v1/items/${i % 10007} status=200 in ${i % 97}ms`;
  return `${ts} ${level} ${body}${rare}`;
}

/**
 * One CONTAINER workflow (logs retained) of the user with `jobs` COMPLETED
 * jobs holding `total` log lines between them (attempt 1, job_log_counts
 * set), written as log-ingest writes them (insertBatch, one transaction per
 * 5 000 lines). Progress goes to stdout every `progressEvery` lines. Returns
 * the ids; the last job is the one to search.
 */
export async function seedJobLogs(
  store: Store,
  userId: string,
  o: { total: number; jobs: number; progressEvery?: number },
): Promise<{ workflowId: string; jobIds: string[]; linesPerJob: number[] }> {
  const { db } = store;
  const workflowId = newId();
  const now = Date.now();
  await db
    .insertInto('workflows')
    .values({
      id: workflowId,
      user_id: userId,
      name: 'Log-heavy export',
      name_folded: 'log-heavy export',
      payload: JSON.stringify({ image: 'ghcr.io/example/exporter:1.4.2', cmd: ['export'], timeout: '1h' }),
      kind: 'CONTAINER',
      build_status: 'COMPLETED',
      interval_minutes: 10_080,
      consecutive_job_failures_count: 0,
      max_consecutive_job_failures_allowed: 3,
      log_retention: 1,
      generation: 0,
      created_at: now,
      updated_at: now,
      terminated_at: null,
      build_completed_at: now,
    })
    .execute();
  await recountWorkflows(store, userId);
  const jobIds: string[] = [];
  const linesPerJob: number[] = [];
  let written = 0;
  const every = o.progressEvery ?? 1_000_000;
  for (let j = 0; j < o.jobs; j++) {
    const id = newId();
    const lines = Math.floor(o.total / o.jobs) + (j < o.total % o.jobs ? 1 : 0);
    jobIds.push(id);
    linesPerJob.push(lines);
    const at = now - (o.jobs - j) * 3_600_000;
    await sql`insert into jobs (id, workflow_id, user_id, generation, trigger, status, slot_at, scheduled_at, started_at, completed_at, attempts, created_at, updated_at)
      values (${id}, ${workflowId}, ${userId}, 0, 'MANUAL', 'COMPLETED', ${at}, ${at}, ${at}, ${at + lines}, 1, ${at}, ${at + lines})`.execute(db);
    for (let from = 0; from < lines; from += LOG_BATCH) {
      const batch: LogLineInput[] = [];
      for (let i = from; i < Math.min(lines, from + LOG_BATCH); i++) {
        batch.push({ sequence_num: i, stream: i % 10 === 8 ? 'stderr' : 'stdout', message: logLine(i, lines), timestamp: at + i });
      }
      await store.transaction(async (tx) => {
        await tx.logs.insertBatch(id, 1, batch);
        await tx.logs.recordCount({ jobId: id, attempt: 1, workflowId, userId, lines: from + batch.length });
      });
      const before = written;
      written += batch.length;
      if (Math.floor(written / every) > Math.floor(before / every)) console.log(`[seed] ${written.toLocaleString('en')} / ${o.total.toLocaleString('en')} log lines`);
    }
  }
  if (store.dialect.name === 'postgres') await sql`analyze job_logs`.execute(db);
  else await sql`analyze`.execute(db);
  return { workflowId, jobIds, linesPerJob };
}

/**
 * The statement of a log search as the route runs it (`GET …/logs/search?q=`:
 * LogQueriesRepo.ownedPage, the current attempt found by a subquery that also
 * checks the owner; case-insensitive substring, newest first, one row more
 * than the page), through the same call; returns the time of each run (ms),
 * the rows of the last and the SQL.
 */
export async function timeSearchSql(
  store: Store,
  o: { userId: string; workflowId: string; jobId: string; needle: string; limit: number; runs: number },
): Promise<{ ms: number[]; rows: number; sql: string }> {
  const owner = { userId: o.userId, workflowId: o.workflowId };
  const filter = { jobId: o.jobId, match: store.logQueries.matcher(o.needle), limit: o.limit + 1 };
  const times: number[] = [];
  let rows = 0;
  for (let i = 0; i < o.runs; i++) {
    const started = performance.now();
    rows = (await store.logQueries.ownedPage(owner, filter))?.lines.length ?? 0;
    times.push(performance.now() - started);
  }
  return { ms: times, rows, sql: store.logQueries.linesRead(filter, { order: 'desc', bounded: false, attempt: 'owner' }).sql.replace(/\s+/g, ' ') };
}
