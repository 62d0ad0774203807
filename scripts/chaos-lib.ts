// Shared pieces of the multi-process harnesses on real PostgreSQL and RabbitMQ
// (docs/chaos.md): scripts/chaos.ts SIGKILLs schedulers and runners,
// scripts/restart.ts restarts the broker and the database. Both start orloj
// processes on one accelerated clock, seed one-minute HEARTBEAT workflows
// against a local HTTP target, settle, and verify the guarantees from the
// database with verify() below. HarnessRun is the frame of one such run: its
// names, services, processes, leader observer, cleanup and signal handling;
// each script adds its own disruption and its own report.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import amqp, { type Channel, type ChannelModel } from 'amqplib';
import pg from 'pg';
import { AcceleratedClock, newId, type Clock } from '@orloj/common/core';
import { newWorkflow, parseDuration, parsePayload, TERMINAL_JOB_STATUSES } from '@orloj/common/domain';
import { QUEUES, TOPICS } from '@orloj/common/messages';
import { ensureKeyDir } from '@orloj/common/envelope';
import { DEAD_LETTER_SUFFIX } from '@orloj/common/bus';
import { openDatabase, Store, type DatabaseHandle, type JobsTable, type Selectable, type WorkflowsTable } from '@orloj/common/store';
import { DEFAULT_SCHEDULER_CONFIG, LEADER_LEASE, replicaOfHolder } from '@orloj/scheduler';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const BIN = path.join(ROOT, 'server/src/bin.ts');
export const INTERVAL_MINUTES = 1;
export const INTERVAL_MS = INTERVAL_MINUTES * 60_000;

export const sleepReal = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export const iso = (ms: number) => new Date(ms).toISOString().replace('T', ' ').replace('Z', '');

// ---- options both harnesses take ------------------------------------------------------

export class UsageError extends Error {}

/** parseArgs declarations of the options both scripts take, with the same defaults (each script adds its own). */
export const SHARED_OPTION_ARGS = {
  'job-lease-ttl': { type: 'string', default: '15s' },
  tick: { type: 'string', default: '1s' },
  'queue-timeout': { type: 'string', default: '10m' },
  'runner-concurrency': { type: 'string', default: '8' },
  'settle-timeout': { type: 'string', default: '120' },
  'log-level': { type: 'string', default: 'warn' },
  keep: { type: 'boolean', default: false },
  verbose: { type: 'boolean', short: 'v', default: false },
  help: { type: 'boolean', short: 'h', default: false },
} as const;

export interface SharedOptions {
  jobLeaseTtl: string;
  tick: string;
  queueTimeout: string;
  runnerConcurrency: number;
  settleTimeoutS: number;
  logLevel: string;
  keep: boolean;
  verbose: boolean;
}

/** A number option of parseArgs values, within [min, max]. */
export function numberOption(values: Record<string, unknown>, name: string, min: number, max: number): number {
  const n = Number(values[name]);
  if (!Number.isFinite(n) || n < min || n > max) throw new UsageError(`--${name} must be a number from ${min} to ${max} (got "${String(values[name])}")`);
  return n;
}

/** The options of SHARED_OPTION_ARGS, checked. */
export function readSharedOptions(values: {
  'job-lease-ttl': string;
  tick: string;
  'queue-timeout': string;
  'runner-concurrency': string;
  'settle-timeout': string;
  'log-level': string;
  keep: boolean;
  verbose: boolean;
}): SharedOptions {
  const duration = (name: 'job-lease-ttl' | 'tick' | 'queue-timeout'): string => {
    if (parseDuration(values[name]) === undefined) throw new UsageError(`--${name} must be a duration such as 15s (got "${values[name]}")`);
    return values[name];
  };
  return {
    jobLeaseTtl: duration('job-lease-ttl'),
    tick: duration('tick'),
    queueTimeout: duration('queue-timeout'),
    runnerConcurrency: Math.floor(numberOption(values, 'runner-concurrency', 1, 1_024)),
    settleTimeoutS: numberOption(values, 'settle-timeout', 1, 86_400),
    logLevel: values['log-level'],
    keep: values.keep,
    verbose: values.verbose,
  };
}

