import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import amqp from 'amqplib';
import { AcceleratedClock, newId } from '@orloj/common/core';
import { domainEvents, type Job, type Workflow } from '@orloj/common/domain';
import { ensureKeyDir, roleBus } from '@orloj/common/envelope';
import { createBus, DEAD_LETTER_SUFFIX, type Bus } from '@orloj/common/bus';
import { silentLogger } from '@orloj/common/logging';
import { DOMAIN_EVENT_TTL_MS, LOG_BATCH_TTL_MS, MESSAGE_TYPES, QUEUES, TOPICS } from '@orloj/common/messages';
import { terminateWorkflow } from '@orloj/common/store';
import { createTestDatabase, deleteBusObjects, insertJob, needService, RoleProcess, until, type TestDatabase } from '@orloj/common/test-support';
import { insertWorkflow } from '@orloj/notifier/test-support';
import { SseReader, TestClient } from '@orloj/api/test-support';
import { startTarget, type Target } from '../../scripts/harness/target.js';
import { verify } from '../../scripts/harness/verify.js';
import { probePort, probeUntil } from './support/role-fleet.js';

const SPEED = 20; // a one-minute slot every 3 s of real time
const INTERVAL_MS = 60_000;
const TICK_MS = 20_000; // clock time: 1 s real
const DUE_WORKFLOWS = 6;
const MANUAL_WORKFLOWS = 3;
const FLEET = ['api', 'api', 'scheduler', 'scheduler', 'runners', 'runners', 'log-ingest', 'notifier'] as const;
/** Replaced one at a time in this order (indexes into FLEET): any order works, the doc says; this one mixes them. */
const ROLL = [2, 4, 0, 6, 3, 7, 5, 1];

interface Answer {
  slot: number;
  /** real ms when the request was sent */
  at: number;
  ok: boolean;
  detail: string;
}

interface Replacement {
  slot: number;
  role: string;
  /** real ms: SIGTERM sent to the old process … its successor answered /readyz 200 */
  from: number;
  to: number;
}

/**
 * A rolling replacement of a distributed fleet (2 api, 2 schedulers, 2
 * runners, log-ingest, notifier, each its own `orloj start --roles …` process
 * on PostgreSQL and RabbitMQ), as docs/operations.md ("Upgrades") describes
 * it for a release without migrations: every process in turn gets SIGTERM, a
 * new one starts and the next waits until it is ready. Meanwhile one-minute
 * HEARTBEAT workflows run on a 20× clock, a client reads through both api
 * replicas and schedules manual jobs, and messages in the forms older
 * versions send arrive. The safety nets that would hide a lost job are out of
 * reach (JOB_QUEUE_TIMEOUT 1 h, job leases 20 min: minutes of real time), so
 * every job has to make it across the replacements by itself.
 */
