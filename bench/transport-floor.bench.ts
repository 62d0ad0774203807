/**
 * What a job's messages and rows cost with no orloj logic at all,
 * on the embedded default and on PostgreSQL + RabbitMQ — the floor under the
 * scheduling suite's CPU per job, measured at the same job rate.
 *
 * - The messages: the four a job sends between roles (job.run, job.started,
 *   job.finished, domain.event), through orloj's own bus and envelope code:
 *   the in-process bus unsigned (ADR 0004), or RabbitMQ with publisher
 *   confirms, durable queues and Ed25519 signatures, what a role publishes
 *   together signed once (ADR 0024: the pass's job.run messages, a burst's
 *   job events and domain events). The consumers only pass each message on.
 * - The rows: what a job writes, by the same set-wise store calls orloj makes
 *   (the job inserted QUEUED, started, finished with its outcome event, the
 *   event relayed, then applied: dedupe record, counters, notification,
 *   outbox row removed), a batch every 100 ms, without reading anything the
 *   scheduler reads to decide.
 *
 * Floor of a topology = its messages + its rows. A CPU-per-job target stated
 * as a ratio to the embedded default cannot be met below the ratio of the
 * two floors.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { systemClock } from '@orloj/common/core';
import { createDueJob, domainEvents, finishAttempt, newWorkflow, startAttempt, type Job, type Workflow } from '@orloj/common/domain';
import { createBus, type Bus } from '@orloj/common/bus';
import { ensureKeyDir, roleBus, type RoleKeys } from '@orloj/common/envelope';
import { silentLogger } from '@orloj/common/logging';
import { MESSAGE_TYPES, QUEUES, type JobRunMessage } from '@orloj/common/messages';
import { openDatabase, Store } from '@orloj/common/store';
import { meterCpu, meterOwnCpu, pidsNamed, type CpuMeter } from './lib/cpu.js';
import { createBenchDatabase, type Engine } from './lib/orloj.js';
import { envInt, fmt, sleep } from './lib/stats.js';
import type { BenchSuite, SuiteContext, SuiteReport } from './lib/suite.js';
import { codeVersion } from './lib/versions.js';

const TICK_MS = 100;
const PAYLOAD = JSON.stringify({ endpoint: 'http://127.0.0.1:8081/health', method: 'GET', expected_status: 200, timeout: '10s', headers: {} });

interface Settings {
  /** Jobs a second: 10,000 one-minute workflows by default. */
  rate: number;
  durationS: number;
  amqpUrl: string;
}

interface Measured {
  label: string;
  jobs: number;
  /** % of one core, by part */
  cpu: Record<string, number | undefined>;
  perJobMs: number;
}

/** Sums meters started together; undefined parts count as 0 (reported as n/a). */
function stopAll(meters: Record<string, CpuMeter>): Record<string, number | undefined> {
  return Object.fromEntries(Object.entries(meters).map(([k, m]) => [k, m.stop()]));
}

function perJob(cpu: Record<string, number | undefined>, jobs: number, seconds: number): number {
  const total = Object.values(cpu).reduce<number>((s, v) => s + (v ?? 0), 0);
  return jobs > 0 ? (total / 100) * seconds * 1000 / jobs : Number.NaN;
}

/** Runs `tick` every TICK_MS for the duration, then waits for `done() >= expected` (at most 30 s). */
async function paced(s: Settings, tick: (n: number) => Promise<void>): Promise<number> {
  const perTick = (s.rate * TICK_MS) / 1000;
  const ticks = Math.round((s.durationS * 1000) / TICK_MS);
  const started = performance.now();
  let owed = 0;
  let sent = 0;
  for (let t = 0; t < ticks; t++) {
    owed += perTick;
    const n = Math.floor(owed);
    owed -= n;
    await tick(n);
    sent += n;
    await sleep(started + (t + 1) * TICK_MS - performance.now());
  }
  return sent;
}

function workflowsFor(s: Settings, userId: string): Workflow[] {
  return Array.from({ length: Math.max(1, s.rate * 60) }, (_, i) => ({
    ...newWorkflow({ userId, name: `floor ${i}`, kind: 'HEARTBEAT', payload: PAYLOAD, intervalMinutes: 1, maxConsecutiveJobFailuresAllowed: 3 }, 0),
    buildStatus: 'COMPLETED' as const,
    buildCompletedAt: 0,
  }));
}