/**
 * A script's options, or the exit code when there is nothing to run: --help
 * (`read` returns undefined) prints `help` (0); a bad option prints what is
 * wrong and then `help` (2).
 */
export function readOptionsOrExitCode<O>(argv: string[], help: string, read: (argv: string[]) => O | undefined): O | number {
  let options: O | undefined;
  try {
    options = read(argv);
  } catch (err) {
    console.error(`${err instanceof Error ? err.message : String(err)}\n\n${help}`);
    return 2;
  }
  if (options === undefined) {
    process.stdout.write(help);
    return 0;
  }
  return options;
}

/** Exits the process with the code `main` comes to; 2 when it throws. */
export function exitWith(name: string, main: Promise<number>): void {
  main.then(
    (code) => process.exit(code),
    (err: unknown) => {
      console.error(`${name} harness failed:`, err);
      process.exit(2);
    },
  );
}

// ---- one run -------------------------------------------------------------------------

/** The database and the broker of a run: TEST_DATABASE_URL and TEST_AMQP_URL, or the local defaults. */
export function serviceUrls(): { baseDbUrl: string; amqpUrl: string } {
  return {
    baseDbUrl: process.env.TEST_DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/orloj_test',
    amqpUrl: process.env.TEST_AMQP_URL || 'amqp://guest:guest@127.0.0.1:5672',
  };
}

/** What a run needs of its script's options. */
export interface RunOptions extends SharedOptions {
  workflows: number;
  speed: number;
  failRate: number;
  /** real milliseconds the target takes to answer, on average (0) */
  targetDelayMs?: number;
}

/** What differs between the scripts' runs. */
export interface RunConfig {
  /** 'chaos' or 'restart': the log prefix; the schema, bus prefix, work directory and process ids carry it too. */
  name: string;
  options: RunOptions;
  /**
   * The processes are never restarted, and one may exit on its own (restart.ts):
   * allUp() then expects only the live ones (an error when none of a role is
   * left); the exit still counts as a violation at the end. Otherwise every
   * process must be up.
   */
  toleratesExits?: boolean;
  /**
   * The database goes down on purpose (restart.ts): the leader observer records
   * a failed read as an unreachable sample. Otherwise it skips it (the database
   * was only busy).
   */
  recordsUnreachable?: boolean;
  /**
   * The first step of the cleanup once every orloj process is dead (restart.ts:
   * bring the services back; the schema and the queues need them, and so does
   * whoever uses them next). Must not throw.
   */
  restoreServices?: () => Promise<void>;
  /**
   * The processes are `embedded` members (chaos.ts --topology embedded): no
   * BUS_URL, so each process has its in-process bus and RabbitMQ is not used;
   * a process counts as up once it has printed "orloj is running".
   */
  embedded?: boolean;
}

/**
 * One harness run: a schema and a bus prefix of its own, a work directory with
 * the processes' logs, the local target, an accelerated clock, the orloj
 * processes (members) and a leader observer. execute() opens the services,
 * runs the script's body, and cleans up exactly once, whatever happens:
 * SIGINT or SIGTERM kill every process and clean up (a second signal exits at
 * once), and no child outlives the harness.
 *
 * The body's order: launch(), waitStarted(), seed() and the script's own
 * disruption, settle(), shutdown(), check(), the script's report, verdict().
 * After each wait, `if (run.aborted) return 130`: a signal's cleanup is under way.
 */
