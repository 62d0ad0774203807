// Direct access to the benchmark's SQLite file for the scheduling suites, in a
// process of its own (the orloj process under test stays untouched, the load
// generator never imports @orloj/common): seeds built workflows before orloj
// starts, moves their schedule once it runs, and reads the jobs table
// afterwards. No HTTP: it reports port 0.
import { sql } from 'kysely';
import { newId } from '@orloj/common/core';
import { contractInterval, jitterOffsetMs, scheduleOf } from '@orloj/common/domain';
import { loadConfig } from '@orloj/common/config';
import { openDatabase, Store } from '@orloj/common/store';
import { serveParent } from '../lib/child.js';
import { engineVersion, recountWorkflows } from '../lib/seed.js';
import { lagSummary } from '../lib/stats.js';
import { phases, slotCoverage } from '../lib/window-analysis.js';
import { seedHistory } from '../lib/seed-history.js';
import type { DueOrder, JobTimes } from '../lib/schedule-db.js';

const config = loadConfig(process.env);
const database = openDatabase(config.databaseUrl, { upkeep: false });
await database.migrate();
const store = Store.fromHandle(database);
const { db } = store;

const BATCH = 500; // rows per insert: 16 columns × 500 stays under SQLite's bind-parameter limit
/** Seeded slots start this far in the future until shiftSchedule() moves them. */
const PARKED_MS = 24 * 60 * 60_000;
let parkedAt = 0;
/** When the workflows were seeded: jobs created before it are generated history (seedHistory), not the run's. */
let seededAt = 0;
/** Whether the seeded workflows are cron ones: their slots are instants of the clock, so shiftSchedule moves them by whole minutes only. */
let seededCron = false;
const MINUTE = 60_000;

/** Cron workflows to seed: one expression, read in each zone in turn, every slot moved by a per-workflow jitter. */
interface CronSeed {
  expression: string;
  zones: readonly string[];
  jitterSeconds: number;
}

/** FAILED jobs of the run (not of the generated history) by reason ("CODE: message"), for the reports. */
async function failureReasons(slotAt?: number): Promise<Record<string, number>> {
  let q = db
    .selectFrom('jobs')
    .select(['status_reason_code', 'status_reason_message', (eb) => eb.fn.countAll<number>().as('n')])
    .where('status', '=', 'FAILED')
    .where('created_at', '>=', seededAt);
  if (slotAt !== undefined) q = q.where('slot_at', '=', slotAt);
  const rows = await q.groupBy(['status_reason_code', 'status_reason_message']).execute();
  return Object.fromEntries(rows.map((r) => [`${r.status_reason_code ?? '?'}: ${r.status_reason_message ?? ''}`, Number(r.n)]));
}

