import crypto from 'node:crypto';
import { newId, systemClock, type Clock } from '@orloj/common/core';
import { type Job, type JobReason, type Workflow } from '@orloj/common/domain';
import { silentLogger } from '@orloj/common/logging';
import { roleBus, type RoleKeys } from '@orloj/common/envelope';
import { AmqpBus, createBus, type Bus } from '@orloj/common/bus';
import { applyJobOutcome, createWorkflow, type Store } from '@orloj/common/store';
import { Notifier } from '@orloj/notifier';
import { workflowFixture, generateKeys, insertJob, insertUser, needService, until, type Engine } from '@orloj/common/test-support';

export { insertUser, until };

/** Test data for the notifier: state changes made through the store's lifecycle functions, so they write their events. */


/** A built, active workflow of the user (its workflow.created event in the outbox). */
export async function insertWorkflow(store: Store, userId: string, overrides: Partial<Workflow> = {}): Promise<Workflow> {
  const now = Date.now();
  const w = workflowFixture(userId, { name: `w-${newId().slice(-6)}`, buildStatus: 'COMPLETED', buildCompletedAt: now, createdAt: now, updatedAt: now, ...overrides });
  await store.transaction((tx) => createWorkflow(tx, w));
  return w;
}

export interface JobEnd {
  status: 'COMPLETED' | 'FAILED' | 'CANCELED';
  /** ms the job ran; undefined: it never started */
  ranMs?: number | undefined;
  reason?: JobReason;
  /** The api request that created it (a manual job's jobs.request_id). */
  requestId?: string;
}

/** A job of the workflow that ends as given, through the transition and applyJobOutcome (as the scheduler does). */
export async function endJob(store: Store, w: Workflow, end: JobEnd, clock: Clock = systemClock): Promise<Job> {
  const now = clock.now();
  const started = end.ranMs !== undefined;
  // a job that never started ends from QUEUED (COMPLETED, FAILED) or PENDING (CANCELED)
  const from = started ? 'RUNNING' : end.status === 'CANCELED' ? 'PENDING' : 'QUEUED';
  const job = await insertJob(store, w, from, { at: now, attempts: started ? 1 : 0, startedAt: started ? now : null, requestId: end.requestId ?? null });
  return store.transaction(async (tx) => {
    const ended = await tx.jobMoves.transition(job.id, end.status, now + (end.ranMs ?? 0), {
      completedAt: now + (end.ranMs ?? 0),
      reason: end.status === 'COMPLETED' ? null : (end.reason ?? null),
    });
    if (!ended) throw new Error(`job ${job.id} did not move to ${end.status}`);
    await applyJobOutcome(tx, ended, now);
    return ended;
  });
}

/** The in-process bus, or RabbitMQ under a random prefix (deleted by close()). */
export async function openTestBus(amqpUrl?: string): Promise<{ bus: Bus; keys: RoleKeys; close(): Promise<void> }> {
  const prefix = `orloj-test-${crypto.randomBytes(4).toString('hex')}.`;
  const bus = await createBus(amqpUrl ?? 'memory:', { logger: silentLogger, prefix });
  return { bus, keys: generateKeys(), close: () => (bus instanceof AmqpBus ? bus.destroy() : bus.close()) };
}

/**
 * A notifier suite's bus — the in-process bus on SQLite, RabbitMQ under its own
 * prefix on PostgreSQL — opened before its tests and closed after them, and
 * the notifiers its tests start, each stopped after its test.
 */
export function notifierSuite(engine: Engine) {
  let opened: Awaited<ReturnType<typeof openTestBus>> | undefined;
  const running: Notifier[] = [];
  before(async function () {
    opened = await openTestBus(engine === 'postgres' ? needService(this, 'amqp') : undefined);
  });
  afterEach(async () => {
    await Promise.all(running.splice(0).map((n) => n.stop()));
  });
  after(async () => {
    await opened?.close();
  });
  const suite = {
    get bus(): Bus {
      return opened!.bus;
    },
    get keys(): RoleKeys {
      return opened!.keys;
    },
    /** `notifier`, stopped after the test. */
    track(notifier: Notifier): Notifier {
      running.push(notifier);
      return notifier;
    },
    /** A notifier on the suite's bus (notifierOn), started, and stopped after the test. */
    async start(store: Store, options: { relay?: boolean } = {}): Promise<Notifier> {
      const notifier = suite.track(notifierOn(store, suite.bus, suite.keys, options));
      await notifier.start();
      return notifier;
    },
  };
  return suite;
}

export function notifierOn(store: Store, bus: Bus, keys: RoleKeys, options: { relay?: boolean; clock?: Clock } = {}): Notifier {
  const clock = options.clock ?? systemClock;
  return new Notifier({
    store,
    bus: roleBus({ bus, role: 'notifier', keys, clock, logger: silentLogger }),
    clock,
    logger: silentLogger,
    pollMs: 20,
    ...(options.relay === undefined ? {} : { relay: options.relay }),
  });
}

/** Waits until every event in the outbox has been applied (the notifier deletes applied rows). */
export function drained(store: Store, ms?: number): Promise<number> {
  return until(() => store.outbox.pending(), (n) => n === 0, 'the outbox to drain', ms ?? 30_000);
}

/** Analytics recounted from the source rows: terminal jobs, and job_log_counts for lines. */
export async function recount(store: Store, userId: string): Promise<{ jobs: number; durationS: number; lines: number }> {
  const jobs = await store.db
    .selectFrom('jobs')
    .select(['started_at', 'completed_at'])
    .where('user_id', '=', userId)
    .where('status', 'in', ['COMPLETED', 'FAILED', 'CANCELED'])
    .execute();
  const lines = await store.db.selectFrom('job_log_counts').select('lines').where('user_id', '=', userId).execute();
  return {
    jobs: jobs.length,
    durationS: jobs.reduce((s, j) => s + (j.started_at !== null && j.completed_at !== null ? Math.floor(Math.max(0, j.completed_at - j.started_at) / 1000) : 0), 0),
    lines: lines.reduce((s, l) => s + Number(l.lines), 0),
  };
}

export async function notificationsOf(store: Store, userId: string) {
  return store.notifications.list({ userId, unreadOnly: false, limit: 10_000 });
}