export class HarnessRun {
  readonly name: string;
  readonly o: RunOptions;
  readonly baseDbUrl: string;
  readonly amqpUrl: string;
  readonly tag = crypto.randomBytes(5).toString('hex');
  readonly schema: string;
  /** BUS_PREFIX of the run's queues and exchanges */
  readonly prefix: string;
  readonly tickMs: number;
  readonly maxAttempts = DEFAULT_SCHEDULER_CONFIG.maxAttempts;
  /** one workflow interval in real milliseconds */
  readonly realIntervalMs: number;
  readonly workDir: string;
  readonly dataDir: string;
  /** one log file per member: `<name>.log`, every incarnation appended */
  readonly logDir: string;

  readonly members: Member[] = [];
  /** Processes that exited without being told to: each one is a violation. */
  readonly unexpected: Incident[] = [];
  /** The leader lease every 100 ms (real), from launch() to shutdown(). */
  readonly samples: LeaderSample[] = [];
  /** Keep the logs after the cleanup: --keep, a failed check, a harness failure. */
  keepLogs: boolean;

  // Set by execute() before the body runs (open()) and by launch().
  store!: Store;
  clock!: AcceleratedClock;
  /** Date.now() when the clock started, which is also its clock time then. */
  origin = 0;
  /** The owner of the seeded workflows. */
  userId = '';
  target!: Target;
  consumers!: QueueProbe;

  private readonly config: RunConfig;
  private env: Record<string, string> = {};
  private database: DatabaseHandle | undefined;
  private schemaCreated = false;
  private busUsed = false;
  private signalled = false;
  /** shutdown() has begun: nothing is started again. */
  private stopping = false;
  private readonly restartTimers = new Set<NodeJS.Timeout>();
  private observing = true;
  private observer: Promise<void> = Promise.resolve();
  private monitoring = false;
  private monitor: Promise<void> = Promise.resolve();
  private cleaning: Promise<void> | undefined;
  private onUnexpectedExit: (incident: Incident, m: Member) => void = () => undefined;

  constructor(config: RunConfig) {
    this.config = config;
    this.name = config.name;
    this.o = config.options;
    ({ baseDbUrl: this.baseDbUrl, amqpUrl: this.amqpUrl } = serviceUrls());
    this.schema = `orloj_${this.name}_${this.tag}`;
    this.prefix = `orloj-${this.name}-${this.tag}.`;
    this.tickMs = parseDuration(this.o.tick)!;
    this.realIntervalMs = INTERVAL_MS / this.o.speed;
    this.keepLogs = this.o.keep;
    this.workDir = fs.mkdtempSync(path.join(os.tmpdir(), `orloj-${this.name}-`));
    this.dataDir = path.join(this.workDir, 'data');
    this.logDir = path.join(this.workDir, 'logs');
    fs.mkdirSync(this.logDir, { recursive: true });
  }

  /** A signal came: the cleanup is under way, and the process exits 130 when it is done. */
  get aborted(): boolean {
    return this.signalled;
  }

  log(message: string): void {
    console.log(`[${this.name} ${new Date().toISOString().slice(11, 23)}] ${message}`);
  }

  /**
   * Installs the signal handlers, opens the services, runs `body` and cleans
   * up; resolves to the exit code: body's, 2 when the harness itself failed
   * (the logs are kept), 130 after a signal.
   */
  async execute(body: () => Promise<number>): Promise<number> {
    process.on('SIGINT', (signal) => this.abort(signal));
    process.on('SIGTERM', (signal) => this.abort(signal));
    // Last resort (an uncaught error, process.exit elsewhere): no child outlives us.
    process.on('exit', () => {
      for (const m of this.members) if (m.alive) m.child!.kill('SIGKILL');
    });
    let code: number;
    try {
      await this.open();
      code = await body();
    } catch (err) {
      code = 2;
      // After a signal, errors from closed connections are expected.
      if (!this.aborted) {
        this.keepLogs = true;
        console.error(`${this.name} harness failed:`, err instanceof Error ? (err.stack ?? err.message) : err);
      }
    }
    await this.cleanup(); // after a signal: the cleanup the signal started
    return this.aborted ? 130 : code;
  }

