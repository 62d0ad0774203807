import { Pool } from 'undici';
import { withOrloj } from './lib/orloj.js';
import { ABSENT_TERM, COMMON_TERM, RARE_TERM } from './lib/log-terms.js';
import { envInt, fmt, ms, summarize, type Summary } from './lib/stats.js';
import { meterMachineCpu, meterCpu, pidsNamed } from './lib/cpu.js';
import type { BenchSuite, SuiteContext, SuiteReport } from './lib/suite.js';
import { codeVersion } from './lib/versions.js';
import type { Engine } from './lib/orloj.js';

const TARGET_RATIO = 1.5;
const PAGE = 100;

interface Settings {
  lines: number;
  jobLines: number;
  runs: number;
  commonRuns: number;
  engines: Engine[];
}

function settingsFromEnv(env: NodeJS.ProcessEnv = process.env): Settings {
  const engines = (env.BENCH_LOG_ENGINES?.trim() || 'sqlite,postgres').split(',').map((e) => e.trim());
  for (const e of engines) if (e !== 'sqlite' && e !== 'postgres') throw new Error(`BENCH_LOG_ENGINES: unknown engine "${e}"`);
  return {
    lines: envInt('BENCH_LOG_LINES', 10_000_000, 1),
    jobLines: envInt('BENCH_LOG_JOB_LINES', 1_000_000, 1),
    runs: envInt('BENCH_LOG_SEARCHES', 30, 1),
    // A common term answers in a millisecond or two: enough runs that p99 is not simply the slowest of 30.
    commonRuns: envInt('BENCH_LOG_COMMON_SEARCHES', 300, 1),
    engines: engines as Engine[],
  };
}

interface TermResult {
  term: string;
  label: string;
  api: Summary;
  /** The same statement behind a bare node:http server in the orloj process: the least any HTTP API can add. */
  bare: Summary;
  sql: Summary;
  matches: number;
}

interface EngineResult {
  label: string;
  terms: TermResult[];
  /** GET /users over the same connection: what any signed-in request costs through HTTP, Koa and the session. */
  floor?: Summary;
  failure?: string;
  details?: string;
  otherCpu?: number | undefined;
}

