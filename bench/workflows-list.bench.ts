import { startServer } from './lib/child.js';
import { pidsNamed } from './lib/cpu.js';
import { runLoad, type LoadResult } from './lib/load.js';
import { withOrloj, type Engine } from './lib/orloj.js';
import type { BenchSuite, SuiteContext } from './lib/suite.js';
import { installedVersion } from './lib/versions.js';

const WORKFLOWS = 10_000;
const PAGE_SIZE = 20;
const TARGET_RATIO = 0.5;
const TARGET_P99_MS = 50;

interface Measured {
  label: string;
  result?: LoadResult;
  /** Why it did not run. */
  failure?: string;
  details?: string;
}

/** Checks the first page is what the benchmark claims to measure; returns its JSON text. */
async function firstPage(url: string, cookie: string): Promise<string> {
  const res = await fetch(`${url}/workflows`, { headers: { cookie } });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`GET /workflows answered ${res.status}: ${text.slice(0, 300)}`);
  const body = JSON.parse(text) as { workflows?: unknown[]; cursor?: string };
  if (body.workflows?.length !== PAGE_SIZE || !body.cursor) {
    throw new Error(`GET /workflows returned ${body.workflows?.length} workflows (cursor "${body.cursor}"), expected a full page of ${PAGE_SIZE}`);
  }
  return text;
}

async function measureOrloj(ctx: SuiteContext, engine: Engine, label: string, env: Record<string, string> = {}): Promise<Measured & { page?: string }> {
  try {
    return await withOrloj(
      engine,
      async (orloj, db) => {
        ctx.log(`${label}: ${orloj.engineVersion} at ${db.where}; seeding ${WORKFLOWS} workflows`);
        const { email, cookie } = await orloj.registerUser();
        const seeded = await orloj.call<{ ms: number; total: number }>('seedWorkflows', { email, count: WORKFLOWS });
        if (seeded.total !== WORKFLOWS) throw new Error(`seeded ${seeded.total} workflows, expected ${WORKFLOWS}`);
        const page = await firstPage(orloj.url, cookie);
        ctx.log(`${label}: seeded in ${seeded.ms} ms; measuring`);
        const cpu: Record<string, () => number[]> = { orloj: () => [orloj.pid] };
        if (engine === 'postgres') cpu.postgres = () => pidsNamed('postgres');
        const result = await runLoad({ url: `${orloj.url}/workflows`, headers: { cookie }, cpu }, ctx.load);
        return {
          label,
          result,
          page,
          details: `${orloj.engineVersion}, ${db.where}; DB_POOL_SIZE ${orloj.poolSize}, ${WORKFLOWS.toLocaleString('en')} workflows seeded in ${seeded.ms} ms`,
        };
      },
      env,
    );
  } catch (err) {
    ctx.log(`${label}: FAILED: ${err instanceof Error ? err.message : String(err)}`);
    return { label, failure: err instanceof Error ? err.message : String(err) };
  }
}

async function measureBareKoa(ctx: SuiteContext, page: string): Promise<Measured> {
  const label = 'bare Koa (same page from memory)';
  const server = await startServer('bare-koa', {});
  try {
    await server.call('setPage', page);
    ctx.log(`${label}: measuring`);
    const result = await runLoad({ url: `${server.url}/workflows`, cpu: { server: () => [server.pid] } }, ctx.load);
    return { label, result };
  } finally {
    await server.stop();
  }
}

const fmt = (n: number, digits = 0) => n.toLocaleString('en', { minimumFractionDigits: digits, maximumFractionDigits: digits });
const pct = (n: number | undefined) => (n === undefined ? 'n/a' : `${fmt(n)} %`);