/** A job as the store would hold it once finished, and the bodies its messages carry. */
function finished(job: Job, now: number): Job {
  return { ...job, status: 'COMPLETED', runnerId: 'runner-floor', startedAt: now, completedAt: now + 3, check: { statusCode: 200, responseTimeMs: 3, failure: null } };
}

/** The four messages of a job between roles, with consumers that only pass them on. */
async function measureMessages(s: Settings, inProcess: boolean): Promise<Measured> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'orloj-bench-floor-'));
  const keys: RoleKeys = await ensureKeyDir(dataDir);
  const prefix = `bench-floor-${crypto.randomBytes(4).toString('hex')}.`;
  // A connection of its own for each role, as each role process has (the in-process bus is one bus by nature).
  const shared: Bus | undefined = inProcess ? await createBus('memory:', { logger: silentLogger, prefix }) : undefined;
  const buses: Bus[] = [];
  const as = async (role: 'scheduler' | 'runners' | 'notifier') => {
    const bus = shared ?? (await createBus(s.amqpUrl, { logger: silentLogger, prefix }));
    buses.push(bus);
    return roleBus({ bus, role, keys, clock: systemClock, logger: silentLogger });
  };
  const [scheduler, runners, notifier] = [await as('scheduler'), await as('runners'), await as('notifier')];
  const workflows = workflowsFor(s, crypto.randomUUID());
  let applied = 0;
  const subs = [
    await runners.consume(
      QUEUES.jobs,
      async (e) => {
        if (e.type !== MESSAGE_TYPES.jobRun) return;
        const m = e.body;
        const now = Date.now();
        await runners.publish(QUEUES.jobEvents, MESSAGE_TYPES.jobStarted, { job_id: m.job_id, attempt: m.attempt, runner_id: 'runner-floor', started_at: now });
        await runners.publish(QUEUES.jobEvents, MESSAGE_TYPES.jobFinished, {
          job_id: m.job_id,
          attempt: m.attempt,
          runner_id: 'runner-floor',
          status: 'COMPLETED',
          started_at: now,
          finished_at: now + 3,
          check: { status_code: 200, response_time_ms: 3 },
        });
      },
      { prefetch: 64 },
    ),
    await scheduler.consume(
      QUEUES.jobEvents,
      async (e) => {
        if (e.type !== MESSAGE_TYPES.jobFinished) return;
        const w = workflows[0]!;
        const job = finished({ ...createDueJob(w, 0, e.body.started_at), id: e.body.job_id }, e.body.started_at);
        // The relay's publish of the job's outcome event (the notifier role signs it).
        await notifier.publish(QUEUES.domainEvents, MESSAGE_TYPES.domainEvent, domainEvents.jobEnded(w, job, Date.now()));
      },
      { prefetch: 64 },
    ),
    await notifier.consume(QUEUES.domainEvents, () => void (applied += 1), { prefetch: 16 }),
  ];
  const meters = { node: meterOwnCpu(), ...(inProcess ? {} : { rabbitmq: meterCpu(() => pidsNamed('beam.smp')) }) };
  const started = performance.now();
  let next = 0;
  const sent = await paced(s, async (n) => {
    // A pass's hand-out, published together as HandOut.send does.
    const pass = Array.from({ length: n }, () => workflows[next++ % workflows.length]!);
    await Promise.all(
      pass.map((w) => {
        const body: JobRunMessage = { job_id: crypto.randomUUID(), workflow_id: w.id, attempt: 1, kind: 'HEARTBEAT', payload: w.payload, log_retention: false };
        return scheduler.publish(QUEUES.jobs, MESSAGE_TYPES.jobRun, body, { subject: w.userId });
      }),
    );
  });
  for (const deadline = Date.now() + 30_000; applied < sent && Date.now() < deadline; ) await sleep(20);
  const seconds = (performance.now() - started) / 1000;
  const cpu = stopAll(meters);
  for (const sub of subs) await sub.cancel();
  // Their queues and exchanges go too (the in-process bus has nothing to delete).
  for (const bus of new Set(buses)) await ('destroy' in bus && typeof bus.destroy === 'function' ? (bus.destroy as () => Promise<void>)() : bus.close());
  fs.rmSync(dataDir, { recursive: true, force: true });
  const label = inProcess ? 'messages: in-process bus, unsigned (embedded default)' : 'messages: RabbitMQ, confirmed and signed (distributed)';
  return { label, jobs: applied, cpu, perJobMs: perJob(cpu, applied, seconds) };
}

