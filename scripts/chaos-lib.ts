// Shared pieces of the multi-process harnesses on real PostgreSQL and RabbitMQ
// (docs/chaos.md): scripts/chaos.ts SIGKILLs schedulers and runners,
// scripts/restart.ts restarts the broker and the database. Both start orloj
// processes on one accelerated clock, seed one-minute HEARTBEAT workflows
// against a local HTTP target, settle, and verify the guarantees from the
// database with verify() below.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import amqp, { type Channel, type ChannelModel } from 'amqplib';
import pg from 'pg';
import {
  DEAD_LETTER_SUFFIX,
  newId,
  openDatabase,
  parsePayload,
  QUEUES,
  Store,
  TERMINAL_JOB_STATUSES,
  TOPICS,
  type Clock,
  type DatabaseHandle,
  type JobsTable,
  type Selectable,
  type Workflow,
  type WorkflowsTable,
} from '@orloj/common';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const BIN = path.join(ROOT, 'server/src/bin.ts');
export const INTERVAL_MINUTES = 1;
export const INTERVAL_MS = INTERVAL_MINUTES * 60_000;

export const sleepReal = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export const iso = (ms: number) => new Date(ms).toISOString().replace('T', ' ').replace('Z', '');

// ---- orloj processes --------------------------------------------------------------

/** `combined` runs `--roles api,scheduler,runners` in one process. */
export type Role = 'scheduler' | 'runners' | 'combined';

const ROLE_ARGS: Record<Role, string> = { scheduler: 'scheduler', runners: 'runners', combined: 'api,scheduler,runners' };
const ROLE_NAMES: Record<Role, string> = { scheduler: 'scheduler', runners: 'runner', combined: 'combined' };

export interface Incident {
  name: string;
  code: number | null;
  signal: string | null;
}

