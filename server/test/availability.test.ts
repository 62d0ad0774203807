import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { request } from 'undici';
import { sql } from 'kysely';
import { newId } from '@orloj/common/core';
import { openDatabase, Store, type DatabaseHandle } from '@orloj/common/store';
import { insertJob, stopChild } from '@orloj/common/test-support';
import { TestClient } from '@orloj/api/test-support';
import { OrlojProcess } from './support/orloj-process.js';

/**
 * Issue 29: one request must never stall or crash the service. Each case
 * drives a real `orloj start` process (every role, SQLite, the in-process bus)
 * from this test process, which stays idle while it measures: the latency
 * bounds are the issue's own (400 within 1 s, `/livez` under 100 ms), and
 * they hold because the work is bounded or off the event loop, not because
 * the machine is fast — before, the same cases took 154 s, minutes, or the
 * process. `/livez` is asked again and again over one kept-alive connection
 * while the hostile requests run; every answer counts (the maximum, not a
 * percentile).
 */

const LIVEZ_BOUND_MS = 100;

/** `orloj start` on a fresh DATA_DIR; resolves once it listens, with its base URL. */
async function startOrloj(dataDir: string, env: Record<string, string> = {}): Promise<{ orloj: OrlojProcess; base: string }> {
  const orloj = new OrlojProcess([], {
    DATA_DIR: dataDir,
    PORT: '0',
    LOG_LEVEL: 'warn',
    // Many requests from one address: the rate limits are not what is tested here.
    RATE_LIMIT_ENABLED: 'false',
    DOCKER_HOST: 'unix:///nonexistent.sock',
    ...env,
  });
  orloj.spawn();
  await orloj.waitFor(/orloj is running/);
  const port = /"port":(\d+)/.exec(orloj.output.split('\n').find((l) => l.includes('orloj is running')) ?? '')?.[1];
  assert.ok(port, orloj.output);
  return { orloj, base: `http://127.0.0.1:${port}` };
}

/**
 * Asks `/livez` back to back (a 10 ms pause between answers) over one kept-alive
 * connection, from a process of its own, and prints each answer's time: the
 * measure is then free of this test process's own work and garbage collection.
 */
const PROBE = `
const http = require('node:http');
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
const base = new URL(process.argv[1]);
function ask() {
  const started = performance.now();
  http.get({ host: base.hostname, port: base.port, path: '/livez', agent }, (res) => {
    res.resume();
    res.on('end', () => {
      if (res.statusCode !== 200) { console.log('status ' + res.statusCode); process.exit(1); }
      console.log((performance.now() - started).toFixed(1));
      setTimeout(ask, 10); // paces the prober: one probe every 10 ms
    });
  }).on('error', (e) => { console.log('error ' + e.message); process.exit(1); });
}
ask();
`;

/** The /livez prober (PROBE) and the times it printed. */
class LivezProbe {
  readonly times: number[] = [];
  private readonly child: ChildProcess;
  private printed = '';

  constructor(base: string) {
    this.child = spawn(process.execPath, ['-e', PROBE, base], { stdio: ['ignore', 'pipe', 'inherit'] });
    this.child.stdout!.on('data', (d: Buffer) => {
      const lines = (this.printed + d.toString()).split('\n');
      this.printed = lines.pop()!;
      for (const line of lines) {
        assert.match(line, /^\d+(\.\d+)?$/, `the prober: ${line}`);
        this.times.push(Number(line));
      }
    });
  }

  /** Forgets the answers so far (the connection's set-up, warming up). */
  reset(): void {
    this.times.length = 0;
  }

  /** Resolves once `n` more answers came. */
  async answers(n: number): Promise<void> {
    const target = this.times.length + n;
    while (this.times.length < target) {
      assert.equal(this.child.exitCode, null, 'the prober stopped');
      await new Promise((r) => setTimeout(r, 5)); // poll interval: the answers arrive on a pipe from the prober
    }
  }

  async stop(): Promise<{ max: number; count: number; slowest: string }> {
    await stopChild(this.child, 'SIGKILL');
    const slowest = this.times
      .map((ms, i) => [ms, i] as const)
      .sort((a, b) => b[0] - a[0])
      .slice(0, 5)
      .map(([ms, i]) => `#${i}: ${Math.round(ms)} ms`)
      .join(', ');
    return { max: Math.max(...this.times), count: this.times.length, slowest };
  }
}

