// Multi-process crash test on real PostgreSQL and RabbitMQ (docs/chaos.md).
//
// The crash test itself — which processes it kills or restarts, how
// often, and what each disruption must leave true — for its two topologies
// (distributed: the scheduler leader and runners SIGKILLed, a runner with
// wrong keys; embedded: the one server restarted), with its options and its
// report. The frame of the run (processes, target, seeding, settling, the
// common checks) is scripts/harness/, shared with scripts/restart.ts.
//
//   node --import tsx --conditions=orloj-src scripts/chaos.ts [--workflows 200] [--duration 60] [--speed 10] [--kill-every 3] …
//
// Starts several `orloj start --roles scheduler` and `--roles runners`
// processes on one accelerated clock, seeds one-minute HEARTBEAT workflows
// against a local HTTP target, SIGKILLs the scheduler leader and a runner
// again and again while a runner with wrong keys refuses jobs for a while,
// lets the system settle, and then checks the guarantees from the database.
// With --topology embedded it restarts one embedded server (every role, the
// in-process bus) instead, by SIGTERM and SIGKILL in turn. Exit code: 0 all
// checks hold, 1 a check failed, 2 the harness itself failed.
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { parseDuration } from '@orloj/common/core';
import { MESSAGE_TYPES, QUEUES } from '@orloj/common/messages';
import { ensureKeyDir } from '@orloj/common/envelope';
import { DEAD_LETTER_SUFFIX } from '@orloj/common/bus';
import { DEFAULT_SCHEDULER_CONFIG } from '@orloj/scheduler';
import { countErrorLines, type Member } from './harness/members.js';
import { exitWith, numberOption, readOptionsOrExitCode, readSharedOptions, SHARED_OPTION_ARGS, UsageError } from './harness/options.js';
import { HarnessRun, type RunOptions } from './harness/run.js';
import { INTERVAL_MINUTES, INTERVAL_MS, iso, sleepReal } from './harness/time.js';
import { summarizeJobs } from './harness/verify.js';

