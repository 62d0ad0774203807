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
import { parseArgs } from 'node:util';
import { QUEUES } from '@orloj/common/messages';
import { DEAD_LETTER_SUFFIX } from '@orloj/common/bus';
import {
  countErrorLines,
  exitWith,
  HarnessRun,
  INTERVAL_MINUTES,
  INTERVAL_MS,
  iso,
  numberOption,
  openJobs,
  readOptionsOrExitCode,
  readSharedOptions,
  serviceUrls,
  SHARED_OPTION_ARGS,
  sleepReal,
  summarizeJobs,
  UsageError,
  type JobRow,
  type RunOptions,
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

interface Options extends RunOptions {
  combined: number;
  schedulers: number;
  runners: number;
  restarts: Service[];
  warmupS: number;
  runOnS: number;
  brokerOutageS: number;
  dbOutageS: number;
  brokerMethod: BrokerMethod;
  targetDelayMs: number;
  exitWithParent: boolean;
}

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
      'exit-with-parent': { type: 'boolean', default: false },
      ...SHARED_OPTION_ARGS,
    },
  });
  if (values.help) return undefined;
  const num = (name: keyof typeof values, min: number, max: number) => numberOption(values, name, min, max);
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
    ...readSharedOptions(values),
    exitWithParent: values['exit-with-parent'],
  };
  if (o.combined + o.schedulers === 0) throw new UsageError('no scheduler: set --combined or --schedulers');
  if (o.combined + o.runners === 0) throw new UsageError('no runner: set --combined or --runners');
  return o;
}