async function measure(ctx: SuiteContext, s: Settings, engine: Engine): Promise<EngineResult> {
  const label = engine === 'sqlite' ? 'SQLite' : 'PostgreSQL';
  try {
    return await withOrloj(engine, async (orloj, db) => {
      const { email, cookie } = await orloj.registerUser();
      const jobs = Math.max(1, Math.ceil(s.lines / s.jobLines));
      ctx.log(`${label}: ${orloj.engineVersion} at ${db.where}; seeding ${fmt(s.lines)} log lines in ${jobs} jobs (progress from the server process)`);
      const seeded = await orloj.call<{ workflowId: string; jobIds: string[]; linesPerJob: number[]; ms: number }>('seedJobLogs', { email, total: s.lines, jobs });
      const jobId = seeded.jobIds[seeded.jobIds.length - 1]!;
      const jobLines = seeded.linesPerJob[seeded.linesPerJob.length - 1]!;
      ctx.log(`${label}: seeded in ${fmt(seeded.ms / 1000)} s; searching job ${jobId} (${fmt(jobLines)} lines)`);
      const path = (q: string) => `/workflows/${seeded.workflowId}/jobs/${jobId}/logs/search?q=${encodeURIComponent(q)}&limit=${PAGE}`;
      // One kept-alive connection and undici's lean request API: global fetch adds
      // about a quarter of a millisecond of its own per request, which is the
      // client's cost, not the API's.
      const client = new Pool(orloj.url, { connections: 1 });
      const { port: barePort } = await orloj.call<{ port: number }>('startBareSearch', { email, workflowId: seeded.workflowId, jobId, limit: PAGE });
      const bareClient = new Pool(`http://127.0.0.1:${barePort}`, { connections: 1 });
      const timed = async (pool: Pool, what: string, target: string, headers: Record<string, string>): Promise<{ ms: number; lines: number }> => {
        const started = performance.now();
        const res = await pool.request({ method: 'GET', path: target, headers });
        const text = await res.body.text();
        const elapsed = performance.now() - started;
        if (res.statusCode !== 200) throw new Error(`${what} answered ${res.statusCode}: ${text.slice(0, 300)}`);
        return { ms: elapsed, lines: (JSON.parse(text) as { logs: unknown[] }).logs.length };
      };
      const viaApi = (q: string) => timed(client, `GET …/logs/search?q=${q}`, path(q), { cookie });
      const viaBare = (q: string) => timed(bareClient, `the bare server's search for ${q}`, `/?q=${encodeURIComponent(q)}`, {});
      const terms: TermResult[] = [];
      let sqlText = '';
      const cpu: Record<string, () => number[]> = { orloj: () => [orloj.pid] };
      if (engine === 'postgres') cpu.postgres = () => pidsNamed('postgres');
      const machine = meterMachineCpu();
      const meters = Object.values(cpu).map((pids) => meterCpu(pids));
      for (const [name, term] of [
        [`rare ("${RARE_TERM}", 5 lines of the job)`, RARE_TERM],
        [`absent ("${ABSENT_TERM}", no line)`, ABSENT_TERM],
        [`common ("${COMMON_TERM}", every 10th line)`, COMMON_TERM],
      ] as const) {
        // warm every path, then alternate them run by run so that load on the machine hits all alike
        await viaApi(term);
        await viaBare(term);
        const sqlArgs = { email, workflowId: seeded.workflowId, jobId, needle: term, limit: PAGE, runs: 1 };
        await orloj.call('timeSearchSql', sqlArgs);
        const apiMs: number[] = [];
        const bareMs: number[] = [];
        const sqlMs: number[] = [];
        let matches = 0;
        const runs = term === COMMON_TERM ? s.commonRuns : s.runs;
        const endProfile = await orloj.profile(`log-search-${engine}-${term === COMMON_TERM ? 'common' : term === ABSENT_TERM ? 'absent' : 'rare'}`);
        for (let i = 0; i < runs; i++) {
          const a = await viaApi(term);
          apiMs.push(a.ms);
          matches = a.lines;
          const b = await viaBare(term);
          bareMs.push(b.ms);
          const r = await orloj.call<{ ms: number[]; rows: number; sql: string }>('timeSearchSql', sqlArgs);
          sqlMs.push(...r.ms);
          sqlText = r.sql;
          if (Math.min(r.rows, PAGE) !== a.lines || b.lines !== a.lines) {
            throw new Error(`"${term}": the api returned ${a.lines} lines, the bare server ${b.lines}, the SQL ${r.rows} rows`);
          }
        }
        const profileFile = await endProfile();
        if (profileFile) ctx.log(`${label}: CPU profile of the ${name} runs in ${profileFile}`);
        const t: TermResult = { term, label: name, api: summarize(apiMs), bare: summarize(bareMs), sql: summarize(sqlMs), matches };
        terms.push(t);
        ctx.log(`${label}: ${name}: p99 api ${ms(t.api.p99)} ms, bare HTTP ${ms(t.bare.p99)} ms, SQL ${ms(t.sql.p99)} ms`);
      }
      // The floor: the cheapest signed-in request (HTTP, Koa, the session and one small read).
      const floorMs: number[] = [];
      for (let i = 0; i <= s.commonRuns; i++) {
        const started = performance.now();
        const res = await client.request({ method: 'GET', path: '/users', headers: { cookie } });
        await res.body.text();
        if (res.statusCode !== 200) throw new Error(`GET /users answered ${res.statusCode}`);
        if (i > 0) floorMs.push(performance.now() - started);
      }
      const floor = summarize(floorMs);
      ctx.log(`${label}: floor (GET /users) p50 ${ms(floor.p50)} ms, p99 ${ms(floor.p99)} ms`);
      await client.close();
      await bareClient.close();
      const ours = meters.reduce((a, m) => a + (m.stop() ?? 0), 0);
      const whole = machine.stop();
      return {
        label,
        terms,
        floor,
        otherCpu: whole === undefined ? undefined : Math.max(0, whole - ours),
        details: `${orloj.engineVersion}, ${db.where}; ${fmt(s.lines)} lines in ${jobs} jobs seeded in ${fmt(seeded.ms / 1000)} s; the searched job holds ${fmt(jobLines)} lines; SQL: \`${sqlText}\``,
      };
    });
  } catch (err) {
    const failure = err instanceof Error ? err.message : String(err);
    ctx.log(`${label}: FAILED: ${failure}`);
    return { label, terms: [], failure };
  }
}