const HELP = `chaos: SIGKILLs scheduler leaders and runners while jobs run, then checks the guarantees.

  node --import tsx --conditions=orloj-src scripts/chaos.ts [options]

  --topology <t>           distributed (schedulers and runners on RabbitMQ) or embedded
                           (one server with every role and the in-process bus) (distributed)
  --workflows <n>          one-minute HEARTBEAT workflows to seed (200)
  --duration <s>           real seconds of killing (60)
  --speed <x>              clock speed: x clock seconds per real second (10)
  --kill-every <s>         real seconds between kill rounds, jittered ±50% (3; embedded: from the
                           moment the restarted server is up)
  --restart-after <s>      real seconds before a killed process is started again (1)
  --schedulers <n>         scheduler processes (3; distributed)
  --runners <n>            runner processes (2; distributed)
  --wrong-keys <s>         real seconds a runner with keys of its own refuses jobs, from its
                           first refusal (10; distributed; 0: none)
  --resume-within <d>      embedded: every job open at a restart starts (or ends) within this
                           clock time of the new process being up (2m)
  --fail-rate <p>          share of target requests answered 500 (0.03)
  --target-delay <ms>      real ms the target takes to answer, on average (0)
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
  topology: 'distributed' | 'embedded';
  durationS: number;
  killEveryS: number;
  restartAfterS: number;
  schedulers: number;
  runners: number;
  wrongKeysS: number;
  resumeWithinMs: number;
}

function readOptions(argv: string[]): Options | undefined {
  const { values } = parseArgs({
    args: argv,
    options: {
      topology: { type: 'string', default: 'distributed' },
      workflows: { type: 'string', default: '200' },
      duration: { type: 'string', default: '60' },
      speed: { type: 'string', default: '10' },
      'kill-every': { type: 'string', default: '3' },
      'restart-after': { type: 'string', default: '1' },
      schedulers: { type: 'string', default: '3' },
      runners: { type: 'string', default: '2' },
      'wrong-keys': { type: 'string', default: '10' },
      'resume-within': { type: 'string', default: '2m' },
      'fail-rate': { type: 'string', default: '0.03' },
      'target-delay': { type: 'string', default: '0' },
      ...SHARED_OPTION_ARGS,
    },
  });
  if (values.help) return undefined;
  const num = (name: keyof typeof values, min: number, max: number) => numberOption(values, name, min, max);
  if (values.topology !== 'distributed' && values.topology !== 'embedded') throw new UsageError(`--topology must be distributed or embedded (got "${values.topology}")`);
  const resumeWithinMs = parseDuration(values['resume-within']);
  if (resumeWithinMs === undefined) throw new UsageError(`--resume-within must be a duration such as 2m (got "${values['resume-within']}")`);
  return {
    topology: values.topology,
    workflows: Math.floor(num('workflows', 1, 100_000)),
    durationS: num('duration', 1, 86_400),
    speed: num('speed', 1, 1_000),
    killEveryS: num('kill-every', 0.2, 3_600),
    restartAfterS: num('restart-after', 0, 3_600),
    schedulers: Math.floor(num('schedulers', 2, 20)),
    runners: Math.floor(num('runners', 2, 20)),
    wrongKeysS: num('wrong-keys', 0, 86_400),
    resumeWithinMs,
    failRate: num('fail-rate', 0, 1),
    targetDelayMs: num('target-delay', 0, 600_000),
    ...readSharedOptions(values),
  };
}

// ---- main -------------------------------------------------------------------------

/** What the disruption phase of a topology leaves for the report: kill counts, its own checks. */
interface Disrupted {
  /** one line each, after `kills` */
  report: string[];
  /** the names of the topology's own checks, for the `checks` line */
  checks: string[];
  /** run after shutdown(): the topology's own violations */
  verify: () => Promise<string[]>;
}

async function main(argv: string[]): Promise<number> {
  const o = readOptionsOrExitCode(argv, HELP, readOptions);
  if (typeof o === 'number') return o;
  const embedded = o.topology === 'embedded';
  const run = new HarnessRun({ name: 'chaos', options: o, embedded });
  return run.execute(async () => {
    const { tickMs, realIntervalMs, prefix } = run;
    const jobLeaseTtlMs = parseDuration(o.jobLeaseTtl)!;
    const leaderTtlMs = DEFAULT_SCHEDULER_CONFIG.leaderLeaseTtlMs;
    const processes = embedded ? '1 embedded server (in-process bus)' : `${o.schedulers} schedulers, ${o.runners} runners`;
    run.log(
      `schema ${run.schema}, ${embedded ? 'no broker' : `bus prefix ${prefix}`}, target ${run.target.url}; ${o.workflows} workflows, ${processes}; ` +
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
      embedded
        ? [['embedded', 1]]
        : [
            ['scheduler', o.schedulers],
            ['runners', o.runners],
          ],
      (m) => {
        if (!m.misconfigured) run.restartLater(m, restartAfterMs);
      },
    );
    // The runner with wrong keys starts with the others (a process loading is the heaviest
    // moment; better before the killing than during it) and is stopped during the killing.
    const wrongKeys = !embedded && o.wrongKeysS > 0 ? await wrongKeysRunner(run, o) : undefined;
    if (!(await run.waitStarted())) return 130;

    // -- seed, spread over one interval, while the killing starts
    const seeding = run.seed();
    run.startMonitor({ alive: () => run.members.filter((m) => m.alive).map((m) => m.id.replace('chaos-', '')).join(' ') });

    const killStart = Date.now();
    const killUntil = killStart + o.durationS * 1000;
    const disrupted = embedded ? await restartEmbedded(run, o, killUntil) : await killDistributed(run, o, killUntil, wrongKeys);
    await sleepReal(Math.max(0, killUntil - Date.now()));
    await seeding;
    const killEnd = run.clock.now();
    if (run.aborted) return 130;
    run.log(`killing over at clock ${iso(killEnd)}`);

    // -- settle: restarts finish, every slot up to the end of the killing has been handled, every job ended
    await sleepReal(restartAfterMs + 100);
    for (const m of run.members) if (!m.alive && !m.misconfigured) m.start();
    if (!(await run.settle(killEnd, 'the killing phase'))) return 130;

    const shutdownProblems = await run.shutdown();
    if (run.aborted) return 130;

    // -- verify and report
    const { workflows, jobs, result, runViolations } = await run.check(killEnd, shutdownProblems);
    const violations = [...runViolations, ...result.violations, ...(await disrupted.verify())];
    const { byStatus, byReason, retried, extraAttempts, maxSeen } = summarizeJobs(jobs);
    const leadershipTerms = new Set(run.samples.flatMap((s) => (s.token === undefined ? [] : [s.token]))).size;
    const clockMinutes = (killEnd - run.origin) / 60_000;
    const errorLines = countErrorLines(run.logDir);
    console.log('');
    console.log('== chaos summary');
    console.log(`workflows      ${workflows.length} × ${INTERVAL_MINUTES} min, ${processes}, speed ${o.speed}`);
    console.log(`time           ${((Date.now() - killStart) / 1000).toFixed(0)} s real; killing phase ${o.durationS} s real = ${clockMinutes.toFixed(1)} min clock`);
    for (const line of disrupted.report) console.log(line);
    console.log(`leadership     ${leadershipTerms} terms`);
    console.log(`jobs           ${jobs.length}: ${byStatus}`);
    console.log(`reasons        ${byReason}`);
    console.log(`retries        ${retried} jobs took more than one attempt (${extraAttempts} extra attempts, at most ${maxSeen})`);
    console.log(`target         ${run.target.requests} requests, ${run.target.failures} answered 500`);
    console.log(`slots checked  ${result.checkedSlots} due slots up to ${iso(killEnd - INTERVAL_MS)} had exactly one job`);
    console.log(`explained skips ${result.explained.length}`);
    for (const e of result.explained) console.log(`  - ${e}`);
    console.log(`process logs   ${errorLines} error lines (LOG_LEVEL=${o.logLevel})`);
    console.log(`checks         (a) one job per slot, (b) all terminal, (c) no overlap, (d) no misses, (e) attempts ≤ ${run.maxAttempts}${disrupted.checks.map((c) => `, ${c}`).join('')}`);
    return run.verdict(violations);
  });
}

// ---- distributed: kill the leader and a runner; a runner with wrong keys for a while -----------------

async function killDistributed(run: HarnessRun, o: Options, killUntil: number, wrongKeys: WrongKeysRunner | undefined): Promise<Disrupted> {
  const { prefix } = run;
  const restartAfterMs = o.restartAfterS * 1000;
  const schedulers = run.members.filter((m) => m.role === 'scheduler');
  // The runner with wrong keys is never a target: it carries no work.
  const runners = run.members.filter((m) => m.role === 'runners' && !m.misconfigured);
  const wrongKeysDone = wrongKeys?.stopDuring(killUntil);

  const stats = { rounds: 0, leaderKills: 0, runnerKills: 0, noLeader: 0, skipped: 0 };
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
    // The runner with wrong keys consumes too, but carries no work.
    const runnersUp = (await run.consumers.count(prefix + QUEUES.jobs)) - (wrongKeys?.member.alive ? 1 : 0);
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
  await wrongKeysDone;
  run.log(`${stats.leaderKills} leaders and ${stats.runnerKills} runners killed`);
  const report = [
    `kills          ${stats.leaderKills} leaders, ${stats.runnerKills} runners in ${stats.rounds} rounds (${stats.noLeader} found no live leader, ${stats.skipped} kills skipped while a restarted process was still starting)`,
  ];
  if (!wrongKeys) return { report, checks: [], verify: () => Promise.resolve([]) };
  return {
    report,
    checks: ['(f) refused jobs dead-lettered and handed out again'],
    verify: async () => {
      const { violations, lines } = await wrongKeys.verify();
      report.push(...lines);
      return violations;
    },
  };
}

interface WrongKeysRunner {
  member: Member;
  /** Stops it during the killing phase, which ends at `killUntil` (Date.now() time). */
  stopDuring(killUntil: number): Promise<void>;
  verify(): Promise<{ violations: string[]; lines: string[] }>;
}

/**
 * A runner whose DATA_DIR holds keys of its own (as if it had been given a
 * fresh data directory instead of the installation's keys): it takes job.run
 * messages from the shared queue like any runner and refuses every one. It
 * starts with the other processes, runs until --wrong-keys seconds after its
 * first refusal (but never past the killing phase), and is stopped with
 * SIGTERM. Its refusals must be dead-lettered, and the schedulers must hand
 * those jobs out again to the healthy runners, on the same attempt.
 */
async function wrongKeysRunner(run: HarnessRun, o: Options): Promise<WrongKeysRunner> {
  const dataDir = path.join(run.workDir, 'wrong-keys');
  await ensureKeyDir(dataDir);
  // Prefetch 1 (RUNNER_CONCURRENCY): it refuses as a runner would, one message at a time, and
  // does not grab most of the queue (a refusal is much quicker than a run).
  const member = run.addMember('runners', { name: 'runner-wrong-keys', env: { DATA_DIR: dataDir, RUNNER_CONCURRENCY: '1' }, misconfigured: true });
  member.start();
  const logFile = path.join(run.logDir, `${member.name}.log`);
  const refusedLines = () => logLines(logFile).filter((l) => l.msg?.includes('failed its signature check') && l.claimed?.type === MESSAGE_TYPES.jobRun);
  let exit: string | undefined;
  let ranS = 0;
  const stopDuring = async (killUntil: number) => {
    // Leave the healthy runners the last second of the killing phase without it; but on a
    // machine so busy that it has refused nothing by then, it runs on until its first refusal
    // (the settle phase still hands jobs out), or a minute past the killing phase.
    const latest = killUntil - 1_000;
    let firstRefusal: number | undefined;
    const running = () => (firstRefusal === undefined ? Date.now() < killUntil + 60_000 : Date.now() < latest && Date.now() < firstRefusal + o.wrongKeysS * 1000);
    while (!run.aborted && member.alive && running()) {
      if (firstRefusal === undefined && refusedLines().length > 0) firstRefusal = Date.now();
      await sleepReal(200);
    }
    ranS = (Date.now() - member.startedAt) / 1000;
    if (run.aborted || !member.alive) return; // an exit nobody asked for is a violation already
    const child = member.child!;
    member.kill('SIGTERM');
    await member.exited;
    exit = child.exitCode === 0 ? undefined : `${member.id} exited with ${child.signalCode ?? `code ${child.exitCode}`} after SIGTERM`;
    run.log(`stopped ${member.id} after ${ranS.toFixed(1)} s: it refused ${refusedLines().length} job messages`);
  };

  const verify = async (): Promise<{ violations: string[]; lines: string[] }> => {
    const violations: string[] = exit ? [exit] : [];
    const refused = refusedLines().length;
    // What the schedulers did with what came back from jobs.dead.
    const schedulerLines = run.members.filter((m) => m.schedules).flatMap((m) => logLines(path.join(run.logDir, `${m.name}.log`)));
    const handedOut = new Set(schedulerLines.filter((l) => l.msg?.startsWith('a runner refused a job message; handing the job out again')).map((l) => String(l.jobId)));
    const abandoned = schedulerLines.filter((l) => l.msg?.startsWith('a job keeps coming back from the jobs dead-letter queue')).length;
    const dead = await run.consumers.messages(run.prefix + QUEUES.jobs + DEAD_LETTER_SUFFIX);
    const lines = [
      `wrong keys     ${member.id} ran ${ranS.toFixed(1)} s and refused ${refused} job messages; the schedulers handed ${handedOut.size} jobs out again from ${QUEUES.jobs}${DEAD_LETTER_SUFFIX}` +
        `${abandoned ? `, left ${abandoned} to JOB_QUEUE_TIMEOUT` : ''}; ${dead ?? '?'} messages left there`,
    ];
    if (refused === 0) violations.push(`(f) ${member.id} refused no job message: the run proved nothing about refused jobs`);
    if (!['fatal', 'error', 'silent'].includes(o.logLevel)) {
      // The schedulers log each hand-out at warn level.
      if (refused > 0 && handedOut.size === 0) violations.push(`(f) ${member.id} refused ${refused} job messages, but no scheduler handed a job out again from ${QUEUES.jobs}${DEAD_LETTER_SUFFIX}`);
    } else lines.push(`               (hand-outs not checked: LOG_LEVEL=${o.logLevel} hides the schedulers' warnings)`);
    if (abandoned > 0) violations.push(`(f) ${abandoned} times a job refused again and again was left to JOB_QUEUE_TIMEOUT`);
    if (dead !== 0) violations.push(`(f) ${run.prefix}${QUEUES.jobs}${DEAD_LETTER_SUFFIX} holds ${dead ?? 'an unknown number of'} messages at the end: refused jobs were not taken back`);
    if (handedOut.size > 0) {
      const rows = await run.store.db.selectFrom('jobs').selectAll().where('id', 'in', [...handedOut]).execute();
      for (const j of rows) {
        const ranWell = j.started_at !== null && (j.status === 'COMPLETED' || (j.status === 'FAILED' && j.status_reason_code === 'UNEXPECTED_STATUS_CODE'));
        if (!ranWell) violations.push(`(f) job ${j.id}, handed out again after a refusal, ended ${j.status}${j.status_reason_code ? ` (${j.status_reason_code})` : ''}${j.started_at === null ? ', never started' : ''}`);
        if (j.runner_id === member.id) violations.push(`(f) job ${j.id} was run by ${member.id}, which has the wrong keys`);
      }
      if (rows.length !== handedOut.size) violations.push(`(f) ${handedOut.size - rows.length} jobs handed out again are not in the store`);
    }
    return { violations, lines };
  };
  return { member, stopDuring, verify };
}