  /** What SIGINT and SIGTERM do; public for a script's own reasons to stop (restart.ts: the parent went away). */
  abort(signal: NodeJS.Signals): void {
    if (this.signalled) {
      for (const m of this.members) m.kill('SIGKILL');
      process.exit(130);
    }
    this.signalled = true;
    const restoring = this.config.restoreServices ? ', bringing the services back' : '';
    this.log(`${signal}: killing every orloj process${restoring} and cleaning up (send again to exit at once)`);
    void this.cleanup().finally(() => process.exit(130));
  }

  /** Runs once: on the normal path, on failure, and on a signal. */
  private cleanup(): Promise<void> {
    return (this.cleaning ??= this.cleanUpOnce());
  }

  private async cleanUpOnce(): Promise<void> {
    for (const t of this.restartTimers) clearTimeout(t);
    for (const m of this.members) m.kill('SIGKILL');
    await Promise.all(this.members.map((m) => m.exited));
    await this.config.restoreServices?.();
    // target and consumers are unset when the run failed before opening them
    await this.target?.close().catch(() => undefined);
    await this.consumers?.close();
    await this.database?.close().catch(() => undefined);
    if (this.o.keep) {
      this.log(`kept: schema ${this.schema}, bus prefix ${this.prefix}, logs in ${this.logDir}`);
      return;
    }
    if (this.schemaCreated) await dropSchema(this.baseDbUrl, this.schema);
    if (this.busUsed) {
      try {
        await deleteBusNames(this.amqpUrl, this.prefix);
      } catch (err) {
        console.error(`could not delete the queues under ${this.prefix}:`, err instanceof Error ? err.message : err);
      }
    }
    if (this.keepLogs) this.log(`logs of the orloj processes: ${this.logDir}`);
    else fs.rmSync(this.workDir, { recursive: true, force: true });
  }

  /** The schema and store, the target, the key directory, the clock and the seeding user. */
  private async open(): Promise<void> {
    const dbUrl = await createSchema(this.baseDbUrl, this.schema);
    this.schemaCreated = true;
    const opened = await openHarnessStore(dbUrl);
    this.database = opened.database;
    this.store = opened.store;
    this.busUsed = !this.config.embedded;

    this.target = await startTarget(this.o.failRate, this.o.targetDelayMs);
    await ensureKeyDir(this.dataDir); // once, before any process starts
    this.origin = Date.now();
    this.clock = new AcceleratedClock(this.origin, this.o.speed);

    this.userId = newId();
    const now = this.clock.now();
    await this.store.users.insert({ id: this.userId, email: `${this.name}-${this.tag}@example.test`, passwordHash: 'x', notificationPreference: 'NONE', createdAt: now, updatedAt: now });

    this.env = processEnv({
      dbUrl,
      amqpUrl: this.amqpUrl,
      prefix: this.prefix,
      dataDir: this.dataDir,
      origin: this.origin,
      speed: this.o.speed,
      logLevel: this.o.logLevel,
      jobLeaseTtl: this.o.jobLeaseTtl,
      tick: this.o.tick,
      queueTimeout: this.o.queueTimeout,
      runnerConcurrency: this.o.runnerConcurrency,
    });
    if (this.config.embedded) {
      delete this.env.BUS_URL;
      delete this.env.BUS_PREFIX;
    }
  }