/** A job's rows by the store calls orloj makes, a batch every tick, on a fresh database. */
async function measureRows(s: Settings, engine: Engine): Promise<Measured> {
  const db = await createBenchDatabase(engine);
  const handle = openDatabase(db.url);
  try {
    await handle.migrate();
    const store = Store.fromHandle(handle);
    const userId = crypto.randomUUID();
    await store.users.insert({ id: userId, email: `${userId}@bench.example`, passwordHash: 'x', notificationPreference: 'ALL', createdAt: 0, updatedAt: 0 });
    const workflows = workflowsFor(s, userId);
    await store.transaction(async (tx) => {
      for (const w of workflows) await tx.workflows.insert(w);
    });
    const meters = { node: meterOwnCpu(), ...(engine === 'postgres' ? { postgres: meterCpu(() => pidsNamed('postgres')) } : {}) };
    const started = performance.now();
    let next = 0;
    let done = 0;
    const sent = await paced(s, async (n) => {
      if (n === 0) return;
      const now = Date.now();
      const jobs = Array.from({ length: n }, () => createDueJob(workflows[next++ % workflows.length]!, now, now));
      await store.transaction((tx) => tx.jobs.insertMany(jobs));
      await store.transaction(async (tx) => {
        await tx.jobMoves.applyMany(jobs.map((j) => ({ id: j.id, t: startAttempt({ attempt: 1, runnerId: 'runner-floor', startedAt: now }, now, 30_000) })), now);
        const ended = await tx.jobMoves.applyMany(
          jobs.map((j) => ({ id: j.id, t: finishAttempt({ attempt: 1, status: 'COMPLETED', startedAt: now, finishedAt: now + 3, check: { statusCode: 200, responseTimeMs: 3, failure: null } }) })),
          now,
        );
        const byId = new Map(workflows.map((w) => [w.id, w]));
        await tx.outbox.addMany(ended.map((j) => domainEvents.jobEnded(byId.get(j.workflowId)!, j, now)));
      });
      const events = await store.outbox.claimDue(Date.now(), Date.now() + 30_000, 1_000);
      await store.outbox.markPublished(events.map((e) => e.id), Date.now(), Date.now() + 3_600_000);
      await store.transaction(async (tx) => {
        await tx.analytics.markAppliedMany(events.map((e) => e.id), Date.now());
        const adds = new Map<string, { workflowId: string; userId: string; kind: 'HEARTBEAT'; jobs: number; durationS: number }>();
        for (const e of events) {
          const a = adds.get(e.workflow_id) ?? { workflowId: e.workflow_id, userId, kind: 'HEARTBEAT', jobs: 0, durationS: 0 };
          a.jobs += 1;
          adds.set(e.workflow_id, a);
        }
        await tx.analytics.addToWorkflows([...adds.values()]);
        await tx.workflows.holdExisting(events.map((e) => e.workflow_id));
        const at = Date.now();
        await tx.notifications.insertMany(
          events.map((e) => ({ id: crypto.randomUUID(), userId, workflowId: e.workflow_id, dedupeKey: `${userId}:${e.id}`, kind: 'WEB_SUCCESS', payload: '{"title":"Job completed"}', readAt: null, createdAt: at, updatedAt: at })),
        );
        await tx.outbox.removeMany(events.map((e) => e.id));
      });
      done += events.length;
    });
    const seconds = (performance.now() - started) / 1000;
    const cpu = stopAll(meters);
    if (done !== sent) throw new Error(`rows: ${done} of ${sent} jobs went through`);
    const label = engine === 'postgres' ? 'rows: PostgreSQL, set-wise (distributed)' : 'rows: SQLite, set-wise (embedded default)';
    return { label, jobs: done, cpu, perJobMs: perJob(cpu, done, seconds) };
  } finally {
    await handle.close();
    await db.drop();
  }
}

function settingsFromEnv(): Settings {
  const workflows = envInt('BENCH_FLOOR_WORKFLOWS', 10_000, 60);
  return {
    rate: workflows / 60,
    durationS: envInt('BENCH_FLOOR_DURATION', 60, 5),
    amqpUrl: process.env.BENCH_AMQP_URL?.trim() || 'amqp://guest:guest@127.0.0.1:5672',
  };
}

