// Direct access to the benchmark's SQLite file for the scheduling suites, in a
// process of its own (the orloj process under test stays untouched, the load
// generator never imports @orloj/common): seeds built workflows before orloj
// starts, moves their schedule once it runs, and reads the jobs table
// afterwards. No HTTP: it reports port 0.
import { sql } from 'kysely';
import { newId } from '@orloj/common/core';
import { loadConfig } from '@orloj/common/config';
import { openDatabase, Store } from '@orloj/common/store';
import { serveParent } from '../lib/child.js';
import { engineVersion, recountWorkflows } from '../lib/seed.js';
import { lagSummary, summarize, type Lag, type Summary } from '../lib/stats.js';
import type { JobTimes } from '../lib/schedule-db.js';

const config = loadConfig(process.env);
const database = openDatabase(config.databaseUrl);
await database.migrate();
const store = Store.fromHandle(database);
const { db } = store;

const BATCH = 500; // rows per insert: 16 columns × 500 stays under SQLite's bind-parameter limit
/** Seeded slots start this far in the future until shiftSchedule() moves them. */
const PARKED_MS = 24 * 60 * 60_000;
let parkedAt = 0;

/** Where the time between the due slot and the end went, per step (ms). */
function phases(rows: JobTimes[]): Record<string, Summary> {
  const diff = (pick: (r: JobTimes) => [number | null, number | null]) =>
    summarize(
      rows.flatMap((r) => {
        const [from, to] = pick(r);
        return from === null || to === null ? [] : [to - from];
      }),
    );
  // created_at and queued_at are both the clock reading at the start of the
  // scheduler tick that created and dispatched the job (one `now` per tick).
  return {
    'slot → tick that created the job': diff((r) => [r.slot_at, r.created_at]),
    'created → tick that QUEUED it': diff((r) => [r.created_at, r.queued_at]),
    'that tick → started by a runner': diff((r) => [r.queued_at, r.started_at]),
    'started → finished': diff((r) => [r.started_at, r.completed_at]),
    'finished → COMPLETED in the store': diff((r) => (r.status === 'COMPLETED' ? [r.completed_at, r.updated_at] : [null, null])),
  };
}

/** FAILED jobs by reason ("CODE: message"), for the reports. */
async function failureReasons(slotAt?: number): Promise<Record<string, number>> {
  let q = db
    .selectFrom('jobs')
    .select(['status_reason_code', 'status_reason_message', (eb) => eb.fn.countAll<number>().as('n')])
    .where('status', '=', 'FAILED');
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
     * all at one instant) and parked a day ahead until shiftSchedule().
     */
    async seedHeartbeats(arg: { count: number; intervalMinutes: number; spreadMs: number; endpoint: string }) {
      const started = performance.now();
      const now = Date.now();
      parkedAt = now + PARKED_MS;
      const userId = newId();
      const payload = JSON.stringify({ endpoint: arg.endpoint, method: 'GET', expected_status_code: 200, timeout: '10s' });
      const intervalMs = arg.intervalMinutes * 60_000;
      await store.transaction(async (tx) => {
        await tx.users.insert({
          id: userId,
          email: `bench-${userId}@example.com`,
          passwordHash: 'not a hash: this user never signs in',
          notificationPreference: 'NONE',
          createdAt: now,
          updatedAt: now,
        });
        for (let start = 0; start < arg.count; start += BATCH) {
          const rows = [];
          for (let i = start; i < Math.min(arg.count, start + BATCH); i++) {
            const due = parkedAt + Math.floor((i * arg.spreadMs) / arg.count);
            const name = `Heartbeat ${i}`;
            rows.push({
              id: newId(),
              user_id: userId,
              name,
              name_folded: name.toLowerCase(),
              payload,
              kind: 'HEARTBEAT' as const,
              build_status: 'COMPLETED' as const,
              interval_minutes: arg.intervalMinutes,
              consecutive_job_failures_count: 0,
              max_consecutive_job_failures_allowed: 3,
              log_retention: 0,
              generation: 0,
              created_at: now,
              updated_at: now,
              terminated_at: null,
              build_completed_at: due - intervalMs,
              next_due_at: due,
            });
          }
          await tx.db.insertInto('workflows').values(rows).execute();
        }
        await recountWorkflows(tx, userId);
      });
      return { ms: Math.round(performance.now() - started) };
    },

    /** Moves every seeded schedule so that the first slot of the first workflow is `firstDueAt` (one UPDATE). */
    async shiftSchedule(arg: { firstDueAt: number }) {
      const started = performance.now();
      const delta = arg.firstDueAt - parkedAt;
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

    /**
     * The steady-state verdict from the tables alone. Every slot of every
     * workflow due in [windowStart, windowEnd) either has its AUTOMATIC job
     * or is missed: "skipped" when the workflow already has a job for a later
     * slot (orloj runs only the most recent missed slot), "no job" when none
     * existed yet at stopAt. Lag = started_at − slot_at; a job not started by
     * stopAt counts with stopAt − slot_at as a lower bound.
     */
    async analyzeWindow(arg: { windowStart: number; windowEnd: number; stopAt: number }) {
      const { windowStart: ws, windowEnd: we, stopAt } = arg;
      const workflows = await db.selectFrom('workflows').select(['id', 'build_completed_at', 'interval_minutes']).execute();
      const jobs = await db
        .selectFrom('jobs')
        .select(['workflow_id', 'slot_at', 'status', 'created_at', 'queued_at', 'started_at', 'completed_at', 'updated_at'])
        .where('trigger', '=', 'AUTOMATIC')
        .where('slot_at', '>=', ws)
        .execute();
      const byWorkflow = new Map<string, { slots: Map<number, JobTimes>; last: number }>();
      for (const j of jobs) {
        let e = byWorkflow.get(j.workflow_id);
        if (!e) byWorkflow.set(j.workflow_id, (e = { slots: new Map(), last: -Infinity }));
        e.slots.set(j.slot_at, j);
        if (j.slot_at > e.last) e.last = j.slot_at;
      }
      let due = 0;
      let skipped = 0;
      let noJob = 0;
      const lags: Lag[] = [];
      const windowJobs: JobTimes[] = [];
      const statuses: Record<string, number> = {};
      for (const w of workflows) {
        if (w.build_completed_at === null) continue;
        const interval = w.interval_minutes * 60_000;
        const anchor = w.build_completed_at;
        const first = Math.max(1, Math.ceil((ws - anchor) / interval));
        const e = byWorkflow.get(w.id);
        for (let slot = anchor + first * interval; slot < we; slot += interval) {
          due += 1;
          const job = e?.slots.get(slot);
          if (!job) {
            if (e && e.last > slot) skipped += 1;
            else noJob += 1;
            continue;
          }
          windowJobs.push(job);
          statuses[job.status] = (statuses[job.status] ?? 0) + 1;
          lags.push(job.started_at !== null ? { v: job.started_at - slot, censored: false } : { v: stopAt - slot, censored: true });
        }
      }
      const completed = await db
        .selectFrom('jobs')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .where('status', '=', 'COMPLETED')
        .where('completed_at', '>=', ws)
        .where('completed_at', '<', we)
        .executeTakeFirstOrThrow();
      const totals = await db.selectFrom('jobs').select(['status', (eb) => eb.fn.countAll<number>().as('n')]).groupBy('status').execute();
      return {
        workflows: workflows.length,
        dueSlots: due,
        jobsForDueSlots: windowJobs.length,
        skipped,
        noJob,
        statuses,
        lag: lagSummary(lags),
        phases: phases(windowJobs),
        completedInWindow: Number(completed.n),
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
