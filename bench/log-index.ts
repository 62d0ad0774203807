// The measurement behind docs/adr/0003-log-search-index.md: log ingest rate
// with and without a trigram index, and per-job search latency with a plain
// scan of the job's rows versus the index, on SQLite and PostgreSQL.
//
//   node --import tsx bench/log-index.ts            # both engines, both variants (~10 min)
//   LOG_BENCH_ENGINES=sqlite LOG_BENCH_VARIANTS=scan LOG_BENCH_SCALE=0.1 node --import tsx bench/log-index.ts
//
// BENCH_DATABASE_URL names the PostgreSQL database (a fresh schema is used and dropped).
// Ingest goes through the same path as log-ingest (one transaction per batch
// of 2 000 lines: job lookup, insert ON CONFLICT DO NOTHING, count upsert). Searches are
// the api's query shape: one job attempt, case-insensitive substring,
// newest first, LIMIT 100.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import { newId } from '@orloj/common/core';
import { foldCase, openDatabase, Store, type DatabaseHandle, type LogLineInput } from '@orloj/common/store';
import { createBenchSchema, DEFAULT_BENCH_DATABASE_URL } from './lib/postgres.js';

const SCALE = Number(process.env.LOG_BENCH_SCALE ?? 1);
const ENGINES = (process.env.LOG_BENCH_ENGINES ?? 'sqlite,postgres').split(',');
const SMALL_JOBS = 10;
const SMALL_LINES = Math.round(100_000 * SCALE);
const BIG_LINES = Math.round(1_000_000 * SCALE);
const BATCH = 2_000;
const RARE = 'Needle-7F3A'; // once, in the middle of the big job
const ABSENT = 'zzqxj';
const COMMON = 'request'; // on every line
const UNICODE = 'GRÜSSE AUS'; // every 1 000th line says "Grüsse aus Köln"

type Variant = 'scan' | 'trigram';

const WORDS = ['INFO', 'WARN', 'DEBUG', 'ERROR'];
function line(i: number, bigJob: boolean, total: number): string {
  const level = WORDS[i % 4]!;
  const extra = bigJob && i === Math.floor(total / 2) ? ` ${RARE}` : i % 1000 === 0 ? ' Grüsse aus Köln' : '';
  return `2026-01-01T12:00:${String(i % 60).padStart(2, '0')}.${String(i % 1000).padStart(3, '0')}Z ${level} worker-${i % 7} processed request id=${(i * 2654435761) % 4294967296} in ${i % 97}ms path=/api/v1/items/${i % 10007}${extra}`;
}

interface Measured {
  engine: string;
  variant: Variant;
  lines: number;
  ingestLinesPerS: number;
  sizeMiB: number;
  search: Record<string, { bigMs: number; smallMs: number }>;
}

async function setup(engine: string): Promise<{ handle: DatabaseHandle; drop: () => Promise<void> }> {
  if (engine === 'sqlite') {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'orloj-logbench-'));
    const handle = openDatabase(`sqlite:${path.join(dir, 'orloj.db')}`);
    return { handle, drop: async () => fs.rmSync(dir, { recursive: true, force: true }) };
  }
  const schema = await createBenchSchema(process.env.BENCH_DATABASE_URL ?? DEFAULT_BENCH_DATABASE_URL);
  return { handle: openDatabase(schema.url), drop: schema.drop };
}

async function addIndex(handle: DatabaseHandle): Promise<void> {
  const { db } = handle;
  if (handle.dialect.name === 'postgres') {
    await sql`create extension if not exists pg_trgm schema public`.execute(db);
    await sql`create index job_logs_message_trgm on job_logs using gin (lower(message) public.gin_trgm_ops)`.execute(db);
  } else {
    await sql`create virtual table job_logs_fts using fts5(message, content='job_logs', content_rowid='rowid', tokenize='trigram case_sensitive 0')`.execute(db);
    await sql`create trigger job_logs_fts_ai after insert on job_logs begin insert into job_logs_fts(rowid, message) values (new.rowid, new.message); end`.execute(db);
  }
}

async function search(handle: DatabaseHandle, variant: Variant, jobId: string, needle: string): Promise<number> {
  const { db, dialect } = handle;
  const started = performance.now();
  if (variant === 'scan' || needle.length < 3) {
    await db
      .selectFrom('job_logs')
      .select(['sequence_num', 'stream', 'message', 'timestamp'])
      .where('job_id', '=', jobId)
      .where('attempt', '=', 1)
      .where(({ ref }) => dialect.containsFolded(ref('message'), needle))
      .orderBy('sequence_num', 'desc')
      .limit(100)
      .execute();
  } else if (dialect.name === 'postgres') {
    const pattern = `%${foldCase(needle).replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
    await sql`select sequence_num, stream, message, timestamp from job_logs
      where job_id = ${jobId} and attempt = 1 and lower(message) like ${pattern}
      order by sequence_num desc limit 100`.execute(db);
  } else {
    // FTS5 narrows by trigram; the exact fold is re-checked on the row.
    const phrase = `"${needle.replace(/"/g, '""')}"`;
    await sql`select l.sequence_num, l.stream, l.message, l.timestamp from job_logs_fts f join job_logs l on l.rowid = f.rowid
      where job_logs_fts match ${phrase} and l.job_id = ${jobId} and l.attempt = 1 and instr(orloj_fold(l.message), ${foldCase(needle)}) > 0
      order by l.sequence_num desc limit 100`.execute(db);
  }
  return performance.now() - started;
}

