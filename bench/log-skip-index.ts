// The measurement behind docs/adr/0007-log-search-skip-index.md: the store's
// log write with and without the skip index's block hook, and search in a
// 1,000,000-line job with and without the block filters, on SQLite and
// PostgreSQL, baseline and index interleaved in the same run.
//
//   node --import tsx bench/log-skip-index.ts
//   SKIP_BENCH_ENGINES=sqlite SKIP_BENCH_LINES=200000 SKIP_BENCH_ROUNDS=3 node --import tsx bench/log-skip-index.ts
//
// BENCH_DATABASE_URL names the PostgreSQL database (a fresh schema, dropped after).
// Ingest: one transaction per batch of 2 000 lines as log-ingest writes them
// (job lookup, insert, count upsert); rounds alternate "with the hook" and
// "without" (the same insert minus indexLogBlocks) on jobs of 100 000 lines.
// Search: the api's statement (LogQueriesRepo.ownedPage, LIMIT 100, newest
// first) for each term, index and plain scan alternating run by run.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import { newId } from '@orloj/common/core';
import { openDatabase, Store, type DatabaseHandle, type LogLineInput } from '@orloj/common/store';

type LogMatcher = ReturnType<Store['logQueries']['matcher']>;
import { createBenchSchema, DEFAULT_BENCH_DATABASE_URL } from './lib/postgres.js';

const ENGINES = (process.env.SKIP_BENCH_ENGINES ?? 'sqlite,postgres').split(',');
const LINES = Number(process.env.SKIP_BENCH_LINES ?? 1_000_000);
const INGEST_LINES = Number(process.env.SKIP_BENCH_INGEST_LINES ?? 100_000);
const ROUNDS = Number(process.env.SKIP_BENCH_ROUNDS ?? 3);
const RUNS = Number(process.env.SKIP_BENCH_SEARCHES ?? 40);
const BATCH = 2_000;
const RARE = 'Needle-7F3A'; // on 5 lines of the job
const TERMS: [label: string, needle: string][] = [
  ['rare (5 lines)', RARE],
  ['absent', 'zzqxj-absent'],
  ['common (every 10th line)', 'timeout'],
  ['unicode, other case (every 1 000th line)', 'GRÜSSE AUS'],
  ['short (2 chars, every line)', 'in'],
];

const LEVELS = ['INFO', 'INFO', 'INFO', 'DEBUG', 'WARN', 'INFO', 'DEBUG', 'INFO', 'ERROR', 'INFO'];
/** bench/lib/seed.ts's line, plus a unicode greeting on every 1 000th. */
function logLine(i: number, lines: number): string {
  const level = LEVELS[i % LEVELS.length]!;
  const ts = `2026-01-01T12:${String(Math.floor(i / 60_000) % 60).padStart(2, '0')}:${String(Math.floor(i / 1000) % 60).padStart(2, '0')}.${String(i % 1000).padStart(3, '0')}Z`;
  const rare = i % Math.floor(lines / 5) === Math.floor(lines / 10) ? ` trace=${RARE}` : i % 1000 === 3 ? ' Grüsse aus Köln' : '';
  const body =
    i % 10 === 7
      ? `upstream service-${i % 13}.internal did not answer: timeout after 5000ms, retrying (${i % 3}/3)`
      : `worker-${i % 7} processed request id=${(i * 2654435761) % 4294967296} method=GET path=/api/v1/items/${i % 10007} status=200 in ${i % 97}ms`;
  return `${ts} ${level} ${body}${rare}`;
}

async function setup(engine: string): Promise<{ handle: DatabaseHandle; drop: () => Promise<void> }> {
  if (engine === 'sqlite') {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'orloj-skipbench-'));
    const handle = openDatabase(`sqlite:${path.join(dir, 'orloj.db')}`);
    return { handle, drop: async () => fs.rmSync(dir, { recursive: true, force: true }) };
  }
  const schema = await createBenchSchema(process.env.BENCH_DATABASE_URL ?? DEFAULT_BENCH_DATABASE_URL);
  return { handle: openDatabase(schema.url), drop: schema.drop };
}

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]!;
}
const r1 = (x: number) => Math.round(x * 10) / 10;

