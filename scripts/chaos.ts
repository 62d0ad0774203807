// Multi-process crash test on real PostgreSQL and RabbitMQ (docs/chaos.md).
//
//   node --import tsx --conditions=orloj-src scripts/chaos.ts [--workflows 200] [--duration 60] [--speed 10] [--kill-every 3] …
//
// Starts several `orloj start --roles scheduler` and `--roles runners`
// processes on one accelerated clock, seeds one-minute HEARTBEAT workflows
// against a local HTTP target, SIGKILLs the scheduler leader and a runner
// again and again, lets the system settle, and then checks the guarantees
// from the database. Exit code: 0 all checks hold, 1 a check failed, 2 the
// harness itself failed.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import amqp, { type Channel } from 'amqplib';
import pg from 'pg';
import {
  AcceleratedClock,
  DEAD_LETTER_SUFFIX,
  ensureKeyDir,
  newId,
  openDatabase,
  parseDuration,
  parsePayload,
  QUEUES,
  Store,
  TERMINAL_JOB_STATUSES,
  TOPICS,
  type DatabaseHandle,
  type JobsTable,
  type Selectable,
  type Workflow,
  type WorkflowsTable,
} from '@orloj/common';
import { DEFAULT_SCHEDULER_CONFIG, LEADER_LEASE } from '@orloj/scheduler';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const BIN = path.join(ROOT, 'server/src/bin.ts');
const INTERVAL_MINUTES = 1;
const INTERVAL_MS = INTERVAL_MINUTES * 60_000;

const HELP = `chaos: SIGKILLs scheduler leaders and runners while jobs run, then checks the guarantees.

  node --import tsx --conditions=orloj-src scripts/chaos.ts [options]

  --workflows <n>          one-minute HEARTBEAT workflows to seed (200)
  --duration <s>           real seconds of killing (60)
  --speed <x>              clock speed: x clock seconds per real second (10)
  --kill-every <s>         real seconds between kill rounds, jittered ±50% (3)
  --restart-after <s>      real seconds before a killed process is started again (1)
  --schedulers <n>         scheduler processes (3)
  --runners <n>            runner processes (2)
  --fail-rate <p>          share of target requests answered 500 (0.03)
  --job-lease-ttl <d>      JOB_LEASE_TTL, clock time (15s)
  --tick <d>               SCHEDULER_TICK, clock time (1s)
  --queue-timeout <d>      JOB_QUEUE_TIMEOUT, clock time (10m, orloj's default)
  --runner-concurrency <n> RUNNER_CONCURRENCY (8)
  --settle-timeout <s>     real seconds to wait for every job to end (120)
  --log-level <level>      LOG_LEVEL of the orloj processes (warn)
  --keep                   keep the schema, the queues and the logs
  --verbose, -v            print open jobs, queue depths and live processes every second

Environment: TEST_DATABASE_URL (postgres://postgres@127.0.0.1:5432/orloj_test),
TEST_AMQP_URL (amqp://guest:guest@127.0.0.1:5672).
`;

// ---- options ------------------------------------------------------------------

interface Options {
  workflows: number;
  durationS: number;
  speed: number;
  killEveryS: number;
  restartAfterS: number;
  schedulers: number;
  runners: number;
  failRate: number;
  jobLeaseTtl: string;
  tick: string;
  queueTimeout: string;
  runnerConcurrency: number;
  settleTimeoutS: number;
  logLevel: string;
  keep: boolean;
  verbose: boolean;
}