// ---- embedded: restart the one server, by SIGTERM and SIGKILL in turn -----------------------------

interface EmbeddedRestart {
  signal: 'SIGTERM' | 'SIGKILL';
  /** clock time the process had exited */
  exitAt: number;
  /** clock time the new process announced it was running */
  readyAt: number | undefined;
  /** jobs QUEUED or RUNNING when the process had exited: their messages died with it */
  open: { id: string; status: string }[];
  exitProblem: string | undefined;
}

/**
 * Restarts the embedded server (every role, the in-process bus) every
 * --kill-every seconds, SIGTERM and SIGKILL in turn, while jobs run. Each
 * restart loses every job.run message and runner of the old process; the new
 * one must hand the jobs out again at once (docs/adr/0006), not after
 * JOB_QUEUE_TIMEOUT: check (f) wants every job open at a restart to start (or
 * end) within --resume-within of the new process being up.
 */
async function restartEmbedded(run: HarnessRun, o: Options, killUntil: number): Promise<Disrupted> {
  const server = run.members[0]!;
  const restartAfterMs = o.restartAfterS * 1000;
  const restarts: EmbeddedRestart[] = [];
  const watching: Promise<void>[] = [];
  run.log(`restarting for ${o.durationS} s (and on until SIGTERM and SIGKILL were each sent once): the embedded server ~${o.killEveryS} s after it is up, SIGTERM and SIGKILL in turn, started again after ${o.restartAfterS} s`);
  // A restart before the first slot came due would find no work to lose.
  while (!run.aborted && Date.now() < killUntil && (await countJobs(run)) === 0) await sleepReal(200);
  // For the duration, and past it until both signals were sent once: on a busy machine a start can take
  // most of the duration, and a run that restarted once proves nothing about the other signal.
  const more = () => Date.now() < killUntil || restarts.length < 2;
  while (!run.aborted) {
    while (!run.aborted && !(server.alive && server.ready) && more()) await sleepReal(100);
    const wait = o.killEveryS * 1000 * (0.5 + Math.random());
    if (Date.now() + wait > killUntil && restarts.length >= 2) break;
    await sleepReal(wait);
    if (run.aborted) break;
    const signal = restarts.length % 2 === 0 ? 'SIGTERM' : 'SIGKILL';
    const child = server.child!;
    const incarnation = server.incarnation;
    server.kill(signal);
    await server.exited;
    const exitAt = run.clock.now();
    const open = await run.store.db.selectFrom('jobs').select(['id', 'status']).where('status', 'in', ['QUEUED', 'RUNNING']).execute();
    const exitProblem = signal === 'SIGTERM' && child.exitCode !== 0 ? `${server.id} exited with ${child.signalCode ?? `code ${child.exitCode}`} after SIGTERM` : undefined;
    const r: EmbeddedRestart = { signal, exitAt, readyAt: undefined, open, exitProblem };
    restarts.push(r);
    const count = (s: string) => open.filter((j) => j.status === s).length;
    run.log(`restart ${restarts.length}: ${signal} ${server.id}; ${count('QUEUED')} jobs QUEUED and ${count('RUNNING')} RUNNING when it had exited`);
    run.restartLater(server, restartAfterMs);
    watching.push(
      (async () => {
        while (!run.aborted && !(server.alive && server.ready && server.incarnation > incarnation)) await sleepReal(50);
        r.readyAt = run.clock.now();
      })(),
    );
  }
  // The last restart's process comes up during the settling at the latest.
  const report: string[] = [];
  const sigterms = restarts.filter((r) => r.signal === 'SIGTERM').length;
  report.push(`restarts       ${restarts.length} (${sigterms} SIGTERM, ${restarts.length - sigterms} SIGKILL)`);
  run.log(`${restarts.length} restarts`);
  return {
    report,
    checks: [`(f) work resumed within ${o.resumeWithinMs / 1000} s clock of each restart`],
    verify: async () => {
      await Promise.all(watching);
      const violations: string[] = restarts.flatMap((r) => (r.exitProblem ? [r.exitProblem] : []));
      if (restarts.length === 0) violations.push('(f) the server was never restarted: raise --duration or lower --kill-every');
      // A job open at several restarts is judged at the last one (earlier resumptions are overwritten in the store).
      const lastRestartOf = new Map<string, EmbeddedRestart>();
      for (const r of restarts) for (const j of r.open) lastRestartOf.set(j.id, r);
      const ids = [...lastRestartOf.keys()];
      const rows = ids.length ? await run.store.db.selectFrom('jobs').selectAll().where('id', 'in', ids).execute() : [];
      let slowest = 0;
      for (const j of rows) {
        const r = lastRestartOf.get(j.id)!;
        if (r.readyAt === undefined) {
          violations.push(`(f) the server restarted after ${r.signal} never came up`);
          continue;
        }
        const resumedAt = j.started_at !== null && j.started_at > r.exitAt ? j.started_at : j.completed_at !== null && j.completed_at > r.exitAt ? j.completed_at : undefined;
        if (resumedAt === undefined) {
          violations.push(`(f) job ${j.id}, ${r.open.find((x) => x.id === j.id)!.status} at the ${r.signal} (${iso(r.exitAt)}), never started or ended after it (now ${j.status})`);
          continue;
        }
        const after = resumedAt - r.readyAt;
        slowest = Math.max(slowest, after);
        if (after > o.resumeWithinMs) {
          violations.push(`(f) job ${j.id}, open at the ${r.signal} (${iso(r.exitAt)}), resumed ${(after / 1000).toFixed(1)} s clock after the new process was up (${iso(r.readyAt)}), more than ${o.resumeWithinMs / 1000} s`);
        }
      }
      const open = restarts.reduce((n, r) => n + r.open.length, 0);
      report.push(`resumed        ${rows.length} jobs open at a restart (${open} counting each restart) started or ended again at most ${(slowest / 1000).toFixed(1)} s clock after the new process was up`);
      return violations;
    },
  };
}

async function countJobs(run: HarnessRun): Promise<number> {
  const row = await run.store.db.selectFrom('jobs').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
  return Number(row.n);
}

// ---- logs ---------------------------------------------------------------------------

interface LogLine {
  msg?: string;
  jobId?: unknown;
  claimed?: { type?: string };
}

/** The pino JSON lines of a member's log file (the harness's own `---` lines and anything else skipped). */
function logLines(file: string): LogLine[] {
  if (!fs.existsSync(file)) return [];
  const lines: LogLine[] = [];
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    if (!line.startsWith('{')) continue;
    try {
      lines.push(JSON.parse(line) as LogLine);
    } catch {
      // a line cut short by a SIGKILL
    }
  }
  return lines;
}

exitWith('chaos', main(process.argv.slice(2)));