  /**
   * Starts the orloj processes, `plan` giving how many of each role (each
   * role's members numbered from 1), then the leader observer and the consumer
   * counter. An exit nobody asked for is recorded and logged, then handed to
   * `afterUnexpectedExit`.
   */
  async launch(plan: [Role, number][], afterUnexpectedExit?: (m: Member) => void): Promise<void> {
    const onUnexpectedExit = (incident: Incident, m: Member) => {
      this.unexpected.push(incident);
      this.log(`UNEXPECTED: ${incident.name} exited (${incident.signal ?? `code ${incident.code}`}); see ${path.join(this.logDir, m.name + '.log')}`);
      afterUnexpectedExit?.(m);
    };
    this.onUnexpectedExit = onUnexpectedExit;
    for (const [role, n] of plan) for (let i = 1; i <= n; i++) this.members.push(new Member(role, i, this.env, this.logDir, onUnexpectedExit, `${this.name}-`));
    for (const m of this.members) m.start();
    this.observer = this.observeLeader();
    this.consumers = this.config.embedded ? NO_QUEUES : await openConsumerCounter(this.amqpUrl);
  }

  /**
   * A member beyond launch()'s plan, not started yet (chaos.ts: the runner
   * with wrong keys); it is killed with the others on cleanup and SIGTERMed
   * by shutdown() when it is still alive.
   */
  addMember(role: Role, options: MemberOptions): Member {
    const m = new Member(role, 0, this.env, this.logDir, this.onUnexpectedExit, `${this.name}-`, options);
    this.members.push(m);
    return m;
  }

  /** Starts `m` again after delayMs (real), unless the run is aborted or shutting down by then. */
  restartLater(m: Member, delayMs: number): void {
    if (this.aborted || this.stopping) return;
    const t = setTimeout(() => {
      this.restartTimers.delete(t);
      if (!this.aborted && !this.stopping) m.start();
    }, delayMs);
    this.restartTimers.add(t);
  }

  /** The leader lease now; live when it is unexpired and held by a live scheduler of this run. */
  async readLeader(): Promise<LeaderSample> {
    const at = this.clock.now();
    const row = await this.store.db.selectFrom('leases').selectAll().where('name', '=', LEADER_LEASE).executeTakeFirst();
    // The SCHEDULER_ID of the holder (the lease holder adds a per-process suffix).
    const holder = row && row.expires_at > at ? replicaOfHolder(row.holder) : undefined;
    const live = holder !== undefined && this.members.some((m) => m.schedules && m.alive && m.id === holder);
    return { at, holder, token: row?.fencing_token, live };
  }

  private async observeLeader(): Promise<void> {
    while (this.observing) {
      const at = this.clock.now();
      try {
        this.samples.push(await this.readLeader());
      } catch {
        if (this.config.recordsUnreachable) this.samples.push({ at, holder: undefined, token: undefined, live: false, unreachable: true });
        // otherwise the database was busy; the next sample comes soon
      }
      await sleepReal(100);
    }
  }

  /**
   * Consumers attached now (r runners on QUEUES.jobs, s schedulers on
   * QUEUES.jobEvents) against the processes expected (er, es); `all` when
   * every expected process consumes. A SIGKILLed process's consumer goes away
   * with its connection.
   */
  async attached(): Promise<{ r: number; s: number; er: number; es: number; all: boolean }> {
    // A misconfigured member counts only while it is alive (and consumes, which it does until stopped).
    const expected = this.members.filter((m) => !m.misconfigured || m.alive);
    if (this.config.embedded) {
      // No broker to ask: a process is up once it has announced it.
      const [r, s] = [expected.filter((m) => m.runs && m.alive && m.ready).length, expected.filter((m) => m.schedules && m.alive && m.ready).length];
      const [er, es] = [expected.filter((m) => m.runs).length, expected.filter((m) => m.schedules).length];
      return { r, s, er, es, all: r === er && s === es };
    }
    const r = await this.consumers.count(this.prefix + QUEUES.jobs);
    const s = await this.consumers.count(this.prefix + QUEUES.jobEvents);
    if (!this.config.toleratesExits) {
      const [er, es] = [expected.filter((m) => m.runs).length, expected.filter((m) => m.schedules).length];
      return { r, s, er, es, all: r === er && s === es && expected.every((m) => m.alive) };
    }
    // Every live process consumes: one that exited on its own is a violation of its own
    // (reported at the end); the survivors carry on, so the checks still run.
    const [er, es] = [this.members.filter((m) => m.alive && m.runs).length, this.members.filter((m) => m.alive && m.schedules).length];
    if (er === 0 || es === 0) {
      throw new Error(`no live ${er === 0 ? 'runner' : 'scheduler'} left: ${this.unexpected.map((u) => u.name).join(', ')} exited on its own; see ${this.logDir}`);
    }
    return { r, s, er, es, all: r === er && s === es };
  }

