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
import { parseArgs } from 'node:util';
import { parseDuration, QUEUES } from '@orloj/common';
import { DEFAULT_SCHEDULER_CONFIG } from '@orloj/scheduler';
import {
  countErrorLines,
  exitWith,
  HarnessRun,
  INTERVAL_MINUTES,
  INTERVAL_MS,
  iso,
  numberOption,
  readOptionsOrExitCode,
  readSharedOptions,
  SHARED_OPTION_ARGS,
  sleepReal,
  summarizeJobs,
  type RunOptions,
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

interface Options extends RunOptions {
  durationS: number;
  killEveryS: number;
  restartAfterS: number;
  schedulers: number;
  runners: number;
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
      ...SHARED_OPTION_ARGS,
    },
  });
  if (values.help) return undefined;
  const num = (name: keyof typeof values, min: number, max: number) => numberOption(values, name, min, max);
  return {
    workflows: Math.floor(num('workflows', 1, 100_000)),
    durationS: num('duration', 1, 86_400),
    speed: num('speed', 1, 1_000),
    killEveryS: num('kill-every', 0.2, 3_600),
    restartAfterS: num('restart-after', 0, 3_600),
    schedulers: Math.floor(num('schedulers', 2, 20)),
    runners: Math.floor(num('runners', 2, 20)),
    failRate: num('fail-rate', 0, 1),
    ...readSharedOptions(values),
  };
}

// ---- main -------------------------------------------------------------------------