async function median(fn: () => Promise<number>, runs = 5): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < runs; i++) times.push(await fn());
  times.sort((a, b) => a - b);
  return Math.round(times[Math.floor(runs / 2)]! * 10) / 10;
}

async function run(engine: string, variant: Variant): Promise<Measured> {
  const { handle, drop } = await setup(engine);
  try {
    await handle.migrate();
    if (variant === 'trigram') await addIndex(handle);
    const store = Store.fromHandle(handle);
    const userId = newId();
    const workflowId = newId();
    await sql`insert into users (id, email, password_hash, notification_preference, created_at, updated_at) values (${userId}, ${`${userId}@x`}, 'x', 'ALL', 0, 0)`.execute(handle.db);
    await sql`insert into workflows (id, user_id, name, name_folded, payload, kind, build_status, interval_minutes, consecutive_job_failures_count, max_consecutive_job_failures_allowed, log_retention, generation, created_at, updated_at)
      values (${workflowId}, ${userId}, 'w', 'w', '{}', 'CONTAINER', 'COMPLETED', 1, 0, 3, 1, 0, 0, 0)`.execute(handle.db);
    const jobs: { id: string; lines: number; big: boolean }[] = [];
    for (let j = 0; j <= SMALL_JOBS; j++) {
      const id = newId();
      jobs.push({ id, lines: j === SMALL_JOBS ? BIG_LINES : SMALL_LINES, big: j === SMALL_JOBS });
      await sql`insert into jobs (id, workflow_id, user_id, generation, trigger, status, slot_at, scheduled_at, attempts, created_at, updated_at)
        values (${id}, ${workflowId}, ${userId}, 0, 'MANUAL', 'COMPLETED', ${j}, ${j}, 1, 0, 0)`.execute(handle.db);
    }
    let total = 0;
    const started = performance.now();
    // Interleaved like concurrent jobs: one batch of each job in turn.
    const next = jobs.map(() => 0);
    for (let active = true; active; ) {
      active = false;
      for (const [j, job] of jobs.entries()) {
        if (next[j]! >= job.lines) continue;
        active = true;
        const from = next[j]!;
        const lines: LogLineInput[] = [];
        for (let i = from; i < Math.min(job.lines, from + BATCH); i++) {
          lines.push({ sequence_num: i, stream: i % 5 === 0 ? 'stderr' : 'stdout', message: line(i, job.big, job.lines), timestamp: 1767268800000 + i });
        }
        next[j] = from + lines.length;
        await store.transaction(async (tx) => {
          const owner = await tx.logs.jobOwner(job.id);
          if (!owner) throw new Error('job missing');
          await tx.logs.insertBatch(job.id, 1, lines);
          await tx.logs.recordCount({ jobId: job.id, attempt: 1, workflowId: owner.workflowId, userId: owner.userId, lines: from + lines.length });
        });
        total += lines.length;
      }
    }
    const seconds = (performance.now() - started) / 1000;
    if (engine === 'postgres') await sql`analyze job_logs`.execute(handle.db);
    const size =
      engine === 'postgres'
        ? Number((await sql<{ s: string }>`select pg_total_relation_size('job_logs') as s`.execute(handle.db)).rows[0]!.s)
        : Number((await sql<{ s: number }>`select page_count * page_size as s from pragma_page_count(), pragma_page_size()`.execute(handle.db)).rows[0]!.s);
    const big = jobs[SMALL_JOBS]!;
    const small = jobs[0]!;
    const searchResults: Measured['search'] = {};
    for (const [name, needle] of [
      ['rare (1 match)', RARE],
      ['absent', ABSENT],
      ['common (every line)', COMMON],
      ['unicode, other case', UNICODE],
    ] as const) {
      await search(handle, variant, big.id, needle); // warm
      searchResults[name] = {
        bigMs: await median(() => search(handle, variant, big.id, needle)),
        smallMs: await median(() => search(handle, variant, small.id, needle)),
      };
    }
    return { engine, variant, lines: total, ingestLinesPerS: Math.round(total / seconds), sizeMiB: Math.round(size / 1048576), search: searchResults };
  } finally {
    await handle.close();
    await drop();
  }
}

async function main(): Promise<void> {
  console.log(`jobs: ${SMALL_JOBS} × ${SMALL_LINES} lines + 1 × ${BIG_LINES} lines; batches of ${BATCH}`);
  const rows: Measured[] = [];
  for (const engine of ENGINES) {
    for (const variant of (process.env.LOG_BENCH_VARIANTS ?? 'scan,trigram').split(',') as Variant[]) {
      const m = await run(engine, variant);
      rows.push(m);
      console.log(JSON.stringify(m));
    }
  }
  console.log('\n| engine | index | ingest lines/s | table+index MiB | search (big job / small job), ms median |');
  console.log('|---|---|---|---|---|');
  for (const m of rows) {
    const s = Object.entries(m.search)
      .map(([k, v]) => `${k}: ${v.bigMs} / ${v.smallMs}`)
      .join('; ');
    console.log(`| ${m.engine} | ${m.variant === 'scan' ? 'none (primary key scan)' : m.engine === 'postgres' ? 'pg_trgm GIN on lower(message)' : 'FTS5 trigram'} | ${m.ingestLinesPerS} | ${m.sizeMiB} | ${s} |`);
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