function readOptions(argv: string[]): Options | undefined {
  const { values } = parseArgs({
    args: argv,
    options: {
      workflows: { type: 'string', default: '200' },
      duration: { type: 'string', default: '60' },
      speed: { type: 'string', default: '10' },
      'kill-every': { type: 'string', default: '3' },
      'restart-after': { type: 'string', default: '1' },
      schedulers: { type: 'string', default: '3' },
      runners: { type: 'string', default: '2' },
      'fail-rate': { type: 'string', default: '0.03' },
      'job-lease-ttl': { type: 'string', default: '15s' },
      tick: { type: 'string', default: '1s' },
      'queue-timeout': { type: 'string', default: '10m' },
      'runner-concurrency': { type: 'string', default: '8' },
      'settle-timeout': { type: 'string', default: '120' },
      'log-level': { type: 'string', default: 'warn' },
      keep: { type: 'boolean', default: false },
      verbose: { type: 'boolean', short: 'v', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  if (values.help) return undefined;
  const num = (name: keyof typeof values, min: number, max: number): number => {
    const n = Number(values[name]);
    if (!Number.isFinite(n) || n < min || n > max) throw new UsageError(`--${name} must be a number from ${min} to ${max} (got "${String(values[name])}")`);
    return n;
  };
  const duration = (name: 'job-lease-ttl' | 'tick' | 'queue-timeout'): string => {
    if (parseDuration(values[name]) === undefined) throw new UsageError(`--${name} must be a duration such as 15s (got "${values[name]}")`);
    return values[name];
  };
  return {
    workflows: Math.floor(num('workflows', 1, 100_000)),
    durationS: num('duration', 1, 86_400),
    speed: num('speed', 1, 1_000),
    killEveryS: num('kill-every', 0.2, 3_600),
    restartAfterS: num('restart-after', 0, 3_600),
    schedulers: Math.floor(num('schedulers', 2, 20)),
    runners: Math.floor(num('runners', 2, 20)),
    failRate: num('fail-rate', 0, 1),
    jobLeaseTtl: duration('job-lease-ttl'),
    tick: duration('tick'),
    queueTimeout: duration('queue-timeout'),
    runnerConcurrency: Math.floor(num('runner-concurrency', 1, 1_024)),
    settleTimeoutS: num('settle-timeout', 1, 86_400),
    logLevel: values['log-level'],
    keep: values.keep,
    verbose: values.verbose,
  };
}

class UsageError extends Error {}

// ---- small helpers --------------------------------------------------------------

const sleepReal = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

function log(message: string): void {
  console.log(`[chaos ${new Date().toISOString().slice(11, 23)}] ${message}`);
}

let aborted = false;

// ---- orloj processes --------------------------------------------------------------

type Role = 'scheduler' | 'runners';

interface Incident {
  name: string;
  code: number | null;
  signal: string | null;
}

/** One replica slot (scheduler-2, runner-1…): a process, restarted under a new incarnation after each kill. */
class Member {
  child: ChildProcess | undefined;
  id = '';
  incarnation = 0;
  /** Date.now() of the latest start. */
  startedAt = 0;
  /** Set before we signal it: an exit then is expected. */
  private expectExit = false;
  exited: Promise<void> = Promise.resolve();

  constructor(
    readonly role: Role,
    readonly index: number,
    private readonly env: Record<string, string>,
    private readonly logDir: string,
    private readonly onUnexpectedExit: (incident: Incident, member: Member) => void,
  ) {}

  get name(): string {
    return `${this.role === 'scheduler' ? 'scheduler' : 'runner'}-${this.index}`;
  }

  get alive(): boolean {
    return this.child !== undefined && this.child.exitCode === null && this.child.signalCode === null;
  }

  start(): void {
    if (this.alive) return;
    this.incarnation += 1;
    this.startedAt = Date.now();
    this.expectExit = false;
    // Schedulers get a new id per incarnation (the default id carries the pid);
    // runner ids stay stable across restarts, as docs/operations.md asks.
    this.id = this.role === 'scheduler' ? `chaos-${this.name}.${this.incarnation}` : `chaos-${this.name}`;
    const idEnv = this.role === 'scheduler' ? { SCHEDULER_ID: this.id } : { RUNNER_ID: this.id };
    const child = spawn(process.execPath, ['--import', 'tsx', '--conditions=orloj-src', BIN, 'start', '--roles', this.role], {
      cwd: ROOT,
      env: { ...this.env, ...idEnv },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const out = fs.createWriteStream(path.join(this.logDir, `${this.name}.log`), { flags: 'a' });
    out.write(`--- ${this.id} (incarnation ${this.incarnation}) pid ${child.pid} at ${new Date().toISOString()}\n`);
    child.stdout!.pipe(out, { end: false });
    child.stderr!.pipe(out, { end: false });
    this.child = child;
    this.exited = new Promise((resolve) => {
      child.once('exit', (code, signal) => {
        out.end(`--- ${this.id} exited (${signal ?? `code ${code}`})\n`);
        if (!this.expectExit) this.onUnexpectedExit({ name: this.id, code, signal }, this);
        resolve();
      });
    });
  }

  kill(signal: 'SIGKILL' | 'SIGTERM'): void {
    if (!this.alive) return;
    this.expectExit = true;
    this.child!.kill(signal);
  }
}

// ---- the local HTTP target ----------------------------------------------------------

interface Target {
  url: string;
  requests: number;
  failures: number;
  close(): Promise<void>;
}

async function startTarget(failRate: number): Promise<Target> {
  const target: Target = { url: '', requests: 0, failures: 0, close: async () => undefined };
  const server = http.createServer((req, res) => {
    target.requests += 1;
    req.resume();
    const fail = Math.random() < failRate;
    if (fail) target.failures += 1;
    res.writeHead(fail ? 500 : 200, { 'content-type': 'text/plain' });
    res.end(fail ? 'chaos says no\n' : 'ok\n');
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('the target has no TCP address');
  target.url = `http://127.0.0.1:${address.port}`;
  target.close = () =>
    new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  return target;
}

// ---- leadership observations -----------------------------------------------------------

interface LeaderSample {
  /** clock time of the observation */
  at: number;
  holder: string | undefined;
  token: number | undefined;
  /** the lease is unexpired and its holder's process is alive */
  live: boolean;
}

// ---- verification -------------------------------------------------------------------

type JobRow = Selectable<JobsTable>;
type WorkflowRow = Selectable<WorkflowsTable>;

interface Verification {
  violations: string[];
  explained: string[];
  checkedSlots: number;
}

const iso = (ms: number) => new Date(ms).toISOString().replace('T', ' ').replace('Z', '');

function verify(input: {
  workflows: WorkflowRow[];
  jobs: JobRow[];
  killEnd: number;
  tickMs: number;
  samples: LeaderSample[];
  maxAttempts: number;
}): Verification {
  const { workflows, jobs, killEnd, tickMs, samples, maxAttempts } = input;
  const violations: string[] = [];
  const explained: string[] = [];
  let checkedSlots = 0;
  const add = (list: string[], message: string) => {
    if (list.length < 200) list.push(message);
    else if (list.length === 200) list.push('… (more)');
  };
  const byWorkflow = new Map<string, JobRow[]>();
  for (const w of workflows) byWorkflow.set(w.id, []);
  for (const j of jobs) {
    const list = byWorkflow.get(j.workflow_id);
    if (list) list.push(j);
    else add(violations, `job ${j.id} belongs to an unknown workflow ${j.workflow_id}`);
  }

  for (const w of workflows) {
    const own = byWorkflow.get(w.id)!;
    const anchor = w.build_completed_at;
    const interval = w.interval_minutes * 60_000;
    if (anchor === null) {
      add(violations, `(d) workflow ${w.id} was never built (build_status ${w.build_status})`);
      continue;
    }
    const automatic = own.filter((j) => j.trigger === 'AUTOMATIC').sort((a, b) => a.slot_at - b.slot_at);

    // (a) one job per (workflow, slot), and the stronger property: every slot
    // lies on the workflow's grid, each job was created while its slot was the
    // most recent one (slot ≤ created_at < slot + interval), and slots only
    // move forward in creation order — so no two jobs ever served one window,
    // and no older slot ran after a newer one.
    const perSlot = new Map<number, JobRow[]>();
    for (const j of automatic) perSlot.set(j.slot_at, [...(perSlot.get(j.slot_at) ?? []), j]);
    for (const [slot, list] of perSlot) {
      if (list.length > 1) add(violations, `(a) workflow ${w.id} has ${list.length} jobs for slot ${iso(slot)}: ${list.map((j) => j.id).join(', ')}`);
      const k = (slot - anchor) / interval;
      if (!Number.isInteger(k) || k < 1) add(violations, `(a) job ${list[0]!.id} of workflow ${w.id} has slot ${iso(slot)}, off the grid build + k×interval (k = ${k})`);
      for (const j of list) {
        if (j.created_at < slot || j.created_at >= slot + interval) {
          add(violations, `(a) job ${j.id} for slot ${iso(slot)} was created at ${iso(j.created_at)}, outside its slot's window`);
        }
      }
    }

    const byCreation = [...automatic].sort((a, b) => a.created_at - b.created_at || a.slot_at - b.slot_at);
    for (let i = 1; i < byCreation.length; i++) {
      const [a, b] = [byCreation[i - 1]!, byCreation[i]!];
      if (b.slot_at <= a.slot_at) {
        add(violations, `(a) workflow ${w.id}: job ${b.id} for slot ${iso(b.slot_at)} was created after job ${a.id} for the later or same slot ${iso(a.slot_at)}`);
      }
    }

    // (b) terminal, (e) attempts
    for (const j of own) {
      if (!TERMINAL_JOB_STATUSES.includes(j.status)) add(violations, `(b) job ${j.id} (workflow ${w.id}, slot ${iso(j.slot_at)}) is still ${j.status}`);
      if (j.attempts > maxAttempts) add(violations, `(e) job ${j.id} took ${j.attempts} attempts (at most ${maxAttempts})`);
    }

    // (c) runs of one workflow never overlap
    const runs = own.filter((j) => j.started_at !== null).sort((a, b) => a.started_at! - b.started_at!);
    for (let i = 1; i < runs.length; i++) {
      const prev = runs[i - 1]!;
      const next = runs[i]!;
      if (prev.completed_at === null || prev.completed_at > next.started_at!) {
        add(
          violations,
          `(c) workflow ${w.id}: job ${prev.id} [${iso(prev.started_at!)}, ${prev.completed_at === null ? 'open' : iso(prev.completed_at)}] overlaps job ${next.id} started ${iso(next.started_at!)}`,
        );
      }
    }

    // (d) no misses: every slot up to one interval before the end of the
    // killing phase has a job, unless the most-recent-missed-slot rule explains it.
    for (let slot = anchor + interval; slot <= killEnd - interval; slot += interval) {
      const count = perSlot.get(slot)?.length ?? 0;
      if (count >= 1) {
        checkedSlots += 1;
        continue;
      }
      const windowEnd = slot + interval;
      const prev = [...automatic].reverse().find((j) => j.slot_at < slot);
      const next = automatic.find((j) => j.slot_at > slot);
      // The scheduler-side time the previous job ended: its last transition.
      const prevEnd = prev ? (TERMINAL_JOB_STATUSES.includes(prev.status) ? prev.updated_at : Number.POSITIVE_INFINITY) : undefined;
      const where = `workflow ${w.id}, slot ${iso(slot)}`;
      if (!next) {
        add(violations, `(d) ${where}: no job for this slot or any later one`);
      } else if (prev && prevEnd! >= windowEnd - 2 * tickMs) {
        add(
          explained,
          `${where}: the previous job (slot ${iso(prev.slot_at)}, ${prev.attempts} attempt(s), ${prev.status}) ended ${Number.isFinite(prevEnd) ? iso(prevEnd!) : 'never'}, ` +
            `at or after this slot's window closed (${iso(windowEnd)}); the next job ran for slot ${iso(next.slot_at)}`,
        );
      } else {
        const from = Math.max(slot, prevEnd ?? slot);
        const seen = samples.filter((s) => s.at >= from && s.at < windowEnd);
        if (seen.length > 0 && seen.every((s) => !s.live)) {
          add(explained, `${where}: no live scheduler leader from ${iso(from)} to ${iso(windowEnd)}; the next job ran for slot ${iso(next.slot_at)}`);
        } else {
          add(
            violations,
            `(d) ${where}: missed although the workflow was free from ${iso(from)} and a leader was live in ${seen.filter((s) => s.live).length}/${seen.length} observations before ${iso(windowEnd)}; ` +
              `the next job (slot ${iso(next.slot_at)}) was created ${iso(next.created_at)}`,
          );
        }
      }
    }
  }
  return { violations, explained, checkedSlots };
}

// ---- readiness ------------------------------------------------------------------

/**
 * Consumers attached to a queue: every runner consumes QUEUES.jobs and every
 * scheduler QUEUES.jobEvents, so the counts tell when all processes are up
 * (their signal handlers are installed by then, and a SIGKILLed process's
 * consumer goes away with its connection).
 */
async function openConsumerCounter(
  amqpUrl: string,
): Promise<{ count(queue: string): Promise<number>; depth(queue: string): Promise<number>; close(): Promise<void> }> {
  const conn = await amqp.connect(amqpUrl);
  conn.on('error', () => {});
  let channel: Channel | undefined;
  const check = async (queue: string) => {
    try {
      if (!channel) {
        channel = await conn.createChannel();
        channel.on('error', () => {});
      }
      return await channel.checkQueue(queue);
    } catch {
      channel = undefined; // not declared yet: the failed check closed the channel
      return { consumerCount: 0, messageCount: 0 };
    }
  };
  return {
    count: async (queue) => (await check(queue)).consumerCount,
    depth: async (queue) => (await check(queue)).messageCount,
    close: () => conn.close().catch(() => undefined),
  };
}

// ---- cleanup -------------------------------------------------------------------

async function deleteBusNames(amqpUrl: string, prefix: string): Promise<number> {
  const queues = new Set<string>();
  for (const q of Object.values(QUEUES)) {
    queues.add(prefix + q);
    queues.add(prefix + q + DEAD_LETTER_SUFFIX);
  }
  // Anything else under the prefix, when rabbitmqctl can list queues here.
  const listed = spawnSync('rabbitmqctl', ['-s', 'list_queues', 'name'], { encoding: 'utf8', timeout: 20_000 });
  if (listed.status === 0) {
    for (const line of listed.stdout.split('\n')) if (line.trim().startsWith(prefix)) queues.add(line.trim());
  }
  const conn = await amqp.connect(amqpUrl);
  conn.on('error', () => {});
  let deleted = 0;
  try {
    let channel = await conn.createChannel();
    channel.on('error', () => {});
    const attempt = async (op: (ch: Channel) => Promise<unknown>) => {
      try {
        await op(channel);
        return true;
      } catch {
        // A failed operation closes the channel: continue on a new one.
        channel = await conn.createChannel();
        channel.on('error', () => {});
        return false;
      }
    };
    for (const q of queues) {
      // checkQueue first: deleting a queue that never existed is not an error on every broker version.
      if ((await attempt((ch) => ch.checkQueue(q))) && (await attempt((ch) => ch.deleteQueue(q)))) deleted += 1;
    }
    for (const t of Object.values(TOPICS)) {
      if ((await attempt((ch) => ch.checkExchange(prefix + t))) && (await attempt((ch) => ch.deleteExchange(prefix + t)))) deleted += 1;
    }
  } finally {
    await conn.close().catch(() => undefined);
  }
  return deleted;
}

// ---- main -------------------------------------------------------------------------

async function main(argv: string[]): Promise<number> {
  let options: Options | undefined;
  try {
    options = readOptions(argv);
  } catch (err) {
    console.error(`${err instanceof Error ? err.message : String(err)}\n\n${HELP}`);
    return 2;
  }
  if (!options) {
    process.stdout.write(HELP);
    return 0;
  }
  const o = options;
  const baseDbUrl = process.env.TEST_DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/orloj_test';
  const amqpUrl = process.env.TEST_AMQP_URL || 'amqp://guest:guest@127.0.0.1:5672';
  const tag = crypto.randomBytes(5).toString('hex');
  const schema = `orloj_chaos_${tag}`;
  const prefix = `orloj-chaos-${tag}.`;
  const tickMs = parseDuration(o.tick)!;
  const jobLeaseTtlMs = parseDuration(o.jobLeaseTtl)!;
  const leaderTtlMs = DEFAULT_SCHEDULER_CONFIG.leaderLeaseTtlMs;
  const maxAttempts = DEFAULT_SCHEDULER_CONFIG.maxAttempts;
  const realIntervalMs = INTERVAL_MS / o.speed;

  const workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'orloj-chaos-'));
  const dataDir = path.join(workDir, 'data');
  const logDir = path.join(workDir, 'logs');
  fs.mkdirSync(logDir, { recursive: true });

  const members: Member[] = [];
  const unexpected: Incident[] = [];
  const timers = new Set<NodeJS.Timeout>();
  let target: Target | undefined;
  let consumers: Awaited<ReturnType<typeof openConsumerCounter>> | undefined;
  let database: DatabaseHandle | undefined;
  let schemaCreated = false;
  let busUsed = false;
  let keepLogs = o.keep;

  // Cleanup runs once: on the normal path, on failure, and on Ctrl-C.
  let cleaning: Promise<void> | undefined;
  const cleanup = () =>
    (cleaning ??= (async () => {
      for (const t of timers) clearTimeout(t);
      for (const m of members) m.kill('SIGKILL');
      await Promise.all(members.map((m) => m.exited));
      await target?.close().catch(() => undefined);
      await consumers?.close();
      await database?.close().catch(() => undefined);
      if (o.keep) {
        log(`kept: schema ${schema}, bus prefix ${prefix}, logs in ${logDir}`);
        return;
      }
      if (schemaCreated) {
        const admin = new pg.Client({ connectionString: baseDbUrl });
        try {
          await admin.connect();
          await admin.query(`drop schema if exists ${schema} cascade`);
        } catch (err) {
          console.error(`could not drop schema ${schema}:`, err instanceof Error ? err.message : err);
        } finally {
          await admin.end().catch(() => undefined);
        }
      }
      if (busUsed) {
        try {
          await deleteBusNames(amqpUrl, prefix);
        } catch (err) {
          console.error(`could not delete the queues under ${prefix}:`, err instanceof Error ? err.message : err);
        }
      }
      if (keepLogs) log(`logs of the orloj processes: ${logDir}`);
      else fs.rmSync(workDir, { recursive: true, force: true });
    })());

  const onSignal = (signal: NodeJS.Signals) => {
    if (aborted) {
      for (const m of members) m.kill('SIGKILL');
      process.exit(130);
    }
    aborted = true;
    log(`${signal}: killing every orloj process and cleaning up (send again to exit at once)`);
    void cleanup().finally(() => process.exit(130));
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  // Last resort (an uncaught error, process.exit elsewhere): no child outlives us.
  process.on('exit', () => {
    for (const m of members) if (m.alive) m.child!.kill('SIGKILL');
  });

  try {
    // -- services
    const admin = new pg.Client({ connectionString: baseDbUrl });
    await admin.connect();
    try {
      await admin.query(`create schema ${schema}`);
      schemaCreated = true;
    } finally {
      await admin.end();
    }
    const dbUrl = new URL(baseDbUrl);
    dbUrl.searchParams.set('options', `-c search_path=${schema}`);
    database = openDatabase(dbUrl.toString(), { poolSize: 4 });
    await database.migrate();
    const store = Store.fromHandle(database);
    busUsed = true;

    target = await startTarget(o.failRate);
    await ensureKeyDir(dataDir); // once, before any process starts
    const origin = Date.now();
    const clock = new AcceleratedClock(origin, o.speed);

    log(
      `schema ${schema}, bus prefix ${prefix}, target ${target.url}; ${o.workflows} workflows, ${o.schedulers} schedulers, ${o.runners} runners; ` +
        `speed ${o.speed} (one ${INTERVAL_MINUTES}-minute interval = ${(realIntervalMs / 1000).toFixed(1)} s real), ` +
        `JOB_LEASE_TTL ${o.jobLeaseTtl}, SCHEDULER_TICK ${o.tick}, JOB_QUEUE_TIMEOUT ${o.queueTimeout}, leader lease ${leaderTtlMs / 1000}s`,
    );
    const failover = leaderTtlMs + 2 * tickMs;
    const retry = jobLeaseTtlMs + 2 * tickMs;
    if (failover + retry >= INTERVAL_MS) {
      log(`warning: leader failover (${failover / 1000}s) + job retry (${retry / 1000}s) do not fit well inside one interval; expect explained skips`);
    }
    if (jobLeaseTtlMs / 3 / o.speed < 100) log('warning: runners renew job leases less than 100 ms (real) apart: expect spurious retries on a busy machine');

    // -- user
    const userId = newId();
    const now0 = clock.now();
    await store.users.insert({ id: userId, email: `chaos-${tag}@example.test`, passwordHash: 'x', notificationPreference: 'NONE', createdAt: now0, updatedAt: now0 });

    // -- processes
    const env: Record<string, string> = {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? os.homedir(),
      DATABASE_URL: dbUrl.toString(),
      DB_POOL_SIZE: '4',
      BUS_URL: amqpUrl,
      BUS_PREFIX: prefix,
      DATA_DIR: dataDir,
      SESSION_SECRET: crypto.randomBytes(32).toString('hex'),
      CSRF_HMAC_SECRET: crypto.randomBytes(32).toString('hex'),
      ORLOJ_CLOCK: `accelerated:${origin}:${o.speed}`,
      LOG_LEVEL: o.logLevel,
      JOB_LEASE_TTL: o.jobLeaseTtl,
      SCHEDULER_TICK: o.tick,
      JOB_QUEUE_TIMEOUT: o.queueTimeout,
      RUNNER_ALLOW_TARGETS: '127.0.0.0/8',
      RUNNER_CONCURRENCY: String(o.runnerConcurrency),
      RUNNER_SHUTDOWN_GRACE: '30s',
    };
    let stopping = false;
    const running = () => !aborted && !stopping;
    const restartLater = (m: Member) => {
      const t = setTimeout(() => {
        timers.delete(t);
        if (running()) m.start();
      }, o.restartAfterS * 1000);
      timers.add(t);
    };
    const onUnexpectedExit = (incident: Incident, m: Member) => {
      unexpected.push(incident);
      log(`UNEXPECTED: ${incident.name} exited (${incident.signal ?? `code ${incident.code}`}); see ${path.join(logDir, m.name + '.log')}`);
      if (running()) restartLater(m);
    };
    for (let i = 1; i <= o.schedulers; i++) members.push(new Member('scheduler', i, env, logDir, onUnexpectedExit));
    for (let i = 1; i <= o.runners; i++) members.push(new Member('runners', i, env, logDir, onUnexpectedExit));
    const schedulers = members.filter((m) => m.role === 'scheduler');
    const runners = members.filter((m) => m.role === 'runners');
    for (const m of members) m.start();

    // -- leadership observer
    const samples: LeaderSample[] = [];
    const tokens = new Set<number>();
    const readLeader = async (): Promise<LeaderSample> => {
      const at = clock.now();
      const row = await store.db.selectFrom('leases').selectAll().where('name', '=', LEADER_LEASE).executeTakeFirst();
      const holder = row && row.expires_at > at ? row.holder : undefined;
      const live = holder !== undefined && schedulers.some((m) => m.alive && m.id === holder);
      return { at, holder, token: row?.fencing_token, live };
    };
    let observing = true;
    const observer = (async () => {
      while (observing) {
        try {
          const s = await readLeader();
          samples.push(s);
          if (s.token !== undefined) tokens.add(s.token);
        } catch {
          // the database may be busy; the next sample comes soon
        }
        await sleepReal(100);
      }
    })();

    consumers = await openConsumerCounter(amqpUrl);
    const allUp = async (what: string) => {
      const by = Date.now() + 60_000;
      for (;;) {
        const [r, s] = [await consumers!.count(prefix + QUEUES.jobs), await consumers!.count(prefix + QUEUES.jobEvents)];
        if (r === o.runners && s === o.schedulers && members.every((m) => m.alive)) return;
        if (Date.now() > by) throw new Error(`${what}: ${r}/${o.runners} runners and ${s}/${o.schedulers} schedulers consume after 60 s; see ${logDir}`);
        if (aborted) return;
        await sleepReal(100);
      }
    };
    await allUp('start');
    const firstLeaderBy = Date.now() + 60_000;
    while (!samples.some((s) => s.live)) {
      if (Date.now() > firstLeaderBy) throw new Error(`no scheduler became leader within 60 s; see ${logDir}`);
      if (aborted) return 130;
      await sleepReal(100);
    }
    log(`all processes up; leader: ${samples.at(-1)!.holder}`);

    // -- seed, spread over one interval so the slots are spread too
    const seeding = (async () => {
      const batches = Math.min(10, o.workflows);
      for (let b = 0; b < batches && !aborted; b++) {
        const from = Math.floor((b * o.workflows) / batches);
        const to = Math.floor(((b + 1) * o.workflows) / batches);
        await store.transaction(async (tx) => {
          for (let i = from; i < to; i++) {
            const now = clock.now();
            const payload = JSON.stringify({ endpoint: `${target!.url}/w/${i}`, method: 'GET', expected_status_code: 200, timeout: '30s' });
            if (!parsePayload('HEARTBEAT', payload).ok) throw new Error(`seed payload is invalid: ${payload}`);
            const w: Workflow = {
              id: newId(),
              userId,
              name: `chaos ${i}`,
              payload,
              kind: 'HEARTBEAT',
              buildStatus: 'QUEUED',
              intervalMinutes: INTERVAL_MINUTES,
              consecutiveJobFailuresCount: 0,
              // occasional 500s must never terminate a workflow: its slots would stop
              maxConsecutiveJobFailuresAllowed: 100,
              logRetention: false,
              generation: 0,
              createdAt: now,
              updatedAt: now,
              terminatedAt: null,
              buildCompletedAt: null,
              nextDueAt: null,
              buildToken: 0,
            };
            await tx.workflows.insert(w);
          }
        });
        await sleepReal(realIntervalMs / batches);
      }
    })();

    // -- progress (--verbose)
    let monitoring = o.verbose;
    const monitor = (async () => {
      while (monitoring && !aborted) {
        try {
          const rows = await store.db
            .selectFrom('jobs')
            .select(['status', (eb) => eb.fn.countAll<number>().as('n')])
            .where('status', 'in', ['PENDING', 'QUEUED', 'RUNNING'])
            .groupBy('status')
            .execute();
          const open = rows.map((r) => `${r.status} ${r.n}`).join(', ') || 'none';
          const depth = `jobs ${await consumers!.depth(prefix + QUEUES.jobs)}, job-events ${await consumers!.depth(prefix + QUEUES.jobEvents)}`;
          const up = members.filter((m) => m.alive).map((m) => m.id.replace('chaos-', ''));
          log(`clock ${iso(clock.now()).slice(11, 19)} open jobs: ${open}; ready messages: ${depth}; alive: ${up.join(' ')}`);
        } catch {
          // best effort
        }
        await sleepReal(1000);
      }
    })();

    // -- kill rounds
    const stats = { rounds: 0, leaderKills: 0, runnerKills: 0, noLeader: 0, skipped: 0 };
    const killStart = Date.now();
    const killUntil = killStart + o.durationS * 1000;
    log(`killing for ${o.durationS} s: the leader and one runner every ~${o.killEveryS} s, restarted after ${o.restartAfterS} s`);
    while (!aborted) {
      const wait = o.killEveryS * 1000 * (0.5 + Math.random());
      if (Date.now() + wait > killUntil) break;
      await sleepReal(wait);
      if (aborted) break;
      stats.rounds += 1;
      // Kill only while another process of the role is up to carry on: the
      // point is failover, not starving the system of a role while restarted
      // processes are still loading (several seconds on a busy machine).
      const leader = await readLeader();
      const s = leader.live ? schedulers.find((m) => m.alive && m.id === leader.holder) : undefined;
      const schedulersUp = await consumers.count(prefix + QUEUES.jobEvents);
      const runnersUp = await consumers.count(prefix + QUEUES.jobs);
      const r = runners.filter((m) => m.alive).sort((a, b) => a.startedAt - b.startedAt)[0];
      const done: string[] = [];
      if (!s) {
        stats.noLeader += 1;
        done.push('no live leader to kill');
      } else if (schedulersUp < 2) {
        stats.skipped += 1;
        done.push(`not the leader ${s.id}: no other scheduler is up yet`);
      } else {
        s.kill('SIGKILL');
        stats.leaderKills += 1;
        done.push(`leader ${s.id} (token ${leader.token})`);
        restartLater(s);
      }
      if (!r || runnersUp < 2) {
        stats.skipped += 1;
        done.push('no runner: only one is up');
      } else {
        r.kill('SIGKILL');
        stats.runnerKills += 1;
        done.push(`runner ${r.id}`);
        restartLater(r);
      }
      log(`round ${stats.rounds}: killed ${done.join(', ')}`);
    }
    await sleepReal(Math.max(0, killUntil - Date.now()));
    await seeding;
    const killEnd = clock.now();
    if (aborted) return 130;
    log(`killing over at clock ${iso(killEnd)}; ${stats.leaderKills} leaders and ${stats.runnerKills} runners killed`);

    // -- settle: restarts finish, every slot up to the end of the killing has been handled
    await sleepReal(o.restartAfterS * 1000 + 100);
    for (const m of members) if (!m.alive) m.start();
    await allUp('after the killing phase');
    const caughtUpBy = Date.now() + Math.max(30_000, 5 * realIntervalMs);
    for (;;) {
      const behind = await store.db
        .selectFrom('workflows')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .where((eb) => eb.or([eb('next_due_at', 'is', null), eb('next_due_at', '<=', killEnd)]))
        .where('terminated_at', 'is', null)
        .executeTakeFirstOrThrow();
      if (Number(behind.n) === 0) break;
      if (Date.now() > caughtUpBy) {
        log(`${behind.n} workflows have not moved past the end of the killing phase; checking anyway`);
        break;
      }
      if (aborted) return 130;
      await sleepReal(200);
    }

    // Freeze the schedules (no new slots come due), then wait for every job to end.
    // A leader tick in flight may write next_due_at back once, so repeat until two passes find nothing.
    for (let quiet = 0; quiet < 2; ) {
      const r = await store.db.updateTable('workflows').set({ next_due_at: null }).where('next_due_at', 'is not', null).executeTakeFirst();
      quiet = Number(r.numUpdatedRows) === 0 ? quiet + 1 : 0;
      await sleepReal(Math.max(200, (3 * tickMs) / o.speed));
    }
    log('schedules frozen; waiting for every job to end');
    const settleBy = Date.now() + o.settleTimeoutS * 1000;
    let lastOpen = -1;
    for (;;) {
      const open = await store.db
        .selectFrom('jobs')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .where('status', 'in', ['PENDING', 'QUEUED', 'RUNNING'])
        .executeTakeFirstOrThrow();
      const n = Number(open.n);
      if (n === 0) break;
      if (n !== lastOpen) log(`${n} jobs still open`);
      lastOpen = n;
      if (Date.now() > settleBy) {
        log(`gave up waiting after ${o.settleTimeoutS} s: ${n} jobs are still open`);
        break;
      }
      if (aborted) return 130;
      await sleepReal(250);
    }

    // -- orderly shutdown, once every process is up (a process still loading has no signal handlers yet)
    await allUp('before shutdown');
    monitoring = false;
    await monitor;
    stopping = true;
    observing = false;
    await observer;
    for (const t of timers) clearTimeout(t);
    timers.clear();
    const shutdownProblems: string[] = [];
    await Promise.all(
      members.map(async (m) => {
        if (!m.alive) return;
        const child = m.child!;
        m.kill('SIGTERM');
        const force = setTimeout(() => {
          shutdownProblems.push(`${m.id} did not exit within 30 s of SIGTERM`);
          child.kill('SIGKILL');
        }, 30_000);
        await m.exited;
        clearTimeout(force);
        if (child.exitCode !== 0 && child.signalCode !== 'SIGKILL') shutdownProblems.push(`${m.id} exited with ${child.signalCode ?? `code ${child.exitCode}`} after SIGTERM`);
      }),
    );
    if (aborted) return 130;

    // -- verify
    const workflows = await store.db.selectFrom('workflows').selectAll().where('user_id', '=', userId).execute();
    const jobs = await store.db.selectFrom('jobs').selectAll().execute();
    const result = verify({ workflows, jobs, killEnd, tickMs, samples, maxAttempts });
    const violations = [
      ...(workflows.length === o.workflows ? [] : [`seeded ${o.workflows} workflows but found ${workflows.length}`]),
      ...unexpected.map((u) => `process ${u.name} exited on its own (${u.signal ?? `code ${u.code}`})`),
      ...shutdownProblems,
      ...result.violations,
    ];

    const byStatus = new Map<string, number>();
    const byReason = new Map<string, number>();
    let retried = 0;
    let extraAttempts = 0;
    let maxSeen = 0;
    for (const j of jobs) {
      byStatus.set(j.status, (byStatus.get(j.status) ?? 0) + 1);
      if (j.status_reason_code) byReason.set(j.status_reason_code, (byReason.get(j.status_reason_code) ?? 0) + 1);
      if (j.attempts > 1) {
        retried += 1;
        extraAttempts += j.attempts - 1;
      }
      maxSeen = Math.max(maxSeen, j.attempts);
    }
    const fmtMap = (m: Map<string, number>) => [...m].sort().map(([k, v]) => `${k} ${v}`).join(', ') || 'none';
    const clockMinutes = (killEnd - origin) / 60_000;
    const errorLines = countErrorLines(logDir);
    console.log('');
    console.log('== chaos summary');
    console.log(`workflows      ${workflows.length} × ${INTERVAL_MINUTES} min, ${o.schedulers} schedulers, ${o.runners} runners, speed ${o.speed}`);
    console.log(`time           ${((Date.now() - killStart) / 1000).toFixed(0)} s real; killing phase ${o.durationS} s real = ${clockMinutes.toFixed(1)} min clock`);
    console.log(`kills          ${stats.leaderKills} leaders, ${stats.runnerKills} runners in ${stats.rounds} rounds (${stats.noLeader} found no live leader, ${stats.skipped} kills skipped while a restarted process was still starting); ${tokens.size} leadership terms`);
    console.log(`jobs           ${jobs.length}: ${fmtMap(byStatus)}`);
    console.log(`reasons        ${fmtMap(byReason)}`);
    console.log(`retries        ${retried} jobs took more than one attempt (${extraAttempts} extra attempts, at most ${maxSeen})`);
    console.log(`target         ${target.requests} requests, ${target.failures} answered 500`);
    console.log(`slots checked  ${result.checkedSlots} due slots up to ${iso(killEnd - INTERVAL_MS)} had exactly one job`);
    console.log(`explained skips ${result.explained.length}`);
    for (const e of result.explained) console.log(`  - ${e}`);
    console.log(`process logs   ${errorLines} error lines (LOG_LEVEL=${o.logLevel})`);
    console.log(`checks         (a) one job per slot, (b) all terminal, (c) no overlap, (d) no misses, (e) attempts ≤ ${maxAttempts}`);
    if (violations.length) {
      keepLogs = true;
      console.log(`VIOLATIONS     ${violations.length}`);
      for (const v of violations) console.log(`  - ${v}`);
      return 1;
    }
    console.log('result         PASS');
    return 0;
  } catch (err) {
    if (aborted) return 130; // the signal handler cleans up; errors from closed connections are expected
    keepLogs = true;
    console.error('chaos harness failed:', err instanceof Error ? (err.stack ?? err.message) : err);
    return 2;
  } finally {
    if (!aborted) await cleanup();
  }
}

/** Lines at pino level error (50) or fatal (60) in the processes' logs. */
function countErrorLines(dir: string): number {
  let n = 0;
  for (const f of fs.readdirSync(dir)) {
    for (const line of fs.readFileSync(path.join(dir, f), 'utf8').split('\n')) if (/"level":(50|60)\b/.test(line)) n += 1;
  }
  return n;
}

main(process.argv.slice(2)).then(
  (code) => {
    if (!aborted) process.exit(code);
  },
  (err: unknown) => {
    console.error('chaos harness failed:', err);
    process.exit(2);
  },
);