/** One replica slot (scheduler-2, runner-1…): a process, restarted under a new incarnation after each kill. */
export class Member {
  child: ChildProcess | undefined;
  /** The SCHEDULER_ID of a scheduler or combined process, the RUNNER_ID of a runner. */
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
    private readonly idPrefix = 'chaos-',
  ) {}

  get name(): string {
    return `${ROLE_NAMES[this.role]}-${this.index}`;
  }

  /** Consumes the job-events queue (a scheduler replica). */
  get schedules(): boolean {
    return this.role !== 'runners';
  }

  /** Consumes the jobs queue (a runner). */
  get runs(): boolean {
    return this.role !== 'scheduler';
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
    this.id = this.role === 'runners' ? `${this.idPrefix}${this.name}` : `${this.idPrefix}${this.name}.${this.incarnation}`;
    const idEnv: Record<string, string> =
      this.role === 'scheduler'
        ? { SCHEDULER_ID: this.id }
        : this.role === 'runners'
          ? { RUNNER_ID: this.id }
          : { SCHEDULER_ID: this.id, RUNNER_ID: `${this.idPrefix}${this.name}`, PORT: '0' };
    const child = spawn(process.execPath, ['--import', 'tsx', '--conditions=orloj-src', BIN, 'start', '--roles', ROLE_ARGS[this.role]], {
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

/** The environment every orloj process of a run gets (ids and PORT are added per process). */
export function processEnv(o: {
  dbUrl: string;
  amqpUrl: string;
  prefix: string;
  dataDir: string;
  origin: number;
  speed: number;
  logLevel: string;
  jobLeaseTtl: string;
  tick: string;
  queueTimeout: string;
  runnerConcurrency: number;
}): Record<string, string> {
  return {
    PATH: process.env.PATH ?? '',
    HOME: process.env.HOME ?? os.homedir(),
    DATABASE_URL: o.dbUrl,
    DB_POOL_SIZE: '4',
    BUS_URL: o.amqpUrl,
    BUS_PREFIX: o.prefix,
    DATA_DIR: o.dataDir,
    SESSION_SECRET: crypto.randomBytes(32).toString('hex'),
    CSRF_HMAC_SECRET: crypto.randomBytes(32).toString('hex'),
    ORLOJ_CLOCK: `accelerated:${o.origin}:${o.speed}`,
    LOG_LEVEL: o.logLevel,
    JOB_LEASE_TTL: o.jobLeaseTtl,
    SCHEDULER_TICK: o.tick,
    JOB_QUEUE_TIMEOUT: o.queueTimeout,
    RUNNER_ALLOW_TARGETS: '127.0.0.0/8',
    RUNNER_CONCURRENCY: String(o.runnerConcurrency),
    RUNNER_SHUTDOWN_GRACE: '30s',
  };
}

/**
 * SIGTERMs every live member and waits for it (SIGKILL after 30 s); returns
 * the problems: a process that did not exit in time or exited non-zero.
 */
export async function stopMembers(members: readonly Member[]): Promise<string[]> {
  const problems: string[] = [];
  await Promise.all(
    members.map(async (m) => {
      if (!m.alive) return;
      const child = m.child!;
      m.kill('SIGTERM');
      const force = setTimeout(() => {
        problems.push(`${m.id} did not exit within 30 s of SIGTERM`);
        child.kill('SIGKILL');
      }, 30_000);
      await m.exited;
      clearTimeout(force);
      if (child.exitCode !== 0 && child.signalCode !== 'SIGKILL') problems.push(`${m.id} exited with ${child.signalCode ?? `code ${child.exitCode}`} after SIGTERM`);
    }),
  );
  return problems;
}

/** Lines at pino level error (50) or fatal (60) in the processes' logs. */
export function countErrorLines(dir: string): number {
  let n = 0;
  for (const f of fs.readdirSync(dir)) {
    for (const line of fs.readFileSync(path.join(dir, f), 'utf8').split('\n')) if (/"level":(50|60)\b/.test(line)) n += 1;
  }
  return n;
}

// ---- the local HTTP target ----------------------------------------------------------

export interface Target {
  url: string;
  requests: number;
  failures: number;
  close(): Promise<void>;
}

/**
 * Answers 200, or 500 at failRate; after delayMs real time on average
 * (uniform from half to one and a half times it), so jobs stay RUNNING a while.
 */
export async function startTarget(failRate: number, delayMs = 0): Promise<Target> {
  const target: Target = { url: '', requests: 0, failures: 0, close: async () => undefined };
  const server = http.createServer((req, res) => {
    target.requests += 1;
    req.resume();
    const fail = Math.random() < failRate;
    if (fail) target.failures += 1;
    const answer = () => {
      res.writeHead(fail ? 500 : 200, { 'content-type': 'text/plain' });
      res.end(fail ? 'chaos says no\n' : 'ok\n');
    };
    if (delayMs > 0) setTimeout(answer, delayMs * (0.5 + Math.random()));
    else answer();
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

// ---- database -------------------------------------------------------------------------

/** Creates `schema` in the database at baseDbUrl; returns a URL that selects it (for the orloj processes too). */
export async function createSchema(baseDbUrl: string, schema: string): Promise<string> {
  const admin = new pg.Client({ connectionString: baseDbUrl });
  await admin.connect();
  try {
    await admin.query(`create schema ${schema}`);
  } finally {
    await admin.end();
  }
  const dbUrl = new URL(baseDbUrl);
  dbUrl.searchParams.set('options', `-c search_path=${schema}`);
  return dbUrl.toString();
}

export async function dropSchema(baseDbUrl: string, schema: string): Promise<void> {
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

export async function openHarnessStore(dbUrl: string): Promise<{ database: DatabaseHandle; store: Store }> {
  const database = openDatabase(dbUrl, { poolSize: 4 });
  await database.migrate();
  return { database, store: Store.fromHandle(database) };
}

/**
 * Inserts `count` HEARTBEAT workflows (`build_status = QUEUED`, the leader
 * builds them) in ten batches spread over `spreadMs` real time, so their
 * slots are spread too. max_consecutive_job_failures_allowed is 100: the
 * target's occasional 500s never terminate a workflow.
 */
export async function seedWorkflows(o: {
  store: Store;
  clock: Clock;
  userId: string;
  targetUrl: string;
  count: number;
  spreadMs: number;
  namePrefix: string;
  stopped: () => boolean;
}): Promise<void> {
  const batches = Math.min(10, o.count);
  for (let b = 0; b < batches && !o.stopped(); b++) {
    const from = Math.floor((b * o.count) / batches);
    const to = Math.floor(((b + 1) * o.count) / batches);
    await o.store.transaction(async (tx) => {
      for (let i = from; i < to; i++) {
        const now = o.clock.now();
        const payload = JSON.stringify({ endpoint: `${o.targetUrl}/w/${i}`, method: 'GET', expected_status_code: 200, timeout: '30s' });
        if (!parsePayload('HEARTBEAT', payload).ok) throw new Error(`seed payload is invalid: ${payload}`);
        const w: Workflow = {
          id: newId(),
          userId: o.userId,
          name: `${o.namePrefix} ${i}`,
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
    await sleepReal(o.spreadMs / batches);
  }
}

/**
 * Waits until every live workflow's schedule has moved past `until` (clock
 * time, described as `what` in the log); false when it gave up after timeoutMs.
 */
export async function waitSchedulesPast(
  store: Store,
  until: number,
  what: string,
  timeoutMs: number,
  log: (m: string) => void,
  stopped: () => boolean,
): Promise<boolean> {
  const by = Date.now() + timeoutMs;
  for (;;) {
    const behind = await store.db
      .selectFrom('workflows')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where((eb) => eb.or([eb('next_due_at', 'is', null), eb('next_due_at', '<=', until)]))
      .where('terminated_at', 'is', null)
      .executeTakeFirstOrThrow();
    if (Number(behind.n) === 0) return true;
    if (Date.now() > by) {
      log(`${behind.n} workflows have not moved past ${what}; checking anyway`);
      return false;
    }
    if (stopped()) return false;
    await sleepReal(200);
  }
}

/**
 * Freezes the schedules (no new slot comes due): a leader tick in flight may
 * write next_due_at back once, so repeat until two passes find nothing.
 */
export async function freezeSchedules(store: Store, pauseMs: number): Promise<void> {
  for (let quiet = 0; quiet < 2; ) {
    const r = await store.db.updateTable('workflows').set({ next_due_at: null }).where('next_due_at', 'is not', null).executeTakeFirst();
    quiet = Number(r.numUpdatedRows) === 0 ? quiet + 1 : 0;
    await sleepReal(pauseMs);
  }
}

/** Waits until no job is PENDING, QUEUED or RUNNING; returns how many still are (0: all ended). */
export async function waitJobsEnded(store: Store, timeoutS: number, log: (m: string) => void, stopped: () => boolean): Promise<number> {
  const settleBy = Date.now() + timeoutS * 1000;
  let lastOpen = -1;
  for (;;) {
    const open = await store.db
      .selectFrom('jobs')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('status', 'in', ['PENDING', 'QUEUED', 'RUNNING'])
      .executeTakeFirstOrThrow();
    const n = Number(open.n);
    if (n === 0) return 0;
    if (n !== lastOpen) log(`${n} jobs still open`);
    lastOpen = n;
    if (Date.now() > settleBy) {
      log(`gave up waiting after ${timeoutS} s: ${n} jobs are still open`);
      return n;
    }
    if (stopped()) return n;
    await sleepReal(250);
  }
}

// ---- leadership observations -----------------------------------------------------------

export interface LeaderSample {
  /** clock time of the observation */
  at: number;
  holder: string | undefined;
  token: number | undefined;
  /** the lease is unexpired and its holder's process is alive */
  live: boolean;
  /** the harness could not read the lease: the database was down (scripts/restart.ts records these; chaos.ts does not) */
  unreachable?: boolean;
}

// ---- verification -------------------------------------------------------------------

export type JobRow = Selectable<JobsTable>;
export type WorkflowRow = Selectable<WorkflowsTable>;

export interface Verification {
  violations: string[];
  explained: string[];
  checkedSlots: number;
}

/**
 * The checks of docs/chaos.md: (a) one job per slot, (b) all terminal, (c)
 * no overlap, (d) no misses up to one interval before `killEnd` beyond what
 * the most-recent-missed-slot rule explains, (e) attempts ≤ maxAttempts.
 */
export function verify(input: {
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
          const down = seen.filter((s) => s.unreachable).length;
          add(
            explained,
            `${where}: no live scheduler leader from ${iso(from)} to ${iso(windowEnd)}${down > 0 ? ` (the database was unreachable in ${down}/${seen.length} observations)` : ''}; the next job ran for slot ${iso(next.slot_at)}`,
          );
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

/** Counts for the summary: jobs by status and reason, retries. */
export function summarizeJobs(jobs: readonly JobRow[]): { byStatus: string; byReason: string; retried: number; extraAttempts: number; maxSeen: number } {
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
  return { byStatus: fmtMap(byStatus), byReason: fmtMap(byReason), retried, extraAttempts, maxSeen };
}

// ---- readiness ------------------------------------------------------------------

export interface QueueProbe {
  /** Consumers attached to the queue; 0 when it is not declared (or the broker is unreachable). */
  count(queue: string): Promise<number>;
  /** Ready messages in the queue; 0 when it is not declared (or the broker is unreachable). */
  depth(queue: string): Promise<number>;
  /** Ready messages, or undefined when the queue does not exist or the broker cannot be asked. */
  messages(queue: string): Promise<number | undefined>;
  close(): Promise<void>;
}

/**
 * Consumers attached to a queue: every runner consumes QUEUES.jobs and every
 * scheduler QUEUES.jobEvents, so the counts tell when all processes are up
 * (their signal handlers are installed by then, and a SIGKILLed process's
 * consumer goes away with its connection). A lost connection (a broker
 * restart) is opened again on the next check.
 */
export async function openConsumerCounter(amqpUrl: string): Promise<QueueProbe> {
  const connect = async () => {
    const c = await amqp.connect(amqpUrl);
    c.on('error', () => {});
    c.on('close', () => {
      if (conn === c) {
        conn = undefined;
        channel = undefined;
      }
    });
    return c;
  };
  let conn: ChannelModel | undefined = await connect();
  let channel: Channel | undefined;
  let closed = false;
  const check = async (queue: string) => {
    try {
      conn ??= await connect();
      if (!channel) {
        channel = await conn.createChannel();
        channel.on('error', () => {});
      }
      return await channel.checkQueue(queue);
    } catch {
      channel = undefined; // not declared yet: the failed check closed the channel
      return undefined;
    }
  };
  return {
    count: async (queue) => (await check(queue))?.consumerCount ?? 0,
    depth: async (queue) => (await check(queue))?.messageCount ?? 0,
    messages: async (queue) => (closed ? undefined : (await check(queue))?.messageCount),
    close: async () => {
      closed = true;
      const c = conn;
      conn = undefined;
      await c?.close().catch(() => undefined);
    },
  };
}

// ---- cleanup -------------------------------------------------------------------

export async function deleteBusNames(amqpUrl: string, prefix: string): Promise<number> {
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
