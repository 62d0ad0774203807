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
import { countErrorLines } from './harness/members.js';
import { exitWith, numberOption, readOptionsOrExitCode, readSharedOptions, SHARED_OPTION_ARGS, UsageError } from './harness/options.js';
import { HarnessRun, serviceUrls, type RunOptions } from './harness/run.js';
import { INTERVAL_MINUTES, INTERVAL_MS, iso, seconds, sleepReal } from './harness/time.js';
import { summarizeJobs, type JobRow, type Verification, type WorkflowRow } from './harness/verify.js';
import { ServiceRestarts, type Outage, type RestartSettings, type Service } from './restart-outage.js';
import { serviceControl } from './restart-services.js';

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

interface Options extends RunOptions, RestartSettings {
  combined: number;
  schedulers: number;
  runners: number;
  restarts: Service[];
  warmupS: number;
  runOnS: number;
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

// ---- main -------------------------------------------------------------------------

async function main(argv: string[]): Promise<number> {
  const o = readOptionsOrExitCode(argv, HELP, readOptions);
  if (typeof o === 'number') return o;
  const urls = serviceUrls();
  const control = serviceControl(urls.baseDbUrl, urls.amqpUrl);
  if (typeof control === 'string') {
    console.error(`restart: ${control}`);
    return 3;
  }
  const services = new ServiceRestarts(o, control, urls);
  const run = new HarnessRun({
    name: 'restart',
    options: o,
    toleratesExits: true,
    recordsUnreachable: true,
    // Both services are running again when the harness exits, whatever happened.
    restoreServices: () => services.restore((m) => run.log(m)),
  });
  outliveTheReader(run, o.exitWithParent);
  return run.execute(() => restartRun(run, o, services));
}

/**
 * A reader that went away (the parent was killed) must not turn the next log
 * line into a crash that skips the cleanup; with --exit-with-parent, the run
 * aborts once the parent is gone.
 */
function outliveTheReader(run: HarnessRun, exitWithParent: boolean): void {
  process.stdout.on('error', () => {});
  process.stderr.on('error', () => {});
  if (!exitWithParent) return;
  // Killed without its after hooks (SIGKILL, a SIGTERM to mocha), the parent cannot stop us: do it ourselves.
  const parent = process.ppid;
  setInterval(() => {
    if (process.ppid !== parent && !run.aborted) run.abort('SIGHUP');
  }, 500).unref();
}

/** The body of the run: start, seed, warm up, the restarts, settle, then check and report. */
async function restartRun(run: HarnessRun, o: Options, services: ServiceRestarts): Promise<number> {
  run.log(
    `schema ${run.schema}, bus prefix ${run.prefix}, target ${run.target.url}; ${o.workflows} workflows; processes: ${o.combined} api+scheduler+runners, ` +
      `${o.schedulers} scheduler, ${o.runners} runners; speed ${o.speed} (one ${INTERVAL_MINUTES}-minute interval = ${seconds(run.realIntervalMs)} real); ` +
      `restarts: ${o.restarts.join(', ')} (PostgreSQL cluster ${services.control.pgCluster.join('/')}, RabbitMQ by ${o.brokerMethod})`,
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
  run.startMonitor({ alive: () => `${run.members.filter((m) => m.alive).length}/${run.members.length}`, databaseDown: () => services.down.has('database') });
  await sleepReal(o.warmupS * 1000);
  if (run.aborted) return 130;

  // -- the restarts
  const outages: Outage[] = [];
  for (const service of o.restarts) {
    if (run.aborted) break;
    outages.push(await services.restart(run, service));
    await sleepReal(o.runOnS * 1000);
  }
  const phaseEnd = run.clock.now();
  if (run.aborted) return 130;
  run.log(`restarts over at clock ${iso(phaseEnd)}; settling`);

  // -- settle: every slot up to the end of the restarts handled, schedules frozen, every job ended
  if (!(await run.settle(phaseEnd, 'the restarts'))) return 130;
  // dead letters and leftovers, before the processes go (their queues stay declared)
  const queues = await readQueues(run);
  const shutdownProblems = await run.shutdown();
  if (run.aborted) return 130;
  const checked = await run.check(phaseEnd, shutdownProblems);
  return report(run, o, { runStart, phaseEnd, outages, queues, ...checked });
}

// ---- checks and report ----------------------------------------------------------------

/** Messages in the run's dead-letter queues, and ready messages left in its queues. */
async function readQueues(run: HarnessRun): Promise<{ deadLetters: string[]; leftovers: string[] }> {
  const { prefix } = run;
  const deadLetters: string[] = [];
  const leftovers: string[] = [];
  for (const q of Object.values(QUEUES)) {
    const dead = await run.consumers.messages(prefix + q + DEAD_LETTER_SUFFIX);
    if (dead !== undefined && dead > 0) deadLetters.push(`${prefix}${q}${DEAD_LETTER_SUFFIX} holds ${dead} message(s)`);
    const ready = await run.consumers.messages(prefix + q);
    if (ready !== undefined && ready > 0) leftovers.push(`${q} ${ready}`);
  }
  return { deadLetters, leftovers };
}

interface Checked {
  runStart: number;
  phaseEnd: number;
  outages: Outage[];
  queues: { deadLetters: string[]; leftovers: string[] };
  workflows: WorkflowRow[];
  jobs: JobRow[];
  result: Verification;
  runViolations: string[];
}

/** The violations, the summary, and the verdict's exit code. */
function report(run: HarnessRun, o: Options, c: Checked): number {
  const { outages, jobs, result, phaseEnd } = c;
  const { deadLetters, leftovers } = c.queues;
  // (f) no lost work: a job ends COMPLETED, or FAILED because the target said so.
  const lost = jobs.filter((j) => !(j.status === 'COMPLETED' || (j.status === 'FAILED' && j.status_reason_code === 'UNEXPECTED_STATUS_CODE')));
  const violations = [
    ...c.runViolations,
    ...outages.filter((x) => x.recoveredAt === undefined).map((x) => `the orloj processes did not recover from the ${x.service} restart: ${x.notes.join('; ')}`),
    ...result.violations,
    ...deadLetters.map((d) => `(g) ${d}`),
    ...lost.slice(0, 50).map((j) => `(f) job ${j.id} (slot ${iso(j.slot_at)}, ${j.attempts} attempt(s)) ended ${j.status} ${j.status_reason_code ?? ''}: ${j.status_reason_message ?? ''}`),
  ];

  const { byStatus, byReason, retried, extraAttempts, maxSeen } = summarizeJobs(jobs);
  const errorLines = countErrorLines(run.logDir);
  console.log('');
  console.log('== restart summary');
  console.log(`workflows      ${c.workflows.length} × ${INTERVAL_MINUTES} min; ${o.combined} api+scheduler+runners, ${o.schedulers} scheduler, ${o.runners} runner processes; speed ${o.speed}`);
  console.log(`time           ${seconds(Date.now() - c.runStart)} real from seeding; checked up to clock ${iso(phaseEnd - INTERVAL_MS)} (${((phaseEnd - run.origin) / 60_000).toFixed(1)} min clock in all)`);
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