async function run(engine: string): Promise<void> {
  const { handle, drop } = await setup(engine);
  try {
    await handle.migrate();
    const store = Store.fromHandle(handle);
    const userId = newId();
    const workflowId = newId();
    await sql`insert into users (id, email, password_hash, notification_preference, created_at, updated_at) values (${userId}, ${`${userId}@x`}, 'x', 'ALL', 0, 0)`.execute(handle.db);
    await sql`insert into workflows (id, user_id, name, name_folded, payload, kind, build_status, interval_minutes, consecutive_job_failures_count, max_consecutive_job_failures_allowed, log_retention, generation, created_at, updated_at)
      values (${workflowId}, ${userId}, 'w', 'w', '{}', 'CONTAINER', 'COMPLETED', 1, 0, 3, 1, 0, 0, 0)`.execute(handle.db);
    const newJobId = async (): Promise<string> => {
      const id = newId();
      await sql`insert into jobs (id, workflow_id, user_id, generation, trigger, status, slot_at, scheduled_at, attempts, created_at, updated_at)
        values (${id}, ${workflowId}, ${userId}, 0, 'MANUAL', 'COMPLETED', 0, 0, 1, 0, 0)`.execute(handle.db);
      return id;
    };
    /** Lines/s writing `lines` lines of a new job; `hook` false: the insert without indexLogBlocks. */
    const ingest = async (lines: number, hook: boolean): Promise<{ id: string; rate: number }> => {
      const id = await newJobId();
      const started = performance.now();
      for (let from = 0; from < lines; from += BATCH) {
        const batch: LogLineInput[] = [];
        for (let i = from; i < Math.min(lines, from + BATCH); i++) batch.push({ sequence_num: i, stream: i % 10 === 8 ? 'stderr' : 'stdout', message: logLine(i, lines), timestamp: 1767268800000 + i });
        await store.transaction(async (tx) => {
          const owner = await tx.logs.jobOwner(id);
          if (!owner) throw new Error('job missing');
          // the bench's only reach into a private: the baseline is the same write minus the hook
          if (hook) await tx.logs.insertBatch(id, 1, batch);
          else await (tx.logs as unknown as { insertLines(j: string, a: number, l: LogLineInput[]): Promise<number> }).insertLines(id, 1, batch);
          await tx.logs.recordCount({ jobId: id, attempt: 1, workflowId: owner.workflowId, userId: owner.userId, lines: from + batch.length });
        });
      }
      return { id, rate: lines / ((performance.now() - started) / 1000) };
    };

    const rates: { hook: number[]; plain: number[] } = { hook: [], plain: [] };
    for (let r = 0; r < ROUNDS; r++) {
      for (const hook of r % 2 ? [true, false] : [false, true]) {
        const { rate } = await ingest(INGEST_LINES, hook);
        (hook ? rates.hook : rates.plain).push(rate);
      }
    }
    console.log(`${engine}: ingest of ${INGEST_LINES} lines ×${ROUNDS}: with hook ${rates.hook.map(Math.round).join(', ')} lines/s; without ${rates.plain.map(Math.round).join(', ')} lines/s`);

    const big = await ingest(LINES, true);
    console.log(`${engine}: ${LINES}-line job written at ${Math.round(big.rate)} lines/s (with hook)`);
    if (handle.dialect.name === 'postgres') await sql`analyze`.execute(handle.db);
    else await sql`analyze`.execute(handle.db);
    const blocks = await handle.db.selectFrom('job_log_blocks').select((eb) => eb.fn.countAll<number>().as('n')).where('job_id', '=', big.id).executeTakeFirstOrThrow();
    console.log(`${engine}: ${blocks.n} blocks`);

    const owner = { userId, workflowId };
    for (const [label, needle] of TERMS) {
      const indexed = store.logQueries.matcher(needle);
      const plain = store.logQueries.matcher(needle);
      (plain as { probes: unknown }).probes = undefined; // today's statement, no block filters
      const time = async (m: LogMatcher): Promise<{ ms: number; n: number }> => {
        const started = performance.now();
        const page = await store.logQueries.ownedPage(owner, { jobId: big.id, match: m, limit: 100 });
        return { ms: performance.now() - started, n: page?.lines.length ?? 0 };
      };
      const t = { index: [] as number[], plain: [] as number[] };
      let matches = -1;
      for (let i = 0; i < RUNS; i++) {
        for (const which of i % 2 ? (['index', 'plain'] as const) : (['plain', 'index'] as const)) {
          const got = await time(which === 'index' ? indexed : plain);
          if (matches !== -1 && got.n !== matches) throw new Error(`${label}: ${which} found ${got.n} lines, the other ${matches}`);
          matches = got.n;
          t[which].push(got.ms);
        }
      }
      console.log(
        `${engine} | ${label} | ${matches} | index p50 ${r1(pct(t.index, 50))} p99 ${r1(pct(t.index, 99))} ms | scan p50 ${r1(pct(t.plain, 50))} p99 ${r1(pct(t.plain, 99))} ms`,
      );
    }
    if (handle.dialect.name === 'postgres') {
      const { rows } = await sql<{ t: string; b: string }>`select pg_size_pretty(pg_total_relation_size('job_logs')) as t, pg_size_pretty(pg_total_relation_size('job_log_blocks')) as b`.execute(handle.db);
      console.log(`${engine}: job_logs ${rows[0]?.t}, job_log_blocks ${rows[0]?.b}`);
    } else {
      const { rows } = await sql<{ name: string; size: number }>`select name, sum(pgsize) as size from dbstat where name in ('job_logs', 'job_log_blocks', 'sqlite_autoindex_job_logs_1', 'sqlite_autoindex_job_log_blocks_1') group by name`.execute(handle.db).catch(() => ({ rows: [] as { name: string; size: number }[] }));
      console.log(`${engine}: ${rows.map((r) => `${r.name} ${(r.size / 1048576).toFixed(1)} MiB`).join(', ')}`);
    }
  } finally {
    await handle.close();
    await drop();
  }
}

for (const engine of ENGINES) await run(engine);
