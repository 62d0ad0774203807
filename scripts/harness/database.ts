// The run's database: a schema of its own, the seeded workflows, and the waits
// of the settling phase (schedules past the disruption, schedules frozen,
// every job ended), read from the store.
import pg from 'pg';
import type { Clock } from '@orloj/common/core';
import { newWorkflow, parsePayload } from '@orloj/common/domain';
import { openDatabase, Store, type DatabaseHandle } from '@orloj/common/store';
import { INTERVAL_MINUTES, sleepReal } from './time.js';

/** Creates `schema` in the database at baseDbUrl; returns a URL that selects it (for the orloj processes too). */
export async function createSchema(baseDbUrl: string, schema: string): Promise<string> {
  const admin = new pg.Client({ connectionString: baseDbUrl });
  await admin.connect();
  try {
    await admin.query(`create schema ${schema}`);
  } finally {
    await admin.end();
  }
  const dbUrl = new URL(baseDbUrl);
  dbUrl.searchParams.set('options', `-c search_path=${schema}`);
  return dbUrl.toString();
}

export async function dropSchema(baseDbUrl: string, schema: string): Promise<void> {
  const admin = new pg.Client({ connectionString: baseDbUrl });
  try {
    await admin.connect();
    await admin.query(`drop schema if exists ${schema} cascade`);
  } catch (err) {
    console.error(`could not drop schema ${schema}:`, err instanceof Error ? err.message : err);
  } finally {
    await admin.end().catch(() => undefined);
  }
}

export async function openHarnessStore(dbUrl: string): Promise<{ database: DatabaseHandle; store: Store }> {
  const database = openDatabase(dbUrl, { poolSize: 4 });
  await database.migrate();
  return { database, store: Store.fromHandle(database) };
}

/**
 * Inserts `count` HEARTBEAT workflows (`build_status = QUEUED`, the leader
 * builds them) in ten batches spread over `spreadMs` real time, so their
 * slots are spread too. max_consecutive_job_failures_allowed is 100: the
 * target's occasional 500s never terminate a workflow.
 */
export async function seedWorkflows(o: {
  store: Store;
  clock: Clock;
  userId: string;
  targetUrl: string;
  count: number;
  spreadMs: number;
  namePrefix: string;
  stopped: () => boolean;
}): Promise<void> {
  const batches = Math.min(10, o.count);
  for (let b = 0; b < batches && !o.stopped(); b++) {
    const from = Math.floor((b * o.count) / batches);
    const to = Math.floor(((b + 1) * o.count) / batches);
    await o.store.transaction(async (tx) => {
      for (let i = from; i < to; i++) {
        const payload = JSON.stringify({ endpoint: `${o.targetUrl}/w/${i}`, method: 'GET', expected_status_code: 200, timeout: '30s' });
        if (!parsePayload('HEARTBEAT', payload).ok) throw new Error(`seed payload is invalid: ${payload}`);
        const w = newWorkflow(
          {
            userId: o.userId,
            name: `${o.namePrefix} ${i}`,
            kind: 'HEARTBEAT',
            payload,
            intervalMinutes: INTERVAL_MINUTES,
            // occasional 500s must never terminate a workflow: its slots would stop
            maxConsecutiveJobFailuresAllowed: 100,
          },
          o.clock.now(),
        );
        await tx.workflows.insert(w);
      }
    });
    await sleepReal(o.spreadMs / batches);
  }
}

/**
 * Waits until every live workflow's schedule has moved past `until` (clock
 * time, described as `what` in the log); false when it gave up after timeoutMs.
 */
export async function waitSchedulesPast(
  store: Store,
  until: number,
  what: string,
  timeoutMs: number,
  log: (m: string) => void,
  stopped: () => boolean,
): Promise<boolean> {
  const by = Date.now() + timeoutMs;
  for (;;) {
    const behind = await store.db
      .selectFrom('workflows')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where((eb) => eb.or([eb('next_due_at', 'is', null), eb('next_due_at', '<=', until)]))
      .where('terminated_at', 'is', null)
      .executeTakeFirstOrThrow();
    if (Number(behind.n) === 0) return true;
    if (Date.now() > by) {
      log(`${behind.n} workflows have not moved past ${what}; checking anyway`);
      return false;
    }
    if (stopped()) return false;
    await sleepReal(200);
  }
}

/**
 * Freezes the schedules (no new slot comes due): a leader tick in flight may
 * write next_due_at back once, so repeat until two passes find nothing.
 */
export async function freezeSchedules(store: Store, pauseMs: number): Promise<void> {
  for (let quiet = 0; quiet < 2; ) {
    try {
      const r = await store.db.updateTable('workflows').set({ next_due_at: null }).where('next_due_at', 'is not', null).executeTakeFirst();
      quiet = Number(r.numUpdatedRows) === 0 ? quiet + 1 : 0;
    } catch (err) {
      // This sweep over every workflow and the leader's own updates can lock rows in opposite orders.
      if ((err as { code?: unknown }).code !== '40P01') throw err;
      quiet = 0;
    }
    await sleepReal(pauseMs);
  }
}

/** How many workflows have a next due time (after freezeSchedules: armed again by a tick that began before it). */
export async function armedSchedules(store: Store): Promise<number> {
  const r = await store.db
    .selectFrom('workflows')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('next_due_at', 'is not', null)
    .executeTakeFirstOrThrow();
  return Number(r.n);
}

/** Waits until no job is PENDING, QUEUED or RUNNING; returns how many still are (0: all ended). */
export async function waitJobsEnded(store: Store, timeoutS: number, log: (m: string) => void, stopped: () => boolean): Promise<number> {
  const settleBy = Date.now() + timeoutS * 1000;
  let lastOpen = -1;
  for (;;) {
    const open = await store.db
      .selectFrom('jobs')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('status', 'in', ['PENDING', 'QUEUED', 'RUNNING'])
      .executeTakeFirstOrThrow();
    const n = Number(open.n);
    if (n === 0) return 0;
    if (n !== lastOpen) log(`${n} jobs still open`);
    lastOpen = n;
    if (Date.now() > settleBy) {
      log(`gave up waiting after ${timeoutS} s: ${n} jobs are still open`);
      return n;
    }
    if (stopped()) return n;
    await sleepReal(250);
  }
}

/** Open jobs by status, e.g. `QUEUED 3, RUNNING 5`, or `none`. */
export async function openJobs(store: Store): Promise<string> {
  const rows = await store.db
    .selectFrom('jobs')
    .select(['status', (eb) => eb.fn.countAll<number>().as('n')])
    .where('status', 'in', ['PENDING', 'QUEUED', 'RUNNING'])
    .groupBy('status')
    .execute();
  return rows.map((r) => `${r.status} ${r.n}`).join(', ') || 'none';
}