/** Peak resident memory of a process since its peak was last reset (Linux `VmHWM`), in MiB. */
function peakRssMiB(pid: number): number {
  const kib = /VmHWM:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
  return Number(kib) / 1024;
}

async function signUp(base: string): Promise<TestClient> {
  const c = new TestClient(base);
  assert.equal((await c.post('/auth/register', { email: `u-${crypto.randomUUID()}@example.com`, password: 'correct horse' })).status, 201);
  return c;
}

describe('availability under hostile requests: the embedded server [SQLite]', function () {
  this.timeout(300_000);
  let dataDir: string;
  let orloj: OrlojProcess;
  let base: string;

  before(async function () {
    this.timeout(120_000);
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'orloj-availability-'));
    ({ orloj, base } = await startOrloj(dataDir));
  });

  after(async () => {
    await orloj?.stop('SIGKILL');
    if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
  });

  afterEach(function () {
    // The process survived the case (a crash is its own failure, named with the output).
    assert.equal(orloj.child?.exitCode, null, `orloj exited:\n${orloj.output}`);
    if (this.currentTest?.state === 'failed') console.log(orloj.output.slice(-4000));
  });

  it('answers a login of 300,000 unknown keys (3.5 MB) with a small 400 within 1 s, /livez under 100 ms meanwhile', async () => {
    const keys = Array.from({ length: 300_000 }, (_, i) => `"k${i}":1`).join(',');
    const body = Buffer.from(`{"email":"a@example.com","password":"correct horse",${keys}}`);
    assert.ok(body.length > 3_400_000, String(body.length));
    const probe = new LivezProbe(base);
    await probe.answers(5);
    probe.reset();
    const started = performance.now();
    // Waiting 10 times the bound at most: before, the answer came after 154 s.
    const res = await request(`${base}/auth/login`, { method: 'POST', body, headers: { 'content-type': 'application/json' }, headersTimeout: 10_000, bodyTimeout: 10_000 });
    const text = await res.body.text();
    const took = performance.now() - started;
    await probe.answers(5);
    const livez = await probe.stop();
    assert.equal(res.statusCode, 400, text.slice(0, 300));
    const problem = JSON.parse(text) as { code: string; errors: unknown };
    assert.equal(problem.code, 'validation_failed');
    assert.deepEqual(problem.errors, [{ field: 'body', message: 'must hold at most 10000 JSON values' }]);
    assert.ok(text.length < 1_000, `a ${text.length}-byte answer`);
    assert.ok(took < 1_000, `answered after ${Math.round(took)} ms`);
    assert.ok(livez.max < LIVEZ_BOUND_MS, `/livez took up to ${Math.round(livez.max)} ms over ${livez.count} answers (slowest ${livez.slowest})`);
  });

  it('keeps 16 parallel pages of 100 workflows with 1-MiB payloads within bounded memory, every workflow listed once', async () => {
    const c = await signUp(base);
    const head = '{"endpoint":"https://example.com/"';
    // The longest payload the schema allows: 1,048,576 characters, nearly all whitespace.
    const payload = `${head}${' '.repeat(1_048_576 - head.length - 1)}}`;
    const created: string[] = [];
    for (let batch = 0; batch < 100; batch += 4) {
      const answers = await Promise.all(
        Array.from({ length: 4 }, () =>
          c.post('/workflows', { name: 'wide', kind: 'HEARTBEAT', payload, interval: 10080, max_consecutive_job_failures_allowed: 3 }, { headers: { 'idempotency-key': crypto.randomUUID() } }),
        ),
      );
      for (const r of answers) {
        assert.equal(r.status, 201, r.text.slice(0, 300));
        created.push(r.json.id as string);
      }
    }
    const pid = orloj.child!.pid!;
    // The peak from here on (writing 5 to clear_refs resets VmHWM to the current RSS).
    fs.writeFileSync(`/proc/${pid}/clear_refs`, '5');
    const before = peakRssMiB(pid);
    const pages = await Promise.all(Array.from({ length: 16 }, () => c.get('/workflows?limit=100')));
    const peak = peakRssMiB(pid);
    for (const page of pages) {
      assert.equal(page.status, 200);
      // A page ends at 4 MiB of payload: four of these, and a cursor to the rest.
      assert.equal(page.json.workflows.length, 4);
      assert.notEqual(page.json.cursor, '');
      assert.equal(page.json.workflows[0].payload, payload);
    }
    assert.ok(peak - before < 400, `resident memory rose from ${Math.round(before)} to ${Math.round(peak)} MiB`);
    // Walking the cursors lists every workflow exactly once.
    const seen: string[] = [];
    for (let cursor = ''; ; ) {
      const page = await c.get(`/workflows?limit=100${cursor ? `&cursor=${cursor}` : ''}`);
      assert.equal(page.status, 200);
      seen.push(...page.json.workflows.map((w: { id: string }) => w.id));
      cursor = page.json.cursor as string;
      if (!cursor) break;
    }
    assert.deepEqual([...seen].sort(), [...created].sort());
  });

  describe('four concurrent searches of 100,000-line logs', () => {
    let database: DatabaseHandle;
    let store: Store;

    before(() => {
      database = openDatabase(`sqlite:${path.join(dataDir, 'orloj.db')}`);
      store = Store.fromHandle(database);
    });
    after(async () => {
      await database?.close();
    });

    /** A user with a finished CONTAINER job whose log has 100,000 lines, stored as log-ingest stores them. */
    async function userWithLongLog(): Promise<{ c: TestClient; path: string }> {
      const c = await signUp(base);
      const created = await c.post(
        '/workflows',
        { name: 'chatty', kind: 'CONTAINER', payload: JSON.stringify({ image: 'alpine:3.20' }), interval: 10080, max_consecutive_job_failures_allowed: 3 },
        { headers: { 'idempotency-key': crypto.randomUUID() } },
      );
      assert.equal(created.status, 201, created.text);
      const job = await insertJob(store, created.json.id as string, 'COMPLETED');
      const at = Date.now();
      for (let from = 0; from < 100_000; from += 10_000) {
        const lines = Array.from({ length: 10_000 }, (_, i) => ({
          sequence_num: from + i,
          stream: 'stdout' as const,
          message: `${newId()} step ${from + i} of the nightly export: copied rows, checked sums, moved on to the next table`,
          timestamp: at + from + i,
        }));
        await store.logs.insertBatch(job.id, job.attempts, lines);
      }
      return { c, path: `/workflows/${job.workflowId}/jobs/${job.id}/logs/search` };
    }

    it('keeps /livez under 100 ms while they run', async () => {
      const users = [];
      for (let i = 0; i < 4; i++) users.push(await userWithLongLog());
      // The lines went in through this process's own connection: their WAL is copied into the
      // database now, not by whichever write of the server comes next.
      await sql`pragma wal_checkpoint(truncate)`.execute(database.db);
      const probe = new LivezProbe(base);
      await probe.answers(5);
      probe.reset();
      // Two characters: too short for the skip index, so each search reads all 100,000 lines.
      const searches = await Promise.all(users.map(({ c, path: p }) => c.get(`${p}?q=zq`)));
      await probe.answers(5);
      const livez = await probe.stop();
      for (const res of searches) {
        assert.equal(res.status, 200, res.text.slice(0, 300));
        assert.deepEqual(res.json.logs, []);
      }
      assert.ok(livez.max < LIVEZ_BOUND_MS, `/livez took up to ${Math.round(livez.max)} ms over ${livez.count} answers (slowest ${livez.slowest})`);
    });
  });
});

