/**
 * The frame of one harness run (HarnessRun), from opening its
 * services to cleaning up exactly once. Its names (schema, bus prefix, work
 * directory), the processes it launches and restarts, the leader observer, the
 * waits of the settling phase, the orderly shutdown, the checks and the
 * verdict, and the signal handling around all of it; each script
 * (scripts/chaos.ts, scripts/restart.ts) adds its own disruption and report.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { AcceleratedClock, newId, parseDuration } from '@orloj/common/core';
import { QUEUES } from '@orloj/common/messages';
import { ensureKeyDir } from '@orloj/common/envelope';
import type { DatabaseHandle, Store } from '@orloj/common/store';
import { DEFAULT_SCHEDULER_CONFIG, LEADER_LEASE, replicaOfHolder } from '@orloj/scheduler';
import { deleteBusNames, NO_QUEUES, openConsumerCounter, type QueueProbe } from './broker.js';
import { armedSchedules, createSchema, dropSchema, freezeSchedules, openHarnessStore, openJobs, seedWorkflows, waitJobsEnded, waitSchedulesPast } from './database.js';
import { Member, processEnv, stopMembers, type Incident, type MemberOptions, type Role } from './members.js';
import type { SharedOptions } from './options.js';
import { startTarget, type Target } from './target.js';
import { INTERVAL_MS, iso, sleepReal } from './time.js';
import { verify, type JobRow, type LeaderSample, type Verification, type WorkflowRow } from './verify.js';

/** The database and the broker of a run: TEST_DATABASE_URL and TEST_AMQP_URL, or the local defaults. */
export function serviceUrls(): { baseDbUrl: string; amqpUrl: string } {
  return {
    baseDbUrl: process.env.TEST_DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/orloj_test',
    amqpUrl: process.env.TEST_AMQP_URL || 'amqp://guest:guest@127.0.0.1:5672',
  };
}

/**
 * The real time a leader's pass may take once it can act (live again, or a
 * workflow free again) on a busy machine: on the accelerated clock it is this
 * many milliseconds times the speed (verify's pass slack). A second at speed 10
 * is ten seconds of a one-minute slot's window.
 */
const FIRST_PASS_REAL_MS = 1_000;

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
    // A leader whose tick read the workflows before the freeze and writes after it (a process
    // starved on a busy machine) sets a next due time again, and that workflow goes on making
    // jobs: freeze and wait again until every job has ended with no schedule armed.
    for (let round = 1; ; round++) {
      await freezeSchedules(this.store, Math.max(200, (3 * this.tickMs) / this.o.speed));
      log('schedules frozen; waiting for every job to end');
      const open = await waitJobsEnded(this.store, this.o.settleTimeoutS, log, () => this.aborted);
      if (open > 0 || this.aborted) break; // given up (the check reports the open jobs) or aborted
      const armed = await armedSchedules(this.store);
      if (armed === 0) break;
      if (round === 5) {
        log(`${armed} schedules armed again after ${round} freezes: checking as it is`);
        break;
      }
      log(`${armed} schedules armed again after the freeze (a tick that began before it); freezing again`);
    }
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
    // orloj's own record of when no leader made a pass: a starved leader holds its lease but is down.
    const downtime = await this.store.uptime.downtime(Number.MIN_SAFE_INTEGER, end);
    const passSlackMs = 2 * this.tickMs + FIRST_PASS_REAL_MS * this.o.speed;
    const result = verify({ workflows, jobs, killEnd: end, tickMs: this.tickMs, samples: this.samples, maxAttempts: this.maxAttempts, downtime, passSlackMs });
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