  /** Waits up to 60 s (real) until every expected process consumes (see attached()); returns early when aborted. */
  async allUp(what: string): Promise<void> {
    const by = Date.now() + 60_000;
    for (;;) {
      const { r, s, er, es, all } = await this.attached();
      if (all) return;
      if (Date.now() > by) throw new Error(`${what}: ${r}/${er} runners and ${s}/${es} schedulers consume after 60 s; see ${this.logDir}`);
      if (this.aborted) return;
      await sleepReal(100);
    }
  }

  /** Waits until every process consumes and a leader is live; false when aborted meanwhile. */
  async waitStarted(): Promise<boolean> {
    await this.allUp('start');
    const firstLeaderBy = Date.now() + 60_000;
    while (!this.samples.some((s) => s.live)) {
      if (Date.now() > firstLeaderBy) throw new Error(`no scheduler became leader within 60 s; see ${this.logDir}`);
      if (this.aborted) return false;
      await sleepReal(100);
    }
    this.log(`all processes up; leader: ${this.samples.at(-1)!.holder}`);
    return true;
  }

  /** Seeds --workflows workflows spread over one interval, so their slots are spread too. */
  seed(): Promise<void> {
    return seedWorkflows({
      store: this.store,
      clock: this.clock,
      userId: this.userId,
      targetUrl: this.target.url,
      count: this.o.workflows,
      spreadMs: this.realIntervalMs,
      namePrefix: this.name,
      stopped: () => this.aborted,
    });
  }

  /**
   * With --verbose, a progress line every second until shutdown(): the clock,
   * open jobs (or 'database down' while `databaseDown()`), ready messages,
   * and `alive()`, the live processes.
   */
  startMonitor(show: { alive: () => string; databaseDown?: () => boolean }): void {
    this.monitoring = this.o.verbose;
    this.monitor = (async () => {
      while (this.monitoring && !this.aborted) {
        try {
          const depth = this.config.embedded
            ? 'in-process bus'
            : `jobs ${await this.consumers.depth(this.prefix + QUEUES.jobs)}, job-events ${await this.consumers.depth(this.prefix + QUEUES.jobEvents)}`;
          const open = show.databaseDown?.() ? 'database down' : await openJobs(this.store);
          this.log(`clock ${iso(this.clock.now()).slice(11, 19)} open jobs: ${open}; ready messages: ${depth}; alive: ${show.alive()}`);
        } catch {
          // best effort
        }
        await sleepReal(1000);
      }
    })();
  }

  /**
   * After the disruption, which ended at clock time `end`: every process
   * consumes again, every slot up to `end` has been handled, the schedules are
   * frozen (no new slot comes due) and every job has ended, or
   * --settle-timeout passed. `phase` names the disruption in the log. False
   * when aborted meanwhile.
   */
  async settle(end: number, phase: string): Promise<boolean> {
    const log = (m: string) => this.log(m);
    await this.allUp(`after ${phase}`);
    await waitSchedulesPast(this.store, end, `the end of ${phase}`, Math.max(30_000, 5 * this.realIntervalMs), log, () => this.aborted);
    if (this.aborted) return false;
    await freezeSchedules(this.store, Math.max(200, (3 * this.tickMs) / this.o.speed));
    log('schedules frozen; waiting for every job to end');
    await waitJobsEnded(this.store, this.o.settleTimeoutS, log, () => this.aborted);
    return !this.aborted;
  }