const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

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
  const o = readOptionsOrExitCode(argv, HELP, readOptions);
  if (typeof o === 'number') return o;
  const { baseDbUrl, amqpUrl } = serviceUrls();
  const control = serviceControl(baseDbUrl, amqpUrl);
  if (typeof control === 'string') {
    console.error(`restart: ${control}`);
    return 3;
  }

  /** Set while a service is down on purpose. */
  const down = new Set<Service>();
  /** A stop command in flight: the cleanup waits for it, or the service could go down after it was brought back. */
  let stopping: Promise<unknown> = Promise.resolve();
  const run = new HarnessRun({
    name: 'restart',
    options: o,
    toleratesExits: true,
    recordsUnreachable: true,
    // Both services are running again when the harness exits, whatever happened.
    restoreServices: async () => {
      await stopping;
      for (const [what, ensure] of [
        ['RabbitMQ', () => ensureBroker(amqpUrl)],
        ['PostgreSQL', () => ensureDatabase(baseDbUrl, control)],
      ] as const) {
        try {
          const did = await ensure();
          if (!did.endsWith('is up')) run.log(did);
        } catch (err) {
          console.error(`could not bring ${what} back:`, err instanceof Error ? err.message : err);
        }
      }
    },
  });
  // A reader that went away (the parent was killed) must not turn the next log line into a crash that skips the cleanup.
  process.stdout.on('error', () => {});
  process.stderr.on('error', () => {});
  if (o.exitWithParent) {
    // Killed without its after hooks (SIGKILL, a SIGTERM to mocha), the parent cannot stop us: do it ourselves.
    const parent = process.ppid;
    setInterval(() => {
      if (process.ppid !== parent && !run.aborted) run.abort('SIGHUP');
    }, 500).unref();
  }

  return run.execute(async () => {
    const { origin, clock, store, prefix, realIntervalMs, samples } = run;
    run.log(
      `schema ${run.schema}, bus prefix ${prefix}, target ${run.target.url}; ${o.workflows} workflows; processes: ${o.combined} api+scheduler+runners, ` +
        `${o.schedulers} scheduler, ${o.runners} runners; speed ${o.speed} (one ${INTERVAL_MINUTES}-minute interval = ${seconds(realIntervalMs)} real); ` +
        `restarts: ${o.restarts.join(', ')} (PostgreSQL cluster ${control.pgCluster.join('/')}, RabbitMQ by ${o.brokerMethod})`,
    );

    // -- processes: never restarted by the harness; each must ride out the outages
    await run.launch([
      ['combined', o.combined],
      ['scheduler', o.schedulers],
      ['runners', o.runners],
    ]);
    if (!(await run.waitStarted())) return 130;

    // -- seed over one interval, then run normally
    const runStart = Date.now();
    await run.seed();
    if (run.aborted) return 130;
    run.log(`seeded ${o.workflows} workflows; running ${o.warmupS} s before the first restart`);
    run.startMonitor({ alive: () => `${run.members.filter((m) => m.alive).length}/${run.members.length}`, databaseDown: () => down.has('database') });
    await sleepReal(o.warmupS * 1000);
    if (run.aborted) return 130;

    // -- the restarts
    const outages: Outage[] = [];
    for (const service of o.restarts) {
      if (run.aborted) break;
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
        while (!run.aborted) {
          if (service === 'broker') {
            if ((await run.attached()).all) return Date.now();
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
        run.log(`restarting RabbitMQ (${o.brokerMethod}); open jobs: ${openBefore}`);
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
        run.log(`restarting PostgreSQL (pg_ctlcluster ${control.pgCluster.join(' ')} stop, start); open jobs: ${openBefore}`);
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
      if (outage.recoveredAt === undefined) outage.notes.push(run.aborted ? 'aborted' : 'not recovered within 60 s of the start');
      if (service === 'database') {
        // The harness's own first successful read may come before the probe's.
        const back = samples.slice(fromSample).find((x) => !x.unreachable);
        if (back) outage.upAt = Math.min(outage.upAt, realAt(back.at));
      }
      if (outage.recoveredAt !== undefined) outage.recoveredAt = Math.max(outage.recoveredAt, outage.upAt);
      outage.clockUp = Math.floor(origin + (outage.upAt - origin) * o.speed); // the clock at upAt
      down.delete(service);
      run.log(
        `${service === 'broker' ? 'RabbitMQ' : 'PostgreSQL'} accepts connections again: stop took ${seconds(outage.stoppedAt - outage.stopAt)}, ` +
          `start ${seconds(outage.upAt - outage.startAt)}, down ${seconds(outage.upAt - outage.stopAt)} real = ${seconds(outage.clockUp - outage.clockStop)} clock`,
      );
      run.log(
        outage.recoveredAt
          ? `${service === 'broker' ? 'every consumer re-attached' : 'a leader is live again'} ${seconds(outage.recoveredAt - outage.upAt)} after the service came back`
          : `not recovered: ${outage.notes.join('; ')}`,
      );
      await sleepReal(o.runOnS * 1000);
    }
    const phaseEnd = clock.now();
    if (run.aborted) return 130;
    run.log(`restarts over at clock ${iso(phaseEnd)}; settling`);

    // -- settle: every slot up to the end of the restarts handled, schedules frozen, every job ended
    if (!(await run.settle(phaseEnd, 'the restarts'))) return 130;

    // -- dead letters and leftovers, before the processes go (their queues stay declared)
    const deadLetters: string[] = [];
    const leftovers: string[] = [];
    for (const q of Object.values(QUEUES)) {
      const dead = await run.consumers.messages(prefix + q + DEAD_LETTER_SUFFIX);
      if (dead !== undefined && dead > 0) deadLetters.push(`${prefix}${q}${DEAD_LETTER_SUFFIX} holds ${dead} message(s)`);
      const ready = await run.consumers.messages(prefix + q);
      if (ready !== undefined && ready > 0) leftovers.push(`${q} ${ready}`);
    }

    const shutdownProblems = await run.shutdown();
    if (run.aborted) return 130;

    // -- verify and report
    const { workflows, jobs, result, runViolations } = await run.check(phaseEnd, shutdownProblems);
    // (f) no lost work: a job ends COMPLETED, or FAILED because the target said so.
    const lost = jobs.filter((j) => !(j.status === 'COMPLETED' || (j.status === 'FAILED' && j.status_reason_code === 'UNEXPECTED_STATUS_CODE')));
    const violations = [
      ...runViolations,
      ...outages.filter((x) => x.recoveredAt === undefined).map((x) => `the orloj processes did not recover from the ${x.service} restart: ${x.notes.join('; ')}`),
      ...result.violations,
      ...deadLetters.map((d) => `(g) ${d}`),
      ...lost.slice(0, 50).map((j) => `(f) job ${j.id} (slot ${iso(j.slot_at)}, ${j.attempts} attempt(s)) ended ${j.status} ${j.status_reason_code ?? ''}: ${j.status_reason_message ?? ''}`),
    ];

    const { byStatus, byReason, retried, extraAttempts, maxSeen } = summarizeJobs(jobs);
    const errorLines = countErrorLines(run.logDir);
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
    console.log(`target         ${run.target.requests} requests for ${jobs.length} jobs (${run.target.requests - jobs.length} extra executions: at-least-once delivery), ${run.target.failures} answered 500`);
    console.log(`slots checked  ${result.checkedSlots} due slots up to ${iso(phaseEnd - INTERVAL_MS)} had exactly one job`);
    console.log(`explained skips ${result.explained.length}`);
    for (const e of result.explained) console.log(`  - ${e}`);
    console.log(`dead letters   ${deadLetters.length ? deadLetters.join('; ') : 'none'}`);
    console.log(`left in queues ${leftovers.length ? leftovers.join(', ') : 'none'} (ready messages after every job ended)`);
    console.log(`process logs   ${errorLines} error lines (LOG_LEVEL=${o.logLevel})`);
    console.log(
      `checks         (a) one job per slot, (b) all terminal, (c) no overlap, (d) no misses, (e) attempts ≤ ${run.maxAttempts}, (f) no lost work, (g) no dead letters; processes survived and exited 0`,
    );
    return run.verdict(violations);
  });
}

/** Date.now() when the wait succeeded, undefined when it gave up. */
async function upWhen(wait: () => Promise<boolean>): Promise<number | undefined> {
  return (await wait()) ? Date.now() : undefined;
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

exitWith('restart', main(process.argv.slice(2)));