serveParent(
  0,
  {
    async info() {
      return { engine: await engineVersion(store) };
    },

    /**
     * A user and `count` built HEARTBEAT workflows on the endpoint, interval
     * `intervalMinutes`, their first slots spread evenly over `spreadMs` (0:
     * all at one instant) in `dueOrder` (default random) and parked a day
     * ahead until shiftSchedule().
     * With `cron`, each runs on that expression instead, in the zones in turn,
     * spread by the jitter (interval and spread then do not apply): built 1 ms
     * before the parked minute and due at its own first slot after it, as the
     * scheduler sets it after a build, so shiftSchedule() moves each to its own
     * first slot in the first minute, not all of them at once.
     */
    async seedHeartbeats(arg: { count: number; intervalMinutes: number; spreadMs: number; endpoint: string; cron?: CronSeed; dueOrder?: DueOrder; passwordHash?: string }) {
      const started = performance.now();
      const now = Date.now();
      const { cron } = arg;
      // Cron slots are minutes of the clock (plus the jitter): a cron seed parks on a minute, and moves by whole minutes.
      parkedAt = cron ? Math.ceil((now + PARKED_MS) / MINUTE) * MINUTE : now + PARKED_MS;
      const userId = newId();
      const payload = JSON.stringify({ endpoint: arg.endpoint, method: 'GET', expected_status_code: 200, timeout: '10s' });
      const intervalMs = arg.intervalMinutes * MINUTE;
      seededCron = cron !== undefined;
      seededAt = now;
      // What `interval` holds for a cron workflow (its longest gap), once per zone: it walks a year of slots.
      const cronInterval = new Map(cron?.zones.map((zone) => [zone, contractInterval(cron.expression, zone, 0, now)]));
      const place = arg.dueOrder === 'ids' ? (i: number) => i : shuffled(arg.count);
      await store.transaction(async (tx) => {
        await tx.users.insert({
          id: userId,
          email: `bench-${userId}@example.com`,
          passwordHash: arg.passwordHash ?? 'not a hash: this user never signs in',
          notificationPreference: 'NONE',
          createdAt: now,
          updatedAt: now,
        });
        for (let start = 0; start < arg.count; start += BATCH) {
          const rows = [];
          for (let i = start; i < Math.min(arg.count, start + BATCH); i++) {
            const id = newId();
            const zone = cron?.zones[i % cron.zones.length];
            const builtAt = cron ? parkedAt - 1 : parkedAt + Math.floor((place(i) * arg.spreadMs) / arg.count) - intervalMs;
            const interval = cron ? cronInterval.get(zone!)! : arg.intervalMinutes;
            const offset = cron ? jitterOffsetMs(id, cron.jitterSeconds) : 0;
            const due = cron
              ? scheduleOf({ buildCompletedAt: builtAt, intervalMinutes: interval, cron: cron.expression, timeZone: zone!, jitterOffsetMs: offset, firstRun: 'at_first_slot' })!.firstSlotAfter(builtAt)
              : builtAt + intervalMs;
            const name = `Heartbeat ${i}`;
            rows.push({
              id,
              user_id: userId,
              name,
              name_folded: name.toLowerCase(),
              payload,
              kind: 'HEARTBEAT' as const,
              build_status: 'COMPLETED' as const,
              interval_minutes: interval,
              consecutive_job_failures_count: 0,
              max_consecutive_job_failures_allowed: 3,
              log_retention: 0,
              generation: 0,
              created_at: now,
              updated_at: now,
              terminated_at: null,
              build_completed_at: builtAt,
              next_due_at: due,
              ...(cron ? { cron: cron.expression, timezone: zone!, jitter_seconds: cron.jitterSeconds, jitter_offset_ms: offset } : {}),
            });
          }
          await tx.db.insertInto('workflows').values(rows).execute();
        }
        await recountWorkflows(tx, userId);
      });
      return { ms: Math.round(performance.now() - started), email: `bench-${userId}@example.com` };
    },

    /** A year of history for the seeded workflows (lib/seed-history.ts). */
    async seedHistory(arg: { jobs: number; days: number }) {
      const started = performance.now();
      const result = await seedHistory(store, arg);
      return { ...result, ms: Math.round(performance.now() - started) };
    },

    /** One finished job of the history (the api reads' job page). */
    async someFinishedJob() {
      return db.selectFrom('jobs').select(['id', 'workflow_id']).where('status', '=', 'COMPLETED').orderBy('completed_at', 'desc').limit(1).executeTakeFirst();
    },

    /**
     * Moves every seeded schedule so that the first slot of the first workflow
     * is `firstDueAt` (one UPDATE). Cron workflows move from the parked minute
     * to `firstDueAt`, a minute too: each then is due at its own first slot in
     * that minute, built 1 ms before it.
     */
    async shiftSchedule(arg: { firstDueAt: number }) {
      const started = performance.now();
      const delta = arg.firstDueAt - parkedAt;
      if (seededCron && delta % MINUTE !== 0) throw new Error(`cron workflows move by whole minutes: ${arg.firstDueAt} is not on a minute`);
      await db
        .updateTable('workflows')
        .set((eb) => ({
          next_due_at: sql<number>`${eb.ref('next_due_at')} + ${delta}`,
          build_completed_at: sql<number>`${eb.ref('build_completed_at')} + ${delta}`,
        }))
        .execute();
      return { ms: Math.round(performance.now() - started) };
    },

    /** AUTOMATIC jobs of one slot instant, by status. */
    async slotProgress(arg: { slotAt: number }) {
      const rows = await db
        .selectFrom('jobs')
        .select(['status', (eb) => eb.fn.countAll<number>().as('n')])
        .where('trigger', '=', 'AUTOMATIC')
        .where('slot_at', '=', arg.slotAt)
        .groupBy('status')
        .execute();
      return Object.fromEntries(rows.map((r) => [r.status, Number(r.n)])) as Record<string, number>;
    },

    /** The steady-state verdict from the tables alone (the rule: slotCoverage in lib/window-analysis.ts). */
    async analyzeWindow(arg: { windowStart: number; windowEnd: number; stopAt: number }) {
      const { windowStart: ws, windowEnd: we } = arg;
      const workflows = await db.selectFrom('workflows').select(['id', 'build_completed_at', 'interval_minutes', 'cron', 'timezone', 'jitter_offset_ms', 'first_run']).execute();
      const jobs = await db
        .selectFrom('jobs')
        .select(['workflow_id', 'slot_at', 'status', 'created_at', 'queued_at', 'started_at', 'completed_at', 'updated_at'])
        .where('trigger', '=', 'AUTOMATIC')
        .where('slot_at', '>=', ws)
        .execute();
      // Each workflow's own slots, as the scheduler computes them (interval or cron, jitter).
      const coverage = slotCoverage(workflows, jobs, arg, (w, from, to) =>
        scheduleOf({ buildCompletedAt: w.build_completed_at, intervalMinutes: w.interval_minutes, cron: w.cron, timeZone: w.timezone, jitterOffsetMs: w.jitter_offset_ms, firstRun: w.first_run })?.slotsIn(from, to, Number.MAX_SAFE_INTEGER) ?? [],
      );
      const completed = await db
        .selectFrom('jobs')
        .select((eb) => [
          eb.fn.count<number>('id').filterWhere((f) => f.and([f('completed_at', '>=', ws), f('completed_at', '<', we)])).as('inWindow'),
          // A start applied after its result changes nothing: the job ends with no runner recorded.
          eb.fn.count<number>('id').filterWhere((f) => f.and([f('runner_id', 'is', null), f('slot_at', '>=', ws)])).as('withoutRunner'),
        ])
        .where('status', '=', 'COMPLETED')
        .executeTakeFirstOrThrow();
      const totals = await db.selectFrom('jobs').select(['status', (eb) => eb.fn.countAll<number>().as('n')]).groupBy('status').execute();
      return {
        ...coverage,
        completedInWindow: Number(completed.inWindow),
        completedWithoutRunner: Number(completed.withoutRunner),
        allJobs: Object.fromEntries(totals.map((r) => [r.status, Number(r.n)])) as Record<string, number>,
        failures: await failureReasons(),
      };
    },

    /** The burst: every AUTOMATIC job of the slot instant, when each step of the last one happened, and the lag. */
    async analyzeSlot(arg: { slotAt: number; stopAt: number }) {
      const rows = await db
        .selectFrom('jobs')
        .select(['slot_at', 'status', 'created_at', 'queued_at', 'started_at', 'completed_at', 'updated_at'])
        .where('trigger', '=', 'AUTOMATIC')
        .where('slot_at', '=', arg.slotAt)
        .execute();
      const last = (pick: (r: JobTimes) => number | null) => {
        const values = rows.map(pick).filter((v): v is number => v !== null);
        return values.length ? values.reduce((m, v) => Math.max(m, v), Number.NEGATIVE_INFINITY) - arg.slotAt : Number.NaN;
      };
      const statuses: Record<string, number> = {};
      for (const r of rows) statuses[r.status] = (statuses[r.status] ?? 0) + 1;
      const done = rows.filter((r) => r.status === 'COMPLETED');
      return {
        jobs: rows.length,
        statuses,
        lastCreated: last((r) => r.created_at),
        lastQueued: last((r) => r.queued_at),
        lastStarted: last((r) => r.started_at),
        lastFinished: last((r) => r.completed_at),
        /** The last job's COMPLETED as the store saw it (the scheduler applied job.finished). */
        lastCompleted: done.length ? done.reduce((m, r) => Math.max(m, r.updated_at), Number.NEGATIVE_INFINITY) - arg.slotAt : Number.NaN,
        lag: lagSummary(rows.map((r) => (r.started_at !== null ? { v: r.started_at - r.slot_at, censored: false } : { v: arg.stopAt - r.slot_at, censored: true }))),
        phases: phases(rows),
        failures: await failureReasons(arg.slotAt),
      };
    },

    /** Timestamps of these jobs (the container suite's breakdown). */
    async jobRows(arg: { ids: string[] }) {
      if (!arg.ids.length) return [];
      return db
        .selectFrom('jobs')
        .select(['id', 'status', 'attempts', 'scheduled_at', 'created_at', 'queued_at', 'dispatched_at', 'started_at', 'completed_at', 'updated_at'])
        .where('id', 'in', arg.ids)
        .execute();
    },
  },
  () => database.close(),
);

/** A fixed permutation of [0, n) (Fisher–Yates over mulberry32 from a constant seed): the same order at every run. */
function shuffled(n: number): (i: number) => number {
  const order = Array.from({ length: n }, (_, i) => i);
  let state = 0x2545f491;
  const random = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  for (let i = n - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [order[i], order[j]] = [order[j]!, order[i]!];
  }
  return (i) => order[i]!;
}