  /**
   * The orderly shutdown, once every process is up (a process still loading
   * has no signal handlers yet): the monitor, the observer and pending
   * restarts stop, every process gets SIGTERM. Returns the problems (see
   * stopMembers).
   */
  async shutdown(): Promise<string[]> {
    await this.allUp('before shutdown');
    this.monitoring = false;
    await this.monitor;
    this.stopping = true;
    this.observing = false;
    await this.observer;
    for (const t of this.restartTimers) clearTimeout(t);
    this.restartTimers.clear();
    return stopMembers(this.members);
  }

  /**
   * The run's workflows and jobs, checked by verify() up to clock time `end`,
   * and the run's own violations: a seeded workflow missing, a process that
   * exited on its own, the shutdown's problems.
   */
  async check(end: number, shutdownProblems: string[]): Promise<{ workflows: WorkflowRow[]; jobs: JobRow[]; result: Verification; runViolations: string[] }> {
    const workflows = await this.store.db.selectFrom('workflows').selectAll().where('user_id', '=', this.userId).execute();
    const jobs = await this.store.db.selectFrom('jobs').selectAll().execute();
    const result = verify({ workflows, jobs, killEnd: end, tickMs: this.tickMs, samples: this.samples, maxAttempts: this.maxAttempts });
    const runViolations = [
      ...(workflows.length === this.o.workflows ? [] : [`seeded ${this.o.workflows} workflows but found ${workflows.length}`]),
      ...this.unexpected.map((u) => `process ${u.name} exited on its own (${u.signal ?? `code ${u.code}`})`),
      ...shutdownProblems,
    ];
    return { workflows, jobs, result, runViolations };
  }

  /** The last lines of the report; the exit code: 0 PASS, 1 violations (the logs are kept). */
  verdict(violations: string[]): number {
    if (violations.length) {
      this.keepLogs = true;
      console.log(`VIOLATIONS     ${violations.length}`);
      for (const v of violations) console.log(`  - ${v}`);
      return 1;
    }
    console.log('result         PASS');
    return 0;
  }
}

/** Open jobs by status, e.g. `QUEUED 3, RUNNING 5`, or `none`. */
export async function openJobs(store: Store): Promise<string> {
  const rows = await store.db
    .selectFrom('jobs')
    .select(['status', (eb) => eb.fn.countAll<number>().as('n')])
    .where('status', 'in', ['PENDING', 'QUEUED', 'RUNNING'])
    .groupBy('status')
    .execute();
  return rows.map((r) => `${r.status} ${r.n}`).join(', ') || 'none';
}

// ---- orloj processes --------------------------------------------------------------

/**
 * `combined` runs `--roles api,scheduler,runners` in one process; `embedded`
 * is `orloj start` without `--roles` (every role) and without BUS_URL: the
 * in-process bus of the default installation.
 */
export type Role = 'scheduler' | 'runners' | 'combined' | 'embedded';

const ROLE_ARGS: Record<Role, string[]> = {
  scheduler: ['--roles', 'scheduler'],
  runners: ['--roles', 'runners'],
  combined: ['--roles', 'api,scheduler,runners'],
  embedded: [],
};
const ROLE_NAMES: Record<Role, string> = { scheduler: 'scheduler', runners: 'runner', combined: 'combined', embedded: 'embedded' };