export const workflowsList: BenchSuite = {
  name: 'workflows-list',
  title: `GET /workflows: first page of ${PAGE_SIZE} among ${WORKFLOWS.toLocaleString('en')} workflows`,

  async run(ctx) {
    const sqlite = await measureOrloj(ctx, 'sqlite', 'orloj · SQLite');
    const postgres = await measureOrloj(ctx, 'postgres', 'orloj · PostgreSQL');
    // Every request after the first reuses the rendered page (docs/api.md); this row shows a page read and rendered each time.
    const uncached = await measureOrloj(ctx, 'sqlite', 'orloj · SQLite, page cache off (LIST_CACHE_MB=0)', { LIST_CACHE_MB: '0' });
    const page = sqlite.page ?? postgres.page;
    const bare: Measured = page
      ? await measureBareKoa(ctx, page)
      : { label: 'bare Koa (same page from memory)', failure: 'no orloj page to serve (both orloj targets failed)' };

    const all = [sqlite, postgres, uncached, bare];
    const baseline = bare.result?.rps;
    const rows = all.map((m) => {
      const r = m.result;
      if (!r) return [m.label, `not run: ${m.failure ?? '?'}`, '', '', '', '', '', '', '', ''];
      const cpu = Object.entries(r.cpu)
        .map(([name, v]) => `${name} ${pct(v)}`)
        .join(', ');
      return [
        m.label,
        `${fmt(r.rps)} ± ${fmt(r.rpsStddev)}`,
        baseline && m !== bare ? `${fmt(r.rps / baseline, 2)}×` : m === bare ? '1.00×' : 'n/a',
        fmt(r.p50),
        fmt(r.p99),
        fmt(r.max),
        fmt(r.requests),
        `${r.errors + r.timeouts} / ${r.non2xx}`,
        fmt(r.bytesPerResponse),
        cpu,
      ];
    });

    const verdict: string[] = [`Target: orloj serves ≥ ${TARGET_RATIO}× the bare-Koa rate with p99 ≤ ${TARGET_P99_MS} ms.`, ''];
    for (const m of [sqlite, postgres]) {
      const r = m.result;
      if (!r || !baseline) {
        verdict.push(`- ${m.label}: **not measured**`);
        continue;
      }
      const ratio = r.rps / baseline;
      const okRatio = ratio >= TARGET_RATIO;
      const okP99 = r.p99 <= TARGET_P99_MS;
      verdict.push(
        `- ${m.label}: ${fmt(ratio, 2)}× (${okRatio ? 'met' : 'missed'}), p99 ${fmt(r.p99)} ms (${okP99 ? 'met' : 'missed'}) → **${okRatio && okP99 ? 'met' : 'missed'}**`,
      );
    }

    const disturbed = all.filter((m) => (m.result?.cpu['other processes'] ?? 0) > 25);
    const failed = all.filter((m) => !m.result || m.result.errors + m.result.timeouts + m.result.non2xx > 0);
    const notes = [
      '- The first two rows are orloj as configured by default: the list version is read with the session, and every request after the first sends the page rendered then, as a dashboard reloading an unchanged list gets it. The row with the page cache off reads and renders the page on every request (compiled reads: one read of the session, one of 21 rows); it has no target of its own.',
      `- All servers ran one after another on the same machine as the load generator (and PostgreSQL); with ${ctx.load.connections} connections the cores are shared, so compare rows with each other rather than with other machines. The CPU column is per process during the measured run, in % of one core; "other processes" is the rest of the machine (interference).`,
      '- Latencies are autocannon\'s (whole milliseconds, 2xx answers only). "bytes/resp" includes headers: orloj adds its security and cache headers to the same body.',
      ...all.filter((m) => m.details).map((m) => `- ${m.label}: ${m.details}.`),
      ...(disturbed.length
        ? [
            `- **Disturbed**: other processes used ${disturbed.map((m) => `${pct(m.result?.cpu['other processes'])} of a core during ${m.label}`).join(', ')}; those rows are depressed, and so is any ratio that involves them.`,
          ]
        : []),
      ...(failed.length ? [`- **Invalid run**: ${failed.map((m) => m.label).join(', ')} had errors, non-2xx answers or did not run.`] : []),
    ];

    return {
      description: [
        `Throughput and latency of the workflow list as the dashboard loads it: \`GET /workflows\` (no query: the newest ${PAGE_SIZE} active workflows and a cursor), signed in with the session and CSRF cookies of a user who owns ${WORKFLOWS.toLocaleString('en')} workflows.`,
        'Measured against orloj over SQLite, orloj over PostgreSQL, and a bare Koa app that answers the same JSON page from memory (re-serialised per request), which bounds what Node and Koa alone can do here.',
      ].join(' '),
      settings: [
        ['Load', `autocannon ${installedVersion('autocannon')}, ${ctx.load.connections} connections, pipelining 1, ${ctx.load.duration} s measured after ${ctx.load.warmup} s warm-up, in the parent process`],
        ['orloj', 'api role alone in a child process (`ApiServer`, TypeScript sources via tsx), `NODE_ENV=production`, `RATE_LIMIT_ENABLED=false`, `LOG_LEVEL=silent`, the per-user and per-address shares out of the way (one user, one address), other settings default (so the page cache is on, `LIST_CACHE_MB=32`, except in the row that turns it off)'],
        ['Data', `${WORKFLOWS.toLocaleString('en')} active workflows of one user (1 in 5 CONTAINER), bulk-inserted; PostgreSQL statistics refreshed with ANALYZE`],
        ['Baseline', `Koa ${installedVersion('koa')} in a child process, one middleware setting \`ctx.body\` to the page object orloj returned`],
        ['Overrides', 'BENCH_DURATION, BENCH_CONNECTIONS, BENCH_WARMUP, BENCH_DATABASE_URL'],
      ],
      table: {
        columns: ['Target', 'req/s (mean ± sd)', 'vs bare Koa', 'p50 ms', 'p99 ms', 'max ms', 'requests', 'errors / non-2xx', 'bytes/resp', 'CPU'],
        rows,
      },
      verdict,
      notes,
      valid: failed.length === 0,
    };
  },
};
