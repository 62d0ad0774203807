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
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { AcceleratedClock, ensureKeyDir, newId, parseDuration, QUEUES, type DatabaseHandle } from '@orloj/common';
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
  type LeaderSample,
  type QueueProbe,
  type Target,
} from './chaos-lib.js';

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

function log(message: string): void {
  console.log(`[chaos ${new Date().toISOString().slice(11, 23)}] ${message}`);
}

let aborted = false;

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
  let consumers: QueueProbe | undefined;
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
    const dbUrl = await createSchema(baseDbUrl, schema);
    schemaCreated = true;
    const opened = await openHarnessStore(dbUrl);
    database = opened.database;
    const store = opened.store;
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
    const seeding = seedWorkflows({
      store,
      clock,
      userId,
      targetUrl: target.url,
      count: o.workflows,
      spreadMs: realIntervalMs,
      namePrefix: 'chaos',
      stopped: () => aborted,
    });

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
    await waitSchedulesPast(store, killEnd, 'the end of the killing phase', Math.max(30_000, 5 * realIntervalMs), log, () => aborted);
    if (aborted) return 130;

    // Freeze the schedules (no new slots come due), then wait for every job to end.
    await freezeSchedules(store, Math.max(200, (3 * tickMs) / o.speed));
    log('schedules frozen; waiting for every job to end');
    await waitJobsEnded(store, o.settleTimeoutS, log, () => aborted);
    if (aborted) return 130;

    // -- orderly shutdown, once every process is up (a process still loading has no signal handlers yet)
    await allUp('before shutdown');
    monitoring = false;
    await monitor;
    stopping = true;
    observing = false;
    await observer;
    for (const t of timers) clearTimeout(t);
    timers.clear();
    const shutdownProblems = await stopMembers(members);
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

    const { byStatus, byReason, retried, extraAttempts, maxSeen } = summarizeJobs(jobs);
    const clockMinutes = (killEnd - origin) / 60_000;
    const errorLines = countErrorLines(logDir);
    console.log('');
    console.log('== chaos summary');
    console.log(`workflows      ${workflows.length} × ${INTERVAL_MINUTES} min, ${o.schedulers} schedulers, ${o.runners} runners, speed ${o.speed}`);
    console.log(`time           ${((Date.now() - killStart) / 1000).toFixed(0)} s real; killing phase ${o.durationS} s real = ${clockMinutes.toFixed(1)} min clock`);
    console.log(`kills          ${stats.leaderKills} leaders, ${stats.runnerKills} runners in ${stats.rounds} rounds (${stats.noLeader} found no live leader, ${stats.skipped} kills skipped while a restarted process was still starting); ${tokens.size} leadership terms`);
    console.log(`jobs           ${jobs.length}: ${byStatus}`);
    console.log(`reasons        ${byReason}`);
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


main(process.argv.slice(2)).then(
  (code) => {
    if (!aborted) process.exit(code);
  },
  (err: unknown) => {
    console.error('chaos harness failed:', err);
    process.exit(2);
  },
);