/** What sets one member apart from the others of its role. */
export interface MemberOptions {
  /** the log file's and the id's name instead of `<role>-<index>` */
  name?: string;
  /** added to (or, as undefined, removed from) the run's environment */
  env?: Record<string, string | undefined>;
  /**
   * Misconfigured on purpose (chaos.ts: a runner with wrong keys): expected to
   * consume only while it is alive (allUp() does not wait for it once it has
   * been stopped), and the script never restarts it.
   */
  misconfigured?: boolean;
}

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
  /** The latest incarnation has printed "orloj is running": it serves, schedules and runs. */
  ready = false;
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
    private readonly options: MemberOptions = {},
  ) {}

  get name(): string {
    return this.options.name ?? `${ROLE_NAMES[this.role]}-${this.index}`;
  }

  get misconfigured(): boolean {
    return this.options.misconfigured === true;
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
    this.ready = false;
    // Schedulers get a new id per incarnation (the default id carries the pid);
    // runner ids stay stable across restarts, as docs/operations.md asks.
    this.id = this.role === 'runners' ? `${this.idPrefix}${this.name}` : `${this.idPrefix}${this.name}.${this.incarnation}`;
    const idEnv: Record<string, string> =
      this.role === 'scheduler'
        ? { SCHEDULER_ID: this.id }
        : this.role === 'runners'
          ? { RUNNER_ID: this.id }
          : { SCHEDULER_ID: this.id, RUNNER_ID: `${this.idPrefix}${this.name}`, PORT: '0' };
    const env: Record<string, string> = { ...this.env, ...idEnv };
    for (const [k, v] of Object.entries(this.options.env ?? {})) {
      if (v === undefined) delete env[k];
      else env[k] = v;
    }
    const child = spawn(process.execPath, ['--import', 'tsx', '--conditions=orloj-src', BIN, 'start', ...ROLE_ARGS[this.role]], {
      cwd: ROOT,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const out = fs.createWriteStream(path.join(this.logDir, `${this.name}.log`), { flags: 'a' });
    out.write(`--- ${this.id} (incarnation ${this.incarnation}) pid ${child.pid} at ${new Date().toISOString()}\n`);
    child.stdout!.pipe(out, { end: false });
    child.stderr!.pipe(out, { end: false });
    // bin.ts announces readiness at info level whatever LOG_LEVEL is; a line may arrive in pieces.
    let tail = '';
    child.stdout!.on('data', (d: Buffer) => {
      if (this.ready || this.child !== child) return;
      tail = (tail + d.toString()).slice(-4096);
      if (tail.includes('orloj is running')) this.ready = true;
    });
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
    // Many processes on one host: each takes a free port for its probes and metrics.
    OPS_PORT: '0',
    // Chaos and restart runs measure recovery of one user's many workflows, not fairness between users.
    MAX_ACTIVE_JOBS_PER_USER: '1000000',
    MAX_WORKFLOWS_PER_USER: '10000000',
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
        const payload = JSON.stringify({ endpoint: `${o.targetUrl}/w/${i}`, method: 'GET', expected_status_code: 200, timeout: '30s' });
        if (!parsePayload('HEARTBEAT', payload).ok) throw new Error(`seed payload is invalid: ${payload}`);
        const w = newWorkflow(
          {
            userId: o.userId,
            name: `${o.namePrefix} ${i}`,
            kind: 'HEARTBEAT',
            payload,
            intervalMinutes: INTERVAL_MINUTES,
            // occasional 500s must never terminate a workflow: its slots would stop
            maxConsecutiveJobFailuresAllowed: 100,
          },
          o.clock.now(),
        );
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
    try {
      const r = await store.db.updateTable('workflows').set({ next_due_at: null }).where('next_due_at', 'is not', null).executeTakeFirst();
      quiet = Number(r.numUpdatedRows) === 0 ? quiet + 1 : 0;
    } catch (err) {
      // This sweep over every workflow and the leader's own updates can lock rows in opposite orders.
      if ((err as { code?: unknown }).code !== '40P01') throw err;
      quiet = 0;
    }
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

/** The QueueProbe of a run without a broker (embedded): no queues. */
const NO_QUEUES: QueueProbe = {
  count: () => Promise.resolve(0),
  depth: () => Promise.resolve(0),
  messages: () => Promise.resolve(undefined),
  close: () => Promise.resolve(),
};

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
