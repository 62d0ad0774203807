import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { requireServices } from '@orloj/common/test-support';

/** Where a Prometheus binary is: TEST_PROMETHEUS (scripts/services.sh sets it), else on PATH. */
function which(name: string): string | undefined {
  const r = spawnSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' });
  return r.status === 0 ? r.stdout.trim() : undefined;
}

/** The prometheus and promtool binaries (Debian's package), or skip (or fail with REQUIRE_SERVICES=1). */
export function needPrometheus(ctx: Mocha.Context): { prometheus: string; promtool: string } {
  const prometheus = process.env.TEST_PROMETHEUS || which('prometheus');
  const promtool = which('promtool') ?? (prometheus ? path.join(path.dirname(prometheus), 'promtool') : undefined);
  if (prometheus && promtool && fs.existsSync(promtool)) return { prometheus, promtool };
  if (requireServices) throw new Error('REQUIRE_SERVICES=1 but prometheus/promtool are not installed (scripts/services.sh ensure_prometheus)');
  ctx.skip();
  throw new Error('unreachable');
}

export async function freePort(): Promise<number> {
  const server = net.createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as net.AddressInfo).port;
  await new Promise((r) => server.close(r));
  return port;
}

export interface ScrapeTarget {
  role: string;
  address: string;
}

interface QueryResult {
  metric: Record<string, string>;
  value: [number, string];
}

/**
 * A Prometheus of the test's own: a free port, a scratch storage directory
 * and a generated scrape configuration (one job per role, scraped every
 * second). Queried through its HTTP API, as an operator's dashboards would.
 */
export class PrometheusServer {
  private child: ChildProcess | undefined;
  private readonly dir = fs.mkdtempSync(path.join(os.tmpdir(), 'orloj-prom-'));
  private output = '';
  port = 0;

  constructor(private readonly binary: string) {}

  async start(targets: readonly ScrapeTarget[]): Promise<void> {
    const roles = [...new Set(targets.map((t) => t.role))];
    const jobs = roles.map((role) => {
      const list = targets.filter((t) => t.role === role).map((t) => `'${t.address}'`);
      return `  - job_name: orloj-${role}\n    static_configs:\n      - targets: [${list.join(', ')}]\n        labels: { role: ${role} }`;
    });
    const config = `global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\nscrape_configs:\n${jobs.join('\n')}\n`;
    fs.writeFileSync(path.join(this.dir, 'prometheus.yml'), config);
    this.port = await freePort();
    const child = spawn(
      this.binary,
      [
        `--config.file=${path.join(this.dir, 'prometheus.yml')}`,
        `--storage.tsdb.path=${path.join(this.dir, 'data')}`,
        `--web.listen-address=127.0.0.1:${this.port}`,
        '--storage.tsdb.retention.time=1h',
        '--log.level=warn',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    this.child = child;
    child.stdout!.on('data', (d: Buffer) => (this.output += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (this.output += d.toString()));
    const deadline = Date.now() + 60_000;
    for (;;) {
      if (child.exitCode !== null) throw new Error(`prometheus exited:\n${this.output}`);
      if (Date.now() > deadline) throw new Error(`prometheus did not become ready:\n${this.output}`);
      try {
        if ((await fetch(`http://127.0.0.1:${this.port}/-/ready`)).ok) return;
      } catch {
        // not listening yet
      }
      await new Promise((r) => setTimeout(r, 200)); // poll interval: Prometheus announces nothing we can await
    }
  }

  /** An instant query; throws on a PromQL error (so a dashboard's expressions are checked too). */
  async query(expr: string): Promise<QueryResult[]> {
    const res = await fetch(`http://127.0.0.1:${this.port}/api/v1/query?query=${encodeURIComponent(expr)}`);
    const body = (await res.json()) as { status: string; error?: string; data?: { result: QueryResult[] } };
    if (body.status !== 'success') throw new Error(`query ${expr} failed: ${body.error}`);
    return body.data!.result;
  }

  /** Sum of an instant vector's values (0 when empty). */
  async value(expr: string): Promise<number> {
    return (await this.query(expr)).reduce((n, r) => n + Number(r.value[1]), 0);
  }

  async targets(): Promise<{ labels: Record<string, string>; health: string; lastError: string }[]> {
    const res = await fetch(`http://127.0.0.1:${this.port}/api/v1/targets`);
    return ((await res.json()) as { data: { activeTargets: { labels: Record<string, string>; health: string; lastError: string }[] } }).data.activeTargets;
  }

  async stop(): Promise<void> {
    const c = this.child;
    if (c && c.exitCode === null && c.signalCode === null) {
      const exited = once(c, 'exit');
      c.kill('SIGTERM');
      await exited;
    }
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}