/**
 * A client opening `count` connections to `port` from 127.0.0.1, each
 * sending part of a request's headers and then nothing (slowloris), a few
 * hundred at a time; it holds what stays open. It prints `tried <n> open <m>`
 * as it goes and `done` when every connection was tried.
 */
const FLOOD = `
const net = require('node:net');
const [port, count] = process.argv.slice(1).map(Number);
let tried = 0, open = 0, next = 0;
const report = () => console.log('tried ' + tried + ' open ' + open);
function one() {
  return new Promise((resolve) => {
    const s = net.connect({ port, host: '127.0.0.1' });
    let connected = false;
    // A connect the server's backlog keeps waiting counts as tried after 5 s.
    const gaveUp = setTimeout(() => s.destroy(), 5000); // gives up a connect the server's backlog holds (see above)
    s.on('connect', () => { clearTimeout(gaveUp); connected = true; open++; s.write('GET /livez HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\n'); resolve(); });
    s.on('error', () => {});
    s.on('close', () => { clearTimeout(gaveUp); if (connected) { open--; report(); } resolve(); });
  }).then(() => { tried++; });
}
async function worker() { while (next < count) { next++; await one(); } }
setInterval(report, 250);
Promise.all(Array.from({ length: 200 }, worker)).then(() => { report(); console.log('done'); });
`;

/** One flooding client process, and what it printed last. */
class Flood {
  readonly child: ChildProcess;
  output = '';

