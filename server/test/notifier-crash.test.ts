import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import amqp from 'amqplib';
import { reasons, type Workflow } from '@orloj/common/domain';
import { QUEUES } from '@orloj/common/messages';
import { createTestDatabase, type TestDatabase, needService, deleteBusObjects, RoleProcess } from '@orloj/common/test-support';
import { endJob, insertUser, insertWorkflow, recount, until } from '@orloj/notifier/test-support';

const WORKFLOWS = 8;
const JOBS_PER_WORKFLOW = 150;
const JOBS = WORKFLOWS * JOBS_PER_WORKFLOW;
/** Job j of workflow w fails when (w + j) % 3 === 0: each completed job right after a failed one is a recovery, with its own event and notification. */
const failedAt = (w: number, j: number) => (w + j) % 3 === 0;
let RECOVERIES = 0;
for (let w = 0; w < WORKFLOWS; w++) for (let j = 1; j < JOBS_PER_WORKFLOW; j++) if (!failedAt(w, j) && failedAt(w, j - 1)) RECOVERIES += 1;

/**
 * A notifier process (`orloj start --roles notifier` on PostgreSQL and
 * RabbitMQ) killed with SIGKILL while it works through a full outbox, then
 * started again: every job event becomes exactly one notification and counts
 * exactly once. An event is acked only after its transaction committed; an
 * unacked one is redelivered, a claimed but unconfirmed one republished once
 * its claim lapses, and the dedupe record makes every second copy a no-op.
 */
describe('notifier killed with SIGKILL mid-stream', function () {
  this.timeout(240_000);
  let db: TestDatabase;
  let amqpUrl: string;
  let dataDir: string;
  const prefix = `orloj-ncrash-${crypto.randomBytes(4).toString('hex')}.`;
  let notifier: RoleProcess;

  before(async function () {
    amqpUrl = needService(this, 'amqp');
    db = await createTestDatabase('postgres', this);
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'orloj-ncrash-'));
    notifier = new RoleProcess('notifier', { databaseUrl: db.url, amqpUrl, busPrefix: prefix, dataDir });
  });

  after(async () => {
    await notifier?.stop('SIGKILL');
    await db?.drop();
    if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
    if (amqpUrl) await deleteBusObjects(amqpUrl, prefix);
  });

  const notifications = async (): Promise<number> => {
    const r = await db.store.db.selectFrom('notifications').select((eb) => eb.fn.countAll<string>().as('n')).executeTakeFirstOrThrow();
    return Number(r.n);
  };

  it('loses no event and applies none twice after a restart', async () => {
    const store = db.store;
    const userId = await insertUser(store);
    const workflows: Workflow[] = [];
    for (let i = 0; i < WORKFLOWS; i++) workflows.push(await insertWorkflow(store, userId, { name: `crash ${i}`, maxConsecutiveJobFailuresAllowed: 100 }));
    await Promise.all(
      workflows.map(async (w, wi) => {
        for (let j = 0; j < JOBS_PER_WORKFLOW; j++) {
          const failed = failedAt(wi, j);
          await endJob(store, w, { status: failed ? 'FAILED' : 'COMPLETED', ranMs: 1_000 * (j % 7), reason: reasons.nonZeroExit(1) });
        }
      }),
    );
    const events = await store.outbox.pending();
    assert.equal(events, WORKFLOWS + JOBS + RECOVERIES);

    await notifier.start();
    await until(notifications, (n) => n >= JOBS / 10, 'a tenth of the notifications', 120_000);
    await notifier.stop('SIGKILL');
    const atKill = await notifications();
    assert.ok(atKill < JOBS, `the process had already applied everything (${atKill}) before the kill`);

    await notifier.start();
    // Claimed but unconfirmed events are republished once their 30 s claim lapses.
    await until(() => store.outbox.pending(), (n) => n === 0, `the outbox to drain (notifications at kill: ${atKill})`, 180_000);

    assert.equal(await notifications(), JOBS + RECOVERIES, 'one notification per job and recovery event');
    const applied = await store.db.selectFrom('applied_events').select((eb) => eb.fn.countAll<string>().as('n')).executeTakeFirstOrThrow();
    assert.equal(Number(applied.n), events);
    const totals = await store.analytics.forUser(userId);
    const expected = await recount(store, userId);
    assert.deepEqual({ jobs: totals.totalJobs, durationS: totals.totalDurationS, lines: totals.totalJoblogs }, expected);
    assert.equal(totals.totalWorkflows, WORKFLOWS);

    // The process as configured by default (500 ms outbox poll): one more event, timed.
    const committed = Date.now();
    await endJob(store, workflows[0]!, { status: 'COMPLETED', ranMs: 1 });
    // The last job of workflow 0 completed, so this one is no recovery: one notification.
    await until(notifications, (n) => n === JOBS + RECOVERIES + 1, 'the notification of a new event', 60_000);
    console.log(`      event → visible notification through the notifier process: ${Date.now() - committed} ms (NOTIFIER_POLL_INTERVAL 500 ms)`);

    const connection = await amqp.connect(amqpUrl);
    try {
      const ch = await connection.createChannel();
      await until(async () => (await ch.checkQueue(`${prefix}${QUEUES.domainEvents}`)).messageCount, (n) => n === 0, 'the events queue to drain');
      const deadCh = await connection.createChannel();
      deadCh.on('error', () => undefined);
      const dead = await deadCh.checkQueue(`${prefix}${QUEUES.domainEvents}.dead`).catch(() => ({ messageCount: 0 }));
      assert.equal(dead.messageCount, 0, 'events were dead-lettered');
    } finally {
      await connection.close().catch(() => undefined);
    }
    await notifier.stop('SIGTERM');
  });
});