describe('rolling upgrade: every replica of a distributed fleet replaced in turn', function () {
  this.timeout(240_000);
  let db: TestDatabase;
  let amqpUrl: string;
  let dataDir: string;
  let target: Target | undefined;
  let rawBus: Bus | undefined;
  const prefix = `orloj-roll-${crypto.randomBytes(4).toString('hex')}.`;
  const origin = Date.now();
  const clock = new AcceleratedClock(origin, SPEED);
  const fleet: RoleProcess[] = [];
  /** Every process started, replaced ones included, for the after hook and failure messages. */
  const started: RoleProcess[] = [];

  const spawnRole = (role: string) => {
    const p = new RoleProcess(
      role,
      { databaseUrl: db.url, amqpUrl, busPrefix: prefix, dataDir },
      {
        ORLOJ_CLOCK: `accelerated:${origin}:${SPEED}`,
        SCHEDULER_TICK: '20s',
        LEADER_LEASE_TTL: '200s',
        JOB_LEASE_TTL: '1200s',
        JOB_QUEUE_TIMEOUT: '1h',
        RUNNER_ALLOW_TARGETS: '127.0.0.0/8',
        RATE_LIMIT_ENABLED: 'false',
        // One user owns every workflow here: the per-user share (2 by default) would make due and manual jobs wait for each other.
        MAX_ACTIVE_JOBS_PER_USER: '1000',
        DOCKER_HOST: 'unix:///nonexistent/docker.sock',
        PORT: '0',
        LOG_LEVEL: 'warn',
      },
      /orloj is running/,
    );
    started.push(p);
    return p;
  };
  const outputs = () => started.map((p) => `--- ${p.role} (pid ${p.child?.pid})\n${p.output.slice(-2000)}`).join('\n');

  before(async function () {
    this.timeout(180_000);
    amqpUrl = needService(this, 'amqp');
    db = await createTestDatabase('postgres', this);
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'orloj-roll-'));
    await ensureKeyDir(dataDir);
    target = await startTarget(0);
    // The first api makes DATA_DIR/secrets.json (sessions), which the second reads.
    fleet.push(spawnRole(FLEET[0]));
    await fleet[0]!.start();
    fleet.push(...FLEET.slice(1).map(spawnRole));
    await Promise.all(fleet.slice(1).map((p) => p.start()));
    rawBus = await createBus(amqpUrl, { logger: silentLogger, prefix });
  });

  after(async function () {
    this.timeout(60_000);
    await Promise.all(started.map((p) => p.stop('SIGKILL')));
    await rawBus?.close();
    await target?.close();
    await db?.drop();
    if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
    if (amqpUrl) await deleteBusObjects(amqpUrl, prefix);
  });

  it('misses no slot, runs none twice, loses no job, keeps the api answering and accepts the older message forms', async () => {
    const apiSlots = FLEET.flatMap((role, i) => (role === 'api' ? [i] : []));
    const base = (slot: number) => `http://127.0.0.1:${probePort(fleet[slot]!)}`;
    const client = new TestClient(base(apiSlots[0]!));
    const email = `roll-${newId()}@example.com`;
    assert.equal((await client.post('/auth/register', { email, password: 'password123' })).status, 201);
    const { id: userId } = await db.store.db.selectFrom('users').select('id').where('email', '=', email).executeTakeFirstOrThrow();

    const now = clock.now();
    const heartbeat = (i: number, nextDueAt: number, name: string) =>
      insertWorkflow(db.store, userId, {
        name,
        payload: JSON.stringify({ endpoint: `${target!.url}/${name}`, method: 'GET', expected_status_code: 200, timeout: '30s' }),
        buildCompletedAt: now,
        createdAt: now,
        updatedAt: now,
        nextDueAt,
        maxConsecutiveJobFailuresAllowed: 100,
      });
    const due: Workflow[] = [];
    for (let i = 0; i < DUE_WORKFLOWS; i++) due.push(await heartbeat(i, now + INTERVAL_MS, `due-${i}`));
    // Never due while the test runs: their jobs are the manual ones the client schedules.
    const manual: Workflow[] = [];
    for (let i = 0; i < MANUAL_WORKFLOWS; i++) manual.push(await heartbeat(i, now + 365 * 24 * 3_600_000, `manual-${i}`));
    await until(() => countJobs(due, ['COMPLETED']), (n) => n >= DUE_WORKFLOWS, 'the first round of due jobs', 60_000);

    // The client: reads through both api replicas in turn, and schedules a manual job every half second.
    const answers: Answer[] = [];
    const scheduled: string[] = [];
    let traffic = true;
    const call = async (slot: number, method: 'GET' | 'POST', urlPath: string): Promise<{ status: number; body: string }> => {
      const at = Date.now();
      try {
        const res = await fetch(base(slot) + urlPath, {
          method,
          headers: { cookie: client.cookieHeader(), ...(method === 'POST' ? { 'idempotency-key': newId() } : {}) },
          signal: AbortSignal.timeout(10_000),
        });
        const body = await res.text();
        answers.push({ slot, at, ok: res.status < 300, detail: `${method} ${urlPath} ${res.status}` });
        return { status: res.status, body };
      } catch (err) {
        answers.push({ slot, at, ok: false, detail: `${method} ${urlPath} ${String(err)}` });
        return { status: 0, body: '' };
      }
    };
    const reader = (async () => {
      for (let n = 0; traffic; n++) {
        await call(apiSlots[n % apiSlots.length]!, 'GET', '/workflows');
        await sleep(100);
      }
    })();
    const scheduler = (async () => {
      for (let n = 0; traffic; n++) {
        const res = await call(apiSlots[n % apiSlots.length]!, 'POST', `/workflows/${manual[n % MANUAL_WORKFLOWS]!.id}/jobs/schedule`);
        if (res.status === 201) scheduled.push((JSON.parse(res.body) as { id: string }).id);
        await sleep(500);
      }
    })();

    // The roll: SIGTERM, a new process, ready; then the next.
    const replacements: Replacement[] = [];
    const rollStart = Date.now();
    let rollEnd: number;
    try {
      for (const [step, slot] of ROLL.entries()) {
        // Halfway, with new and old processes side by side.
        if (step === ROLL.length / 2) await olderMessageForms(base(apiSlots[0]!), userId, client.cookies);
        const old = fleet[slot]!;
        const from = Date.now();
        await old.stop('SIGTERM');
        assert.equal(old.child?.exitCode, 0, `${old.role} drained and exited 0:\n${old.output.slice(-3000)}`);
        const next = spawnRole(old.role);
        await next.start();
        await probeUntil(probePort(next), '/readyz', (p) => p.status === 200, `the new ${old.role} ready`);
        fleet[slot] = next;
        replacements.push({ slot, role: old.role, from, to: Date.now() });
      }
      // One more interval, so that the slots due during the last replacement had their whole window.
      await sleep(INTERVAL_MS / SPEED + 500);
      rollEnd = clock.now();
    } finally {
      traffic = false;
      await Promise.all([reader, scheduler]);
    }
    console.log(
      `      roll: ${((Date.now() - rollStart) / 1000).toFixed(1)} s; replacements ${replacements.map((r) => `${r.role} ${((r.to - r.from) / 1000).toFixed(1)} s`).join(', ')}; ` +
        `${answers.length} api requests (${answers.filter((a) => !a.ok).length} failed), ${scheduled.length} manual jobs`,
    );

    // The api: failures only on a replica while it was being replaced, and the other answered meanwhile.
    // (A request sent just before the SIGTERM may meet the closing server too.)
    const during = (a: Answer, r: Replacement) => a.at >= r.from - 500 && a.at <= r.to;
    const beingReplaced = (a: Answer) => replacements.some((r) => r.slot === a.slot && during(a, r));
    for (const a of answers.filter((x) => !x.ok)) {
      assert.ok(beingReplaced(a), `api replica ${a.slot} failed outside its replacement: ${a.detail} at +${a.at - rollStart} ms`);
    }
    for (const r of replacements) {
      const others = answers.filter((a) => during(a, r) && !beingReplaced(a));
      assert.ok(others.length > 0 && others.every((a) => a.ok), `while ${r.role} (slot ${r.slot}) was replaced the other replica answered: ${others.map((a) => a.detail).join('; ')}`);
    }

    // Every manual job the api accepted ran, once.
    assert.ok(scheduled.length >= 10, `${scheduled.length} manual jobs scheduled`);
    const manualJobs = await until(
      () => db.store.db.selectFrom('jobs').selectAll().where('id', 'in', scheduled).execute(),
      (rows) => rows.length === scheduled.length && rows.every((j) => j.status === 'COMPLETED'),
      'every manual job to complete',
      30_000,
    ).catch(async (err: Error) => {
      const open = await db.store.db.selectFrom('jobs').selectAll().where('status', 'not in', ['COMPLETED']).execute();
      throw new Error(`${err.message.slice(0, 200)}\njobs not completed: ${JSON.stringify(open, null, 1)}\n${outputs()}`);
    });
    assert.deepEqual(new Set(manualJobs.map((j) => j.attempts)), new Set([1]), 'each ran on its first attempt');

    // The schedule: quiesce, then check every slot of the roll against the job rows.
    await db.store.transaction(async (tx) => {
      for (const w of due) await terminateWorkflow(tx, userId, w.id, clock.now());
    });
    await until(() => countJobs([...due, ...manual], ['PENDING', 'QUEUED', 'RUNNING']), (n) => n === 0, 'no open job', 30_000);
    const workflows = await db.store.db.selectFrom('workflows').selectAll().where('id', 'in', due.map((w) => w.id)).execute();
    const jobs = await db.store.db.selectFrom('jobs').selectAll().where('workflow_id', 'in', due.map((w) => w.id)).execute();
    const checked = verify({ workflows, jobs, killEnd: rollEnd, tickMs: TICK_MS, samples: [], maxAttempts: 1 });
    assert.deepEqual(checked.violations, [], `${checked.violations.join('\n')}\n${checked.explained.join('\n')}`);
    assert.deepEqual(checked.explained, [], 'no slot had to be explained away');
    const slotsPerWorkflow = Math.floor((rollEnd - now) / INTERVAL_MS) - 1;
    assert.equal(checked.checkedSlots, DUE_WORKFLOWS * slotsPerWorkflow, 'every slot of every workflow up to the end of the roll has its job');
    const beforeEnd = jobs.filter((j) => j.slot_at <= rollEnd - INTERVAL_MS);
    assert.deepEqual(new Set(beforeEnd.map((j) => j.status)), new Set(['COMPLETED']), 'and it completed');

    // Every event applied once: the counters count every ended job, nothing waits or was dead-lettered.
    await until(() => db.store.outbox.pending(), (n) => n === 0, 'every domain event applied', 30_000);
    const ended = await db.store.db
      .selectFrom('jobs')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .where('user_id', '=', userId)
      .where('status', 'in', ['COMPLETED', 'FAILED', 'CANCELED'])
      .executeTakeFirstOrThrow();
    const counted = await db.store.db
      .selectFrom('workflow_stats')
      .select((eb) => eb.fn.sum<string>('total_jobs').as('n'))
      .where('user_id', '=', userId)
      .executeTakeFirstOrThrow();
    assert.equal(Number(counted.n), Number(ended.n), 'analytics counted every ended job once');
    assert.deepEqual(await deadLetters(), {}, 'no message dead-lettered');
    for (const p of started) assert.doesNotMatch(p.output, /failed its signature check|dropped a bus message whose body/, `${p.role} refused no message`);
  });

  async function countJobs(workflows: readonly Workflow[], statuses: Job['status'][]): Promise<number> {
    const r = await db.store.db
      .selectFrom('jobs')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .where('workflow_id', 'in', workflows.map((w) => w.id))
      .where('status', 'in', statuses)
      .executeTakeFirstOrThrow();
    return Number(r.n);
  }

  /** Depths of the dead-letter queues that hold anything. */
  async function deadLetters(): Promise<Record<string, number>> {
    const connection = await amqp.connect(amqpUrl);
    try {
      const out: Record<string, number> = {};
      for (const queue of Object.values(QUEUES)) {
        const ch = await connection.createChannel();
        ch.on('error', () => undefined);
        const depth = await ch.checkQueue(`${prefix}${queue}${DEAD_LETTER_SUFFIX}`).then(
          (q) => q.messageCount,
          () => 0,
        );
        if (depth > 0) out[queue] = depth;
        await ch.close().catch(() => undefined);
      }
      return out;
    } finally {
      await connection.close().catch(() => undefined);
    }
  }

  /**
   * Mid-roll, the forms of messages that processes of an older version send
   * (docs/bus.md): envelopes without `req_id`; `log.live` and `log.batch` as
   * one object per line, beside the packed columns; a `job.completed` event
   * without `scheduled_at` or `request_id`. Sent with the roles' own keys,
   * straight onto the bus, for a CONTAINER job that runs nowhere (inserted
   * RUNNING with a lease far ahead), which is then marked COMPLETED.
   */
  async function olderMessageForms(apiBase: string, userId: string, cookies: ReadonlyMap<string, string>): Promise<void> {
    const keys = await ensureKeyDir(dataDir);
    const as = (role: 'log-ingest' | 'runners' | 'notifier') => roleBus({ bus: rawBus!, role, keys, clock, logger: silentLogger });
    const now = clock.now();
    const w = await insertWorkflow(db.store, userId, {
      name: 'older forms',
      kind: 'CONTAINER',
      payload: JSON.stringify({ image: 'localhost/orloj-test/busybox:1', cmd: ['true'] }),
      logRetention: true,
      buildCompletedAt: now,
      createdAt: now,
      updatedAt: now,
      nextDueAt: now + 365 * 24 * 3_600_000,
    });
    const job = await insertJob(db.store, w, 'RUNNING', { at: now, containerId: null, runnerId: 'runner-elsewhere', leaseExpiresAt: now + 365 * 24 * 3_600_000, startedAt: now });
    const line = (n: number) => ({ sequence_num: n, stream: 'stdout' as const, message: `line ${n}`, timestamp: now + n });

    // log.live, both forms, to a live tail on an api replica.
    const tailClient = new TestClient(apiBase);
    for (const [k, v] of cookies) tailClient.cookies.set(k, v);
    const tail = await SseReader.open(tailClient, `/workflows/${w.id}/jobs/${job.id}/events`);
    try {
      await tail.until((r) => r.events.some((e) => e.event === 'connected'), 'the tail to connect');
      const live = as('log-ingest');
      await live.broadcast(TOPICS.liveLogs, MESSAGE_TYPES.liveLogs, { job_id: job.id, workflow_id: w.id, attempt: 1, lines: [line(0)] });
      await live.broadcast(TOPICS.liveLogs, MESSAGE_TYPES.liveLogs, {
        job_id: job.id,
        workflow_id: w.id,
        attempt: 1,
        lines: [],
        columns: { first: 1, streams: 'oo', messages: ['line 1', 'line 2'], timestamps: [now + 1, now + 2] },
      });
      await tail.until((r) => r.logs().length === 3, 'the three broadcast lines', 20_000);
      assert.deepEqual(
        tail.logs().map((e) => (e.json as { message: string }).message),
        ['line 0', 'line 1', 'line 2'],
      );
    } finally {
      tail.close();
    }

    // log.batch, both forms, to log-ingest.
    const runner = as('runners');
    const batch = { job_id: job.id, workflow_id: w.id, attempt: 1, retain: true };
    await runner.publish(QUEUES.logs, MESSAGE_TYPES.logBatch, { ...batch, lines: [line(3), line(4)] }, { ttlMs: LOG_BATCH_TTL_MS });
    await runner.publish(
      QUEUES.logs,
      MESSAGE_TYPES.logBatch,
      { ...batch, lines: [], columns: { first: 5, streams: 'oe', messages: ['line 5', 'line 6'], timestamps: [now + 5, now + 6] }, line_count: 7 },
      { ttlMs: LOG_BATCH_TTL_MS },
    );
    await until(() => db.store.logs.count(job.id, 1), (n) => n === 7, 'both batches counted (7 lines: 0-6)', 20_000);
    const stored = await db.store.logQueries.after({ jobId: job.id, attempt: 1, after: -1, limit: 100 });
    assert.deepEqual(
      stored.map((l) => [l.sequenceNum, l.stream, l.message]),
      [
        [3, 'stdout', 'line 3'],
        [4, 'stdout', 'line 4'],
        [5, 'stdout', 'line 5'],
        [6, 'stderr', 'line 6'],
      ],
    );

    // The job's end, as an older notifier relay published it.
    const ended = { ...job, status: 'COMPLETED' as const, completedAt: now + 1_000 };
    const { scheduled_at: _omitted, ...older } = domainEvents.jobEnded(w, ended, now + 1_000).data;
    await as('notifier').publish(
      QUEUES.domainEvents,
      MESSAGE_TYPES.domainEvent,
      { id: `job.completed:${job.id}`, kind: 'job.completed', user_id: userId, workflow_id: w.id, occurred_at: now + 1_000, data: older },
      { ttlMs: DOMAIN_EVENT_TTL_MS },
    );
    await until(
      () => db.store.db.selectFrom('notifications').select('id').where('dedupe_key', '=', `${userId}:job.completed:${job.id}`).execute(),
      (rows) => rows.length === 1,
      'the notification of the older event',
      20_000,
    );
    await db.store.db.updateTable('jobs').set({ status: 'COMPLETED', completed_at: ended.completedAt, updated_at: ended.completedAt }).where('id', '=', job.id).execute();
  }
});

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms)); // paces the background traffic and waits out a real interval (see callers)
}