  constructor(port: number, count: number) {
    this.child = spawn(process.execPath, ['-e', FLOOD, String(port), String(count)], { stdio: ['ignore', 'pipe', 'inherit'] });
    this.child.stdout!.on('data', (d: Buffer) => {
      const text = this.output + d.toString();
      // Looked for before trimming: one chunk may hold `done` and then hundreds of later reports.
      if (text.includes('\ndone\n')) this.done = true;
      this.output = text.slice(-2_000);
    });
  }

  /** Every connection was tried. */
  done = false;

  /** Connections it has tried, as last reported. */
  get tried(): number {
    const all = [...this.output.matchAll(/tried (\d+)/g)];
    return Number(all[all.length - 1]?.[1] ?? 0);
  }

  /** Connections it holds open, as last reported. */
  get open(): number {
    const all = [...this.output.matchAll(/open (\d+)/g)];
    return Number(all[all.length - 1]?.[1] ?? 0);
  }

  stop(): Promise<void> {
    return stopChild(this.child, 'SIGKILL');
  }
}

/** GET `path` from another client address (127.0.0.2), failing after 5 s: the status and the body. */
function fromOtherAddress(port: number, path: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path, localAddress: '127.0.0.2', agent: false, timeout: 5_000 }, (res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('timeout', () => req.destroy(new Error('no answer within 5 s')));
    req.on('error', reject);
  });
}


describe('availability under a connection flood: the embedded server [SQLite]', function () {
  // Bounded by the flood's progress (below), not by this.
  this.timeout(900_000);
  let dataDir: string;
  let orloj: OrlojProcess;
  let port: number;
  const floods: Flood[] = [];

  before(async function () {
    this.timeout(120_000);
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'orloj-flood-'));
    let base: string;
    ({ orloj, base } = await startOrloj(dataDir, { HTTP_HEADERS_TIMEOUT: '2s' }));
    port = Number(new URL(base).port);
    // A host where the process may open 8,192 files (as many do): without the per-address
    // share, 20,000 connections take every descriptor and the process refuses everyone.
    const limited = spawnSync('prlimit', [`--pid=${orloj.child!.pid}`, '--nofile=8192:8192']);
    if (limited.status !== 0) console.log(`prlimit unavailable (${String(limited.error ?? limited.stderr)}): the process keeps its own file limit`);
  });

  after(async () => {
    await Promise.all(floods.map((f) => f.stop()));
    await orloj?.stop('SIGKILL');
    if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('keeps serving another client while one client opens 20,000 half-open connections, and closes them at the header timeout', async () => {
    // Two processes of 10,000 each: one process could not hold 20,000 descriptors itself.
    floods.push(new Flood(port, 10_000), new Flood(port, 10_000));
    let probes = 0;
    // The flood's pace is the machine's: a connect the backlog holds takes 5 s to give up on,
    // so a busy host needs minutes. It fails only when it stops making progress.
    let tried = 0;
    let progressed = Date.now();
    while (!floods.every((f) => f.done)) {
      const now = floods.reduce((sum, f) => sum + f.tried, 0);
      if (now > tried) [tried, progressed] = [now, Date.now()];
      assert.ok(Date.now() - progressed < 60_000, `the flood made no progress for a minute: ${floods.map((f) => f.output.split('\n').at(-2)).join('; ')}`);
      assert.equal((await fromOtherAddress(port, '/livez')).status, 200, `another client was refused after ${probes} answers`);
      probes++;
    }
    assert.equal((await fromOtherAddress(port, '/livez')).status, 200);
    // Asked from the other address too: the flooding one may still hold its share.
    const metrics = (await fromOtherAddress(port, '/metrics')).body;
    const refused = Number(/^orloj_http_connections_refused_total (\d+)$/m.exec(metrics)?.[1]);
    // Beyond its share (HTTP_MAX_CONNECTIONS_PER_CLIENT, 256) the flooding address's connections were
    // closed as soon as accepted; a place freed at each header timeout let a few more in.
    assert.ok(refused >= 10_000, `${refused} refused`);
    // None is kept past HTTP_HEADERS_TIMEOUT (2 s here): the flood ends up holding nothing.
    for (let deadline = Date.now() + 60_000; floods.some((f) => f.open > 0); ) {
      assert.ok(Date.now() < deadline, `still open: ${floods.map((f) => f.open).join(', ')}`);
      await new Promise((r) => setTimeout(r, 100)); // poll interval: the flood processes report on their pipes
    }
    assert.ok(probes > 0);
  });
});