export const logSearch: BenchSuite = {
  name: 'log-search',
  title: 'Job logs: search latency through the API beside the raw SQL',

  async run(ctx): Promise<SuiteReport> {
    const s = settingsFromEnv();
    const deviation = s.lines !== 10_000_000;
    const description = [
      `Latency of \`GET /workflows/{wid}/jobs/{jid}/logs/search?q=…&limit=${PAGE}\` (first page, newest first, highlights) for a rare, an absent and a common term, signed in with the session and CSRF cookies, over a store holding ${fmt(s.lines)} log lines, beside the same SQL run in the server process and the same SQL behind a bare node:http server (see the notes).`,
      `The lines are bulk-inserted through log-ingest's own write path (\`insertBatch\` + \`recordCount\`, 5 000 lines a transaction) into one CONTAINER workflow's completed jobs of up to ${fmt(s.jobLines)} lines each; the last job is searched.`,
      'The SQL is the one statement the route runs (job; its current attempt from a subquery that also checks the owner and log retention; case-insensitive `containsFolded` filter; `order by sequence_num desc limit 101`), timed in the server process through the same call the route makes (`LogQueriesRepo.ownedPage`: a compiled read on the server\'s own read connection or pool); the API adds HTTP, the session, highlighting and JSON.',
      'Requests are one at a time over one kept-alive connection per server (undici `Pool`), api, bare HTTP and SQL alternating run by run.',
    ].join(' ');
    const settings: Array<[string, string]> = [
      ['Code', codeVersion()],
      ['orloj', 'api role alone in a child process (`ApiServer`, TypeScript sources via tsx), `NODE_ENV=production`, `RATE_LIMIT_ENABLED=false`, `LOG_LEVEL=silent`, the per-user and per-address shares out of the way (one user, one address), other settings default'],
      ['Data', `${fmt(s.lines)} lines (${deviation ? `**not the target's 10,000,000**: BENCH_LOG_LINES was set` : 'the target size'}), jobs of ${fmt(s.jobLines)} lines; lines of about 120 bytes, 1 in 10 on stderr; "${COMMON_TERM}" in every 10th line, "${RARE_TERM}" in 5 lines per job, "${ABSENT_TERM}" in none; no text index, the per-block skip index of docs/adr/0007-log-search-skip-index.md`],
      ['Searches', `${s.runs} per path for the rare and the absent term, ${s.commonRuns} for the common one, after one warm-up each; engines ${s.engines.join(', ')}`],
      ['Overrides', 'BENCH_LOG_LINES (total lines, default 10,000,000), BENCH_LOG_JOB_LINES (lines per job, default 1,000,000), BENCH_LOG_SEARCHES (runs of the rare term, default 30), BENCH_LOG_COMMON_SEARCHES (runs of the common term, default 300), BENCH_LOG_ENGINES (default sqlite,postgres), BENCH_DATABASE_URL, BENCH_CPU_PROF (adds orloj-log-search-<engine>-<term>-<pid>.cpuprofile: the orloj process during each term\'s runs)'],
    ];
    const results: EngineResult[] = [];
    for (const engine of s.engines) results.push(await measure(ctx, s, engine));

    const rows: string[][] = [];
    for (const r of results) {
      if (!r.terms.length) rows.push([r.label, `not run: ${r.failure ?? '?'}`, '', '', '', '', '', '', '', '']);
      for (const t of r.terms) {
        rows.push([
          `${r.label} · ${t.label}`,
          fmt(t.matches),
          ms(t.api.p50),
          ms(t.api.p99),
          ms(t.bare.p50),
          ms(t.bare.p99),
          ms(t.sql.p50),
          ms(t.sql.p99),
          `${fmt(t.api.p99 / t.sql.p99, 2)}×`,
          `${fmt(t.bare.p99 / t.sql.p99, 2)}×`,
        ]);
      }
      if (r.floor) rows.push([`${r.label} · reference: \`GET /users\` (no search)`, '—', ms(r.floor.p50), ms(r.floor.p99), '—', '—', '—', '—', '—', '—']);
    }
    const verdict = [`Target: p99 through the API ≤ ${TARGET_RATIO}× the p99 of the same SQL.`, ''];
    for (const r of results) {
      if (!r.terms.length) {
        verdict.push(`- ${r.label}: **not measured**`);
        continue;
      }
      for (const t of r.terms) {
        const ratio = t.api.p99 / t.sql.p99;
        const bare = t.bare.p99 / t.sql.p99;
        const bound = ratio > TARGET_RATIO && bare > TARGET_RATIO ? `; no HTTP server met it here: the bare one measured ${fmt(bare, 2)}×` : '';
        verdict.push(`- ${r.label}, ${t.label}: ${fmt(ratio, 2)}× (${ms(t.api.p99)} ms against ${ms(t.sql.p99)} ms) → **${ratio <= TARGET_RATIO ? 'met' : 'missed'}**${bound}`);
      }
    }
    const disturbed = results.filter((r) => (r.otherCpu ?? 0) > 25);
    return {
      description,
      settings,
      table: {
        columns: ['Engine · term', 'lines on the page', 'API p50 ms', 'API p99 ms', 'bare HTTP p50 ms', 'bare HTTP p99 ms', 'SQL p50 ms', 'SQL p99 ms', 'API / SQL p99', 'bare HTTP / SQL p99'],
        rows,
      },
      verdict,
      notes: [
        '- All on one machine: the client, the orloj process and PostgreSQL share the 2 cores. A rare or absent term reads the job\'s block filters and scans only the blocks they cannot rule out (docs/adr/0007), and both paths pay that; a common term fills the page from the newest rows at once, so there the fixed costs of HTTP and the session weigh most.',
        '- "bare HTTP" is the same statement behind the leanest HTTP server there is: node:http in the orloj process, on a port of its own, answering `{"logs": rows}` through the same `ownedPage` call, with no Koa, session, CSRF, security headers or highlights, over a kept-alive connection of its own, run by run between the api and the SQL. It is what any HTTP API must pay on this machine for this query, so the api\'s distance from it is orloj\'s own cost, and the target cannot be met where it misses too.',
        '- The reference row is the cheapest signed-in request, `GET /users` (HTTP over the same connection, Koa, the session lookup and one small read, no search): the fixed cost every API request pays before its own query, and the spread of its p99 on this machine.',
        ...results.filter((r) => r.details).map((r) => `- ${r.label}: ${r.details}.`),
        ...(deviation ? [`- The store held ${fmt(s.lines)} lines instead of the target's 10,000,000 (BENCH_LOG_LINES): the search reads only the searched job's rows through the primary key, so the other jobs' lines matter little; the searched job's size is what counts.`] : []),
        ...(disturbed.length
          ? [`- **Disturbed**: other processes used ${disturbed.map((r) => `${fmt(r.otherCpu ?? 0)} % of a core during ${r.label}`).join(', ')}; latencies there are inflated on both paths, so the ratio is the figure to read.`]
          : []),
      ],
      valid: results.every((r) => r.terms.length === 3),
    };
  },
};