async function main(argv: string[]): Promise<number> {
  const o = readOptionsOrExitCode(argv, HELP, readOptions);
  if (typeof o === 'number') return o;
  const run = new HarnessRun({ name: 'chaos', options: o });
  return run.execute(async () => {
    const { tickMs, realIntervalMs, prefix } = run;
    const jobLeaseTtlMs = parseDuration(o.jobLeaseTtl)!;
    const leaderTtlMs = DEFAULT_SCHEDULER_CONFIG.leaderLeaseTtlMs;
    run.log(
      `schema ${run.schema}, bus prefix ${prefix}, target ${run.target.url}; ${o.workflows} workflows, ${o.schedulers} schedulers, ${o.runners} runners; ` +
        `speed ${o.speed} (one ${INTERVAL_MINUTES}-minute interval = ${(realIntervalMs / 1000).toFixed(1)} s real), ` +
        `JOB_LEASE_TTL ${o.jobLeaseTtl}, SCHEDULER_TICK ${o.tick}, JOB_QUEUE_TIMEOUT ${o.queueTimeout}, leader lease ${leaderTtlMs / 1000}s`,
    );
    const failover = leaderTtlMs + 2 * tickMs;
    const retry = jobLeaseTtlMs + 2 * tickMs;
    if (failover + retry >= INTERVAL_MS) {
      run.log(`warning: leader failover (${failover / 1000}s) + job retry (${retry / 1000}s) do not fit well inside one interval; expect explained skips`);
    }
    if (jobLeaseTtlMs / 3 / o.speed < 100) run.log('warning: runners renew job leases less than 100 ms (real) apart: expect spurious retries on a busy machine');

    // -- processes: a process that exits on its own is restarted like a killed one (and reported at the end)
    const restartAfterMs = o.restartAfterS * 1000;
    await run.launch(
      [
        ['scheduler', o.schedulers],
        ['runners', o.runners],
      ],
      (m) => run.restartLater(m, restartAfterMs),
    );
    const schedulers = run.members.filter((m) => m.role === 'scheduler');
    const runners = run.members.filter((m) => m.role === 'runners');
    if (!(await run.waitStarted())) return 130;

    // -- seed, spread over one interval, while the killing starts
    const seeding = run.seed();
    run.startMonitor({ alive: () => run.members.filter((m) => m.alive).map((m) => m.id.replace('chaos-', '')).join(' ') });

    // -- kill rounds
    const stats = { rounds: 0, leaderKills: 0, runnerKills: 0, noLeader: 0, skipped: 0 };
    const killStart = Date.now();
    const killUntil = killStart + o.durationS * 1000;
    run.log(`killing for ${o.durationS} s: the leader and one runner every ~${o.killEveryS} s, restarted after ${o.restartAfterS} s`);
    while (!run.aborted) {
      const wait = o.killEveryS * 1000 * (0.5 + Math.random());
      if (Date.now() + wait > killUntil) break;
      await sleepReal(wait);
      if (run.aborted) break;
      stats.rounds += 1;
      // Kill only while another process of the role is up to carry on: the
      // point is failover, not starving the system of a role while restarted
      // processes are still loading (several seconds on a busy machine).
      const leader = await run.readLeader();
      const s = leader.live ? schedulers.find((m) => m.alive && m.id === leader.holder) : undefined;
      const schedulersUp = await run.consumers.count(prefix + QUEUES.jobEvents);
      const runnersUp = await run.consumers.count(prefix + QUEUES.jobs);
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
        run.restartLater(s, restartAfterMs);
      }
      if (!r || runnersUp < 2) {
        stats.skipped += 1;
        done.push('no runner: only one is up');
      } else {
        r.kill('SIGKILL');
        stats.runnerKills += 1;
        done.push(`runner ${r.id}`);
        run.restartLater(r, restartAfterMs);
      }
      run.log(`round ${stats.rounds}: killed ${done.join(', ')}`);
    }
    await sleepReal(Math.max(0, killUntil - Date.now()));
    await seeding;
    const killEnd = run.clock.now();
    if (run.aborted) return 130;
    run.log(`killing over at clock ${iso(killEnd)}; ${stats.leaderKills} leaders and ${stats.runnerKills} runners killed`);

    // -- settle: restarts finish, every slot up to the end of the killing has been handled, every job ended
    await sleepReal(restartAfterMs + 100);
    for (const m of run.members) if (!m.alive) m.start();
    if (!(await run.settle(killEnd, 'the killing phase'))) return 130;

    const shutdownProblems = await run.shutdown();
    if (run.aborted) return 130;

    // -- verify and report
    const { workflows, jobs, result, runViolations } = await run.check(killEnd, shutdownProblems);
    const violations = [...runViolations, ...result.violations];
    const { byStatus, byReason, retried, extraAttempts, maxSeen } = summarizeJobs(jobs);
    const leadershipTerms = new Set(run.samples.flatMap((s) => (s.token === undefined ? [] : [s.token]))).size;
    const clockMinutes = (killEnd - run.origin) / 60_000;
    const errorLines = countErrorLines(run.logDir);
    console.log('');
    console.log('== chaos summary');
    console.log(`workflows      ${workflows.length} × ${INTERVAL_MINUTES} min, ${o.schedulers} schedulers, ${o.runners} runners, speed ${o.speed}`);
    console.log(`time           ${((Date.now() - killStart) / 1000).toFixed(0)} s real; killing phase ${o.durationS} s real = ${clockMinutes.toFixed(1)} min clock`);
    console.log(`kills          ${stats.leaderKills} leaders, ${stats.runnerKills} runners in ${stats.rounds} rounds (${stats.noLeader} found no live leader, ${stats.skipped} kills skipped while a restarted process was still starting); ${leadershipTerms} leadership terms`);
    console.log(`jobs           ${jobs.length}: ${byStatus}`);
    console.log(`reasons        ${byReason}`);
    console.log(`retries        ${retried} jobs took more than one attempt (${extraAttempts} extra attempts, at most ${maxSeen})`);
    console.log(`target         ${run.target.requests} requests, ${run.target.failures} answered 500`);
    console.log(`slots checked  ${result.checkedSlots} due slots up to ${iso(killEnd - INTERVAL_MS)} had exactly one job`);
    console.log(`explained skips ${result.explained.length}`);
    for (const e of result.explained) console.log(`  - ${e}`);
    console.log(`process logs   ${errorLines} error lines (LOG_LEVEL=${o.logLevel})`);
    console.log(`checks         (a) one job per slot, (b) all terminal, (c) no overlap, (d) no misses, (e) attempts ≤ ${run.maxAttempts}`);
    return run.verdict(violations);
  });
}

exitWith('chaos', main(process.argv.slice(2)));