const pct = (v: number | undefined) => (v === undefined ? 'n/a' : `${fmt(v)} %`);

async function run(ctx: SuiteContext): Promise<SuiteReport> {
  const s = settingsFromEnv();
  const rows: Measured[] = [];
  for (const [what, f] of [
    ['in-process messages', () => measureMessages(s, true)],
    ['RabbitMQ messages', () => measureMessages(s, false)],
    ['SQLite rows', () => measureRows(s, 'sqlite')],
    ['PostgreSQL rows', () => measureRows(s, 'postgres')],
  ] as const) {
    ctx.log(`${what}: ${fmt(s.rate, 1)} jobs/s for ${s.durationS} s`);
    const m = await f();
    ctx.log(`${what}: ${fmt(m.perJobMs, 3)} ms CPU a job (${Object.entries(m.cpu).map(([k, v]) => `${k} ${pct(v)}`).join(', ')})`);
    rows.push(m);
  }
  const [memory, amqp, sqlite, postgres] = rows as [Measured, Measured, Measured, Measured];
  const embedded = memory.perJobMs + sqlite.perJobMs;
  const distributed = amqp.perJobMs + postgres.perJobMs;
  const table = rows.map((m) => [m.label, fmt(m.jobs), Object.entries(m.cpu).map(([k, v]) => `${k} ${pct(v)}`).join(', '), fmt(m.perJobMs, 3)]);
  table.push(['**floor, embedded default** (in-process messages + SQLite rows)', '', '', `**${fmt(embedded, 3)}**`]);
  table.push(['**floor, distributed** (RabbitMQ messages + PostgreSQL rows)', '', '', `**${fmt(distributed, 3)}** (${fmt(distributed / embedded, 1)}× the embedded floor)`]);
  return {
    description:
      'What a job’s messages and rows cost with no orloj logic at all, at the job rate of N one-minute workflows (N / 60 jobs a second): the four messages a job sends between roles (job.run, job.started, job.finished, domain.event) through orloj’s bus and envelope code, consumers passing each on; and a job’s rows by the set-wise store calls orloj makes (inserted QUEUED, started, finished with its outcome event, relayed, applied: dedupe record, counters, notification, outbox row removed), a batch every 100 ms. One process drives each row; CPU is that process plus, for RabbitMQ, beam.smp and, for PostgreSQL, every postgres process. The floor of a topology is its messages plus its rows: the least CPU a job can cost there before any scheduling work.',
    settings: [
      ['Code', codeVersion()],
      ['Rate', `${fmt(s.rate, 1)} jobs/s (BENCH_FLOOR_WORKFLOWS ${fmt(s.rate * 60)} one-minute workflows), ${s.durationS} s each (BENCH_FLOOR_DURATION)`],
      ['Messages', 'in-process: MemoryBus, unsigned (ADR 0004); RabbitMQ: durable queues, persistent messages, publisher confirms, Ed25519 envelopes signed once for what a role publishes together (ADR 0024: job.run apart under one signature, job and domain events in batch envelopes), acks by batch, prefetch 64 / 64 / 16 as the roles use; a connection per role'],
      ['Rows', 'SQLite: a temp file (WAL); PostgreSQL: a fresh schema in BENCH_DATABASE_URL; the job tables of orloj’s migrations'],
    ],
    table: { columns: ['Part', 'jobs', 'CPU (% of one core)', 'CPU ms a job'], rows: table },
    verdict: [
      `The distributed path’s floor is ${fmt(distributed / embedded, 1)}× the embedded default’s (${fmt(distributed, 3)} against ${fmt(embedded, 3)} ms CPU a job): a CPU-per-job target below that ratio is out of reach for any scheduler logic on this transport.`,
    ],
    notes: ['Issue 19, target 1 states CPU per job within 2× of the embedded default’s; docs/benchmarks.md (“Issue 19: the distributed path”) sets this floor beside the measured runs.'],
    valid: rows.every((m) => Number.isFinite(m.perJobMs)),
  };
}

export const transportFloor: BenchSuite = {
  name: 'transport-floor',
  title: 'Scheduling: the transport floor of a job on each topology',
  run,
};
