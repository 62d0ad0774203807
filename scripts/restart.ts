// Broker and database restarts under load on real PostgreSQL and RabbitMQ (docs/chaos.md).
//
//   node --import tsx --conditions=orloj-src scripts/restart.ts [--workflows 50] [--speed 5] [--restarts broker,database] …
//
// Starts orloj processes (by default one `--roles api,scheduler,runners`, one
// scheduler and one runner) on one accelerated clock, seeds one-minute
// HEARTBEAT workflows against a local HTTP target, restarts RabbitMQ
// (rabbitmqctl stop_app / start_app) and then PostgreSQL (pg_ctlcluster stop /
// start) while jobs run, never touching the orloj processes, lets the system
// settle and checks the guarantees from the database, plus: no dead-lettered
// message and no lost work. Both services are running again when it exits,
// whatever happened. Exit code: 0 all checks hold, 1 a check failed, 2 the
// harness itself failed, 3 the services cannot be restarted here.
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { AcceleratedClock, DEAD_LETTER_SUFFIX, ensureKeyDir, newId, parseDuration, QUEUES, type DatabaseHandle, type Store } from '@orloj/common';
import { DEFAULT_SCHEDULER_CONFIG, LEADER_LEASE } from '@orloj/scheduler';
import {
  countErrorLines,
  createSchema,
  deleteBusNames,
  dropSchema,
  freezeSchedules,
  INTERVAL_MINUTES,
  INTERVAL_MS,
  iso,
  Member,
  openConsumerCounter,
  openHarnessStore,
  processEnv,
  seedWorkflows,
  sleepReal,
  startTarget,
  stopMembers,
  summarizeJobs,
  verify,
  waitJobsEnded,
  waitSchedulesPast,
  type Incident,
  type JobRow,
  type LeaderSample,
  type QueueProbe,
  type Role,
  type Target,
} from './chaos-lib.js';
import {
  ensureBroker,
  ensureDatabase,
  serviceControl,
  startBroker,
  startDatabase,
  stopBroker,
  stopDatabase,
  waitForBroker,
  waitForDatabase,
  type BrokerMethod,
} from './restart-services.js';

const HELP = `restart: restarts RabbitMQ and PostgreSQL while orloj processes run jobs, then checks the guarantees.

  node --import tsx --conditions=orloj-src scripts/restart.ts [options]

  --workflows <n>          one-minute HEARTBEAT workflows to seed (50)
  --speed <x>              clock speed: x clock seconds per real second (5)
  --combined <n>           processes with --roles api,scheduler,runners (1)
  --schedulers <n>         processes with --roles scheduler (1)
  --runners <n>            processes with --roles runners (1)
  --restarts <list>        which services to restart, in order: broker, database (broker,database)
  --warmup <s>             real seconds of normal running after seeding, before the first restart (15)
  --run-on <s>             real seconds of running after each restart (15)
  --broker-outage <s>      real seconds between rabbitmqctl stop_app and start_app (3)
  --db-outage <s>          real seconds between pg_ctlcluster stop and start (3)
  --broker-method <m>      stop_app, or close_connections (rabbitmqctl close_all_connections) (stop_app)
  --fail-rate <p>          share of target requests answered 500 (0)
  --target-delay <ms>      real milliseconds the target takes to answer, on average, so jobs are running during the outages (2000)
  --job-lease-ttl <d>      JOB_LEASE_TTL, clock time (15s)
  --tick <d>               SCHEDULER_TICK, clock time (1s)
  --queue-timeout <d>      JOB_QUEUE_TIMEOUT, clock time (10m, orloj's default)
  --runner-concurrency <n> RUNNER_CONCURRENCY (8)
  --settle-timeout <s>     real seconds to wait for every job to end (120)
  --log-level <level>      LOG_LEVEL of the orloj processes (warn)
  --keep                   keep the schema, the queues and the logs
  --exit-with-parent       abort (bring the services back, clean up) when the parent process goes away
  --verbose, -v            print open jobs, queue depths and live processes every second

Environment: TEST_DATABASE_URL (postgres://postgres@127.0.0.1:5432/orloj_test),
TEST_AMQP_URL (amqp://guest:guest@127.0.0.1:5672), ORLOJ_TEST_PG_CLUSTER (e.g.
15/main; default: the one cluster under /etc/postgresql). Restarting needs
rabbitmqctl and pg_ctlcluster on this machine, and the rights to use them.
`;

// ---- options ------------------------------------------------------------------

type Service = 'broker' | 'database';

interface Options {
  workflows: number;
  speed: number;
  combined: number;
  schedulers: number;
  runners: number;
  restarts: Service[];
  warmupS: number;
  runOnS: number;
  brokerOutageS: number;
  dbOutageS: number;
  brokerMethod: BrokerMethod;
  failRate: number;
  targetDelayMs: number;
  jobLeaseTtl: string;
  tick: string;
  queueTimeout: string;
  runnerConcurrency: number;
  settleTimeoutS: number;
  logLevel: string;
  keep: boolean;
  exitWithParent: boolean;
  verbose: boolean;
}

class UsageError extends Error {}

function readOptions(argv: string[]): Options | undefined {
  const { values } = parseArgs({
    args: argv,
    options: {
      workflows: { type: 'string', default: '50' },
      speed: { type: 'string', default: '5' },
      combined: { type: 'string', default: '1' },
      schedulers: { type: 'string', default: '1' },
      runners: { type: 'string', default: '1' },
      restarts: { type: 'string', default: 'broker,database' },
      warmup: { type: 'string', default: '15' },
      'run-on': { type: 'string', default: '15' },
      'broker-outage': { type: 'string', default: '3' },
      'db-outage': { type: 'string', default: '3' },
      'broker-method': { type: 'string', default: 'stop_app' },
      'fail-rate': { type: 'string', default: '0' },
      'target-delay': { type: 'string', default: '2000' },
      'job-lease-ttl': { type: 'string', default: '15s' },
      tick: { type: 'string', default: '1s' },
      'queue-timeout': { type: 'string', default: '10m' },
      'runner-concurrency': { type: 'string', default: '8' },
      'settle-timeout': { type: 'string', default: '120' },
      'log-level': { type: 'string', default: 'warn' },
      keep: { type: 'boolean', default: false },
      'exit-with-parent': { type: 'boolean', default: false },
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
  const restarts = values.restarts
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  for (const r of restarts) if (r !== 'broker' && r !== 'database') throw new UsageError(`--restarts takes broker and database (got "${r}")`);
  const method = values['broker-method'];
  if (method !== 'stop_app' && method !== 'close_connections') throw new UsageError(`--broker-method is stop_app or close_connections (got "${method}")`);
  const o: Options = {
    workflows: Math.floor(num('workflows', 1, 100_000)),
    speed: num('speed', 1, 1_000),
    combined: Math.floor(num('combined', 0, 20)),
    schedulers: Math.floor(num('schedulers', 0, 20)),
    runners: Math.floor(num('runners', 0, 20)),
    restarts: restarts as Service[],
    warmupS: num('warmup', 0, 86_400),
    runOnS: num('run-on', 0, 86_400),
    brokerOutageS: num('broker-outage', 0, 600),
    dbOutageS: num('db-outage', 0, 600),
    brokerMethod: method,
    failRate: num('fail-rate', 0, 1),
    targetDelayMs: num('target-delay', 0, 20_000),
    jobLeaseTtl: duration('job-lease-ttl'),
    tick: duration('tick'),
    queueTimeout: duration('queue-timeout'),
    runnerConcurrency: Math.floor(num('runner-concurrency', 1, 1_024)),
    settleTimeoutS: num('settle-timeout', 1, 86_400),
    logLevel: values['log-level'],
    keep: values.keep,
    exitWithParent: values['exit-with-parent'],
    verbose: values.verbose,
  };
  if (o.combined + o.schedulers === 0) throw new UsageError('no scheduler: set --combined or --schedulers');
  if (o.combined + o.runners === 0) throw new UsageError('no runner: set --combined or --runners');
  return o;
}

// ---- small helpers --------------------------------------------------------------

function log(message: string): void {
  console.log(`[restart ${new Date().toISOString().slice(11, 23)}] ${message}`);
}

const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

let aborted = false;

/** One restart of one service, in real (Date.now) and clock time. */
interface Outage {
  service: Service;
  /** open jobs by status just before the stop */
  openBefore: string;
  stopAt: number;
  /** the stop command returned */
  stoppedAt: number;
  startAt: number;
  /** the service accepts connections again */
  upAt: number;
  /** every orloj process is attached again (broker: consumer counts; database: a live leader) */
  recoveredAt: number | undefined;
  clockStop: number;
  clockUp: number;
  notes: string[];
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
  const control = serviceControl(baseDbUrl, amqpUrl);
  if (typeof control === 'string') {
    console.error(`restart: ${control}`);
    return 3;
  }
  const tag = crypto.randomBytes(5).toString('hex');
  const schema = `orloj_restart_${tag}`;
  const prefix = `orloj-restart-${tag}.`;
  const tickMs = parseDuration(o.tick)!;
  const maxAttempts = DEFAULT_SCHEDULER_CONFIG.maxAttempts;
  const realIntervalMs = INTERVAL_MS / o.speed;

  const workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'orloj-restart-'));
  const dataDir = path.join(workDir, 'data');
  const logDir = path.join(workDir, 'logs');
  fs.mkdirSync(logDir, { recursive: true });

  const members: Member[] = [];
  const unexpected: Incident[] = [];
  let target: Target | undefined;
  let consumers: QueueProbe | undefined;
  let database: DatabaseHandle | undefined;
  let schemaCreated = false;
  let busUsed = false;
  let keepLogs = o.keep;
  /** Set while a service is down on purpose. */
  const down = new Set<Service>();
  /** A stop command in flight: the cleanup waits for it, or the service could go down after it was brought back. */
  let stopping: Promise<unknown> = Promise.resolve();

  // Cleanup runs once: on the normal path, on failure, and on a signal. The
  // services come back first: the schema and the queues need them, and so
  // does whoever uses them next.
  let cleaning: Promise<void> | undefined;
  const cleanup = () =>
    (cleaning ??= (async () => {
      for (const m of members) m.kill('SIGKILL');
      await Promise.all(members.map((m) => m.exited));
      await stopping;
      for (const [what, ensure] of [
        ['RabbitMQ', () => ensureBroker(amqpUrl)],
        ['PostgreSQL', () => ensureDatabase(baseDbUrl, control)],
      ] as const) {
        try {
          const did = await ensure();
          if (!did.endsWith('is up')) log(did);
        } catch (err) {
          console.error(`could not bring ${what} back:`, err instanceof Error ? err.message : err);
        }
      }
      await target?.close().catch(() => undefined);
      await consumers?.close();
      await database?.close().catch(() => undefined);
      if (o.keep) {
        log(`kept: schema ${schema}, bus prefix ${prefix}, logs in ${logDir}`);
        return;
      }
      if (schemaCreated) await dropSchema(baseDbUrl, schema);
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
    log(`${signal}: killing every orloj process, bringing the services back and cleaning up (send again to exit at once)`);
    void cleanup().finally(() => process.exit(130));
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  // A reader that went away (the parent was killed) must not turn the next log line into a crash that skips the cleanup.
  process.stdout.on('error', () => {});
  process.stderr.on('error', () => {});
  if (o.exitWithParent) {
    // Killed without its after hooks (SIGKILL, a SIGTERM to mocha), the parent cannot stop us: do it ourselves.
    const parent = process.ppid;
    setInterval(() => {
      if (process.ppid !== parent && !aborted) onSignal('SIGHUP');
    }, 500).unref();
  }
  process.on('exit', () => {
    for (const m of members) if (m.alive) m.child!.kill('SIGKILL');
  });

  try {
    // -- services
    const dbUrl = await createSchema(baseDbUrl, schema);
    schemaCreated = true;
    const opened = await openHarnessStore(dbUrl);
    database = opened.database;
    const store = opened.store;
    busUsed = true;

    target = await startTarget(o.failRate, o.targetDelayMs);
    await ensureKeyDir(dataDir);
    const origin = Date.now();
    const clock = new AcceleratedClock(origin, o.speed);
    log(
      `schema ${schema}, bus prefix ${prefix}, target ${target.url}; ${o.workflows} workflows; processes: ${o.combined} api+scheduler+runners, ` +
        `${o.schedulers} scheduler, ${o.runners} runners; speed ${o.speed} (one ${INTERVAL_MINUTES}-minute interval = ${seconds(realIntervalMs)} real); ` +
        `restarts: ${o.restarts.join(', ')} (PostgreSQL cluster ${control.pgCluster.join('/')}, RabbitMQ by ${o.brokerMethod})`,
    );

    const userId = newId();
    const now0 = clock.now();
    await store.users.insert({ id: userId, email: `restart-${tag}@example.test`, passwordHash: 'x', notificationPreference: 'NONE', createdAt: now0, updatedAt: now0 });

    // -- processes: never restarted by the harness; each must ride out the outages
    const env = processEnv({
      dbUrl,
      amqpUrl,
      prefix,
      dataDir,
      origin,
      speed: o.speed,
      logLevel: o.logLevel,
      jobLeaseTtl: o.jobLeaseTtl,
      tick: o.tick,
      queueTimeout: o.queueTimeout,
      runnerConcurrency: o.runnerConcurrency,
    });
    const onUnexpectedExit = (incident: Incident, m: Member) => {
      unexpected.push(incident);
      log(`UNEXPECTED: ${incident.name} exited (${incident.signal ?? `code ${incident.code}`}); see ${path.join(logDir, m.name + '.log')}`);
    };
    const plan: [Role, number][] = [
      ['combined', o.combined],
      ['scheduler', o.schedulers],
      ['runners', o.runners],
    ];
    for (const [role, n] of plan) for (let i = 1; i <= n; i++) members.push(new Member(role, i, env, logDir, onUnexpectedExit, 'restart-'));
    for (const m of members) m.start();

    // -- leadership observer: an unreadable lease (the database is down) is recorded as such
    const samples: LeaderSample[] = [];
    const readLeader = async (): Promise<LeaderSample> => {
      const at = clock.now();
      const row = await store.db.selectFrom('leases').selectAll().where('name', '=', LEADER_LEASE).executeTakeFirst();
      const holder = row && row.expires_at > at ? row.holder : undefined;
      const live = holder !== undefined && members.some((m) => m.schedules && m.alive && m.id === holder);
      return { at, holder, token: row?.fencing_token, live };
    };
    let observing = true;
    const observer = (async () => {
      while (observing) {
        const at = clock.now();
        try {
          samples.push(await readLeader());
        } catch {
          samples.push({ at, holder: undefined, token: undefined, live: false, unreachable: true });
        }
        await sleepReal(100);
      }
    })();

    consumers = await openConsumerCounter(amqpUrl);
    // Every live process consumes: a process that exited on its own is a violation of its
    // own (reported at the end); the survivors carry on, so the checks still run.
    const attached = async () => {
      const [r, s] = [await consumers!.count(prefix + QUEUES.jobs), await consumers!.count(prefix + QUEUES.jobEvents)];
      const [er, es] = [members.filter((m) => m.alive && m.runs).length, members.filter((m) => m.alive && m.schedules).length];
      if (er === 0 || es === 0) throw new Error(`no live ${er === 0 ? 'runner' : 'scheduler'} left: ${unexpected.map((u) => u.name).join(', ')} exited on its own; see ${logDir}`);
      return { r, s, er, es, all: r === er && s === es };
    };
    const allUp = async (what: string, timeoutMs = 60_000) => {
      const by = Date.now() + timeoutMs;
      for (;;) {
        const { r, s, er, es, all } = await attached();
        if (all) return;
        if (Date.now() > by) throw new Error(`${what}: ${r}/${er} runners and ${s}/${es} schedulers consume after ${timeoutMs / 1000} s; see ${logDir}`);
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

    // -- seed over one interval, then run normally
    const runStart = Date.now();
    await seedWorkflows({ store, clock, userId, targetUrl: target.url, count: o.workflows, spreadMs: realIntervalMs, namePrefix: 'restart', stopped: () => aborted });
    if (aborted) return 130;
    log(`seeded ${o.workflows} workflows; running ${o.warmupS} s before the first restart`);

    // -- progress (--verbose)
    let monitoring = o.verbose;
    const monitor = (async () => {
      while (monitoring && !aborted) {
        try {
          const depth = `jobs ${await consumers!.depth(prefix + QUEUES.jobs)}, job-events ${await consumers!.depth(prefix + QUEUES.jobEvents)}`;
          const open = down.has('database') ? 'database down' : await openJobs(store);
          log(`clock ${iso(clock.now()).slice(11, 19)} open jobs: ${open}; ready messages: ${depth}; alive: ${members.filter((m) => m.alive).length}/${members.length}`);
        } catch {
          // best effort
        }
        await sleepReal(1000);
      }
    })();

    await sleepReal(o.warmupS * 1000);
    if (aborted) return 130;

    // -- the restarts
    const outages: Outage[] = [];
    for (const service of o.restarts) {
      if (aborted) break;
      const openBefore = await openJobs(store);
      const outage: Outage = {
        service,
        openBefore,
        stopAt: Date.now(),
        stoppedAt: 0,
        startAt: 0,
        upAt: 0,
        recoveredAt: undefined,
        clockStop: clock.now(),
        clockUp: 0,
        notes: [],
      };
      outages.push(outage);
      down.add(service);
      const realAt = (at: number) => Math.round(origin + (at - origin) / o.speed); // Date.now() at clock time `at`
      // Recovery, watched from the start command on (the service may accept connections
      // before the command returns): every consumer attached again (broker), a live leader
      // again (database: the first live lease sample after the start).
      let fromSample = 0;
      const watchRecovery = async () => {
        fromSample = samples.length;
        const by = Date.now() + 60_000;
        while (!aborted) {
          if (service === 'broker') {
            if ((await attached()).all) return Date.now();
          } else {
            const live = samples.slice(fromSample).find((x) => x.live);
            if (live) return realAt(live.at);
          }
          if (Date.now() > by) break;
          await sleepReal(100);
        }
        return undefined;
      };
      let recovery: Promise<number | undefined>;
      if (service === 'broker') {
        log(`restarting RabbitMQ (${o.brokerMethod}); open jobs: ${openBefore}`);
        const stopped = await (stopping = stopBroker(o.brokerMethod));
        outage.stoppedAt = Date.now();
        if (stopped.code !== 0) throw new Error(`rabbitmqctl ${o.brokerMethod} failed: ${stopped.stderr.trim()}`);
        await sleepReal(o.brokerOutageS * 1000);
        outage.startAt = Date.now();
        recovery = watchRecovery().catch(() => undefined); // no process left of a role: allUp() below says so
        // Probed while the command runs: start_app returns a while after the node accepts connections.
        const [started, up] = await Promise.all([startBroker(o.brokerMethod), upWhen(() => waitForBroker(amqpUrl, 60_000))]);
        if (started.code !== 0) outage.notes.push(`rabbitmqctl start_app failed (${started.stderr.trim()})`);
        if (up === undefined) await ensureBroker(amqpUrl);
        outage.upAt = up ?? Date.now();
      } else {
        log(`restarting PostgreSQL (pg_ctlcluster ${control.pgCluster.join(' ')} stop, start); open jobs: ${openBefore}`);
        const stopped = await (stopping = stopDatabase(control));
        outage.stoppedAt = Date.now();
        if (stopped.code !== 0) throw new Error(`pg_ctlcluster stop failed: ${stopped.stderr.trim()}`);
        await sleepReal(o.dbOutageS * 1000);
        outage.startAt = Date.now();
        recovery = watchRecovery().catch(() => undefined); // no process left of a role: allUp() below says so
        // Probed while the command runs: pg_ctlcluster start returns a while after the server accepts connections.
        const [started, up] = await Promise.all([startDatabase(control), upWhen(() => waitForDatabase(baseDbUrl, 60_000))]);
        if (started.code !== 0) outage.notes.push(`pg_ctlcluster start failed (${started.stderr.trim()})`);
        if (up === undefined) await ensureDatabase(baseDbUrl, control);
        outage.upAt = up ?? Date.now();
      }
      outage.recoveredAt = await recovery;
      if (outage.recoveredAt === undefined) outage.notes.push(aborted ? 'aborted' : 'not recovered within 60 s of the start');
      if (service === 'database') {
        // The harness's own first successful read may come before the probe's.
        const back = samples.slice(fromSample).find((x) => !x.unreachable);
        if (back) outage.upAt = Math.min(outage.upAt, realAt(back.at));
      }
      if (outage.recoveredAt !== undefined) outage.recoveredAt = Math.max(outage.recoveredAt, outage.upAt);
      outage.clockUp = Math.floor(origin + (outage.upAt - origin) * o.speed); // the clock at upAt
      down.delete(service);
      log(
        `${service === 'broker' ? 'RabbitMQ' : 'PostgreSQL'} accepts connections again: stop took ${seconds(outage.stoppedAt - outage.stopAt)}, ` +
          `start ${seconds(outage.upAt - outage.startAt)}, down ${seconds(outage.upAt - outage.stopAt)} real = ${seconds(outage.clockUp - outage.clockStop)} clock`,
      );
      log(
        outage.recoveredAt
          ? `${service === 'broker' ? 'every consumer re-attached' : 'a leader is live again'} ${seconds(outage.recoveredAt - outage.upAt)} after the service came back`
          : `not recovered: ${outage.notes.join('; ')}`,
      );
      await sleepReal(o.runOnS * 1000);
    }
    const phaseEnd = clock.now();
    if (aborted) return 130;
    log(`restarts over at clock ${iso(phaseEnd)}; settling`);

    // -- settle: every slot up to the end of the restarts handled, schedules frozen, every job ended
    await allUp('after the restarts');
    await waitSchedulesPast(store, phaseEnd, 'the end of the restarts', Math.max(30_000, 5 * realIntervalMs), log, () => aborted);
    if (aborted) return 130;
    await freezeSchedules(store, Math.max(200, (3 * tickMs) / o.speed));
    log('schedules frozen; waiting for every job to end');
    await waitJobsEnded(store, o.settleTimeoutS, log, () => aborted);
    if (aborted) return 130;

    // -- dead letters and leftovers, before the processes go (their queues stay declared)
    const deadLetters: string[] = [];
    const leftovers: string[] = [];
    for (const q of Object.values(QUEUES)) {
      const dead = await consumers.messages(prefix + q + DEAD_LETTER_SUFFIX);
      if (dead !== undefined && dead > 0) deadLetters.push(`${prefix}${q}${DEAD_LETTER_SUFFIX} holds ${dead} message(s)`);
      const ready = await consumers.messages(prefix + q);
      if (ready !== undefined && ready > 0) leftovers.push(`${q} ${ready}`);
    }

    // -- orderly shutdown
    await allUp('before shutdown');
    monitoring = false;
    await monitor;
    observing = false;
    await observer;
    const shutdownProblems = await stopMembers(members);
    if (aborted) return 130;

    // -- verify
    const workflows = await store.db.selectFrom('workflows').selectAll().where('user_id', '=', userId).execute();
    const jobs = await store.db.selectFrom('jobs').selectAll().execute();
    const result = verify({ workflows, jobs, killEnd: phaseEnd, tickMs, samples, maxAttempts });
    // (f) no lost work: a job ends COMPLETED, or FAILED because the target said so.
    const lost = jobs.filter((j) => !(j.status === 'COMPLETED' || (j.status === 'FAILED' && j.status_reason_code === 'UNEXPECTED_STATUS_CODE')));
    const violations = [
      ...(workflows.length === o.workflows ? [] : [`seeded ${o.workflows} workflows but found ${workflows.length}`]),
      ...unexpected.map((u) => `process ${u.name} exited on its own (${u.signal ?? `code ${u.code}`})`),
      ...shutdownProblems,
      ...outages.filter((x) => x.recoveredAt === undefined).map((x) => `the orloj processes did not recover from the ${x.service} restart: ${x.notes.join('; ')}`),
      ...result.violations,
      ...deadLetters.map((d) => `(g) ${d}`),
      ...lost.slice(0, 50).map((j) => `(f) job ${j.id} (slot ${iso(j.slot_at)}, ${j.attempts} attempt(s)) ended ${j.status} ${j.status_reason_code ?? ''}: ${j.status_reason_message ?? ''}`),
    ];

    const { byStatus, byReason, retried, extraAttempts, maxSeen } = summarizeJobs(jobs);
    const errorLines = countErrorLines(logDir);
    console.log('');
    console.log('== restart summary');
    console.log(`workflows      ${workflows.length} × ${INTERVAL_MINUTES} min; ${o.combined} api+scheduler+runners, ${o.schedulers} scheduler, ${o.runners} runner processes; speed ${o.speed}`);
    console.log(`time           ${seconds(Date.now() - runStart)} real from seeding; checked up to clock ${iso(phaseEnd - INTERVAL_MS)} (${((phaseEnd - origin) / 60_000).toFixed(1)} min clock in all)`);
    for (const [i, x] of outages.entries()) {
      const during = jobsAround(jobs, x, outages[i + 1]?.clockStop ?? Number.POSITIVE_INFINITY);
      console.log(
        `${(x.service === 'broker' ? 'RabbitMQ' : 'PostgreSQL').padEnd(15)}stop ${seconds(x.stoppedAt - x.stopAt)}, down ${seconds(x.upAt - x.stopAt)} real (${seconds(x.clockUp - x.clockStop)} clock), ` +
          `processes recovered ${x.recoveredAt ? `${seconds(x.recoveredAt - x.upAt)} after` : 'NEVER'}; open jobs before: ${x.openBefore}; ${during}` +
          (x.notes.length ? `; ${x.notes.join('; ')}` : ''),
      );
    }
    console.log(`jobs           ${jobs.length}: ${byStatus}`);
    console.log(`reasons        ${byReason}`);
    console.log(`retries        ${retried} jobs took more than one attempt (${extraAttempts} extra attempts, at most ${maxSeen})`);
    console.log(`target         ${target.requests} requests for ${jobs.length} jobs (${target.requests - jobs.length} extra executions: at-least-once delivery), ${target.failures} answered 500`);
    console.log(`slots checked  ${result.checkedSlots} due slots up to ${iso(phaseEnd - INTERVAL_MS)} had exactly one job`);
    console.log(`explained skips ${result.explained.length}`);
    for (const e of result.explained) console.log(`  - ${e}`);
    console.log(`dead letters   ${deadLetters.length ? deadLetters.join('; ') : 'none'}`);
    console.log(`left in queues ${leftovers.length ? leftovers.join(', ') : 'none'} (ready messages after every job ended)`);
    console.log(`process logs   ${errorLines} error lines (LOG_LEVEL=${o.logLevel})`);
    console.log(
      `checks         (a) one job per slot, (b) all terminal, (c) no overlap, (d) no misses, (e) attempts ≤ ${maxAttempts}, (f) no lost work, (g) no dead letters; processes survived and exited 0`,
    );
    if (violations.length) {
      keepLogs = true;
      console.log(`VIOLATIONS     ${violations.length}`);
      for (const v of violations) console.log(`  - ${v}`);
      return 1;
    }
    console.log('result         PASS');
    return 0;
  } catch (err) {
    if (aborted) return 130;
    keepLogs = true;
    console.error('restart harness failed:', err instanceof Error ? (err.stack ?? err.message) : err);
    return 2;
  } finally {
    if (!aborted) await cleanup();
  }
}

/** Date.now() when the wait succeeded, undefined when it gave up. */
async function upWhen(wait: () => Promise<boolean>): Promise<number | undefined> {
  return (await wait()) ? Date.now() : undefined;
}

async function openJobs(store: Store): Promise<string> {
  const rows = await store.db
    .selectFrom('jobs')
    .select(['status', (eb) => eb.fn.countAll<number>().as('n')])
    .where('status', 'in', ['PENDING', 'QUEUED', 'RUNNING'])
    .groupBy('status')
    .execute();
  return rows.map((r) => `${r.status} ${r.n}`).join(', ') || 'none';
}

/**
 * Jobs created while the service was down, how soon after it came back jobs
 * were created and completed again, and the jobs handed out again (attempt > 1)
 * from the stop until the next restart.
 */
function jobsAround(jobs: readonly JobRow[], x: Outage, until: number): string {
  // While the broker is down the scheduler still creates jobs (it cannot while the database is down).
  const created = jobs.filter((j) => j.created_at >= x.clockStop && j.created_at < x.clockUp).length;
  const firstCreated = Math.min(...jobs.filter((j) => j.created_at >= x.clockUp).map((j) => j.created_at));
  const firstDone = Math.min(...jobs.filter((j) => j.status === 'COMPLETED' && j.updated_at >= x.clockUp).map((j) => j.updated_at));
  const after = (t: number) => (Number.isFinite(t) ? `${((t - x.clockUp) / 1000).toFixed(0)} s clock after` : 'never');
  const retried = jobs.filter((j) => j.attempts > 1 && j.queued_at !== null && j.queued_at >= x.clockStop && j.queued_at < until).length;
  return `${x.service === 'broker' ? `${created} jobs created while down; ` : ''}next job created ${after(firstCreated)}, next completed ${after(firstDone)}; ${retried} jobs handed out again afterwards`;
}

main(process.argv.slice(2)).then(
  (code) => {
    if (!aborted) process.exit(code);
  },
  (err: unknown) => {
    console.error('restart harness failed:', err);
    process.exit(2);
  },
);
