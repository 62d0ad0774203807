import assert from 'node:assert/strict';
import { ManualClock, newId } from '@orloj/common/core';
import type { Job, Workflow } from '@orloj/common/domain';
import { silentLogger } from '@orloj/common/logging';
import type { Store } from '@orloj/common/store';
import { RetentionSweeper, type RetentionConfig } from '@orloj/scheduler';
import { describeEachEngine, insertJob, workflowFixture } from '@orloj/common/test-support';

const DAY = 86_400_000;
const NOW = Date.UTC(2026, 10, 1);
const LINES_PER_JOB = 4;

const CONFIG: Partial<RetentionConfig> = {
  jobsMs: 90 * DAY,
  jobLogsMs: 30 * DAY,
  notificationsMs: 90 * DAY,
  keepJobs: 5,
  // Pages smaller than the data, so every step takes several batches.
  batchSize: 3,
  pauseMs: 0,
};

/** An ended job of `w` that ran `daysAgo` days before NOW, with its log lines and their count. */
async function endedJob(store: Store, w: Workflow, daysAgo: number, status: Job['status'] = 'COMPLETED'): Promise<Job> {
  const at = NOW - daysAgo * DAY;
  const job = await insertJob(store, w, status, { at, trigger: 'AUTOMATIC', startedAt: at, completedAt: at + 5_000, updatedAt: at + 5_000 });
  const lines = Array.from({ length: LINES_PER_JOB }, (_, i) => ({ sequence_num: i, stream: 'stdout' as const, message: `line ${i}`, timestamp: at + i }));
  await store.logs.insertBatch(job.id, 1, lines);
  await store.logs.recordCount({ jobId: job.id, attempt: 1, workflowId: w.id, userId: w.userId, lines: LINES_PER_JOB });
  await store.analytics.addToWorkflow({ workflowId: w.id, userId: w.userId, kind: w.kind }, 1, 5);
  return job;
}

async function notification(store: Store, w: Workflow, daysAgo: number): Promise<void> {
  const at = NOW - daysAgo * DAY;
  await store.notifications.insert({
    id: newId(),
    userId: w.userId,
    workflowId: w.id,
    dedupeKey: newId(),
    kind: 'WEB_INFO',
    payload: '{}',
    readAt: null,
    createdAt: at,
    updatedAt: at,
  });
}

describeEachEngine('retention sweep', (db) => {
  let store: Store;
  let userId: string;
  /** A workflow that ran daily for long: old, middle-aged and recent jobs, and one stuck RUNNING job. */
  let daily: Workflow;
  /** A workflow with fewer jobs than RETENTION_KEEP_JOBS, all old. */
  let rare: Workflow;
  /** A workflow with more old jobs than RETENTION_KEEP_JOBS. */
  let stopped: Workflow;
  const jobs: Record<string, Job[]> = { old: [], middle: [], recent: [], rare: [], stopped: [] };
  let stuck: Job;

  before(async () => {
    store = db().store;
    userId = newId();
    await store.users.insert({ id: userId, email: `${userId}@example.com`, passwordHash: 'x', notificationPreference: 'ALL', createdAt: 0, updatedAt: 0 });
    [daily, rare, stopped] = [workflowFixture(userId, { name: 'daily' }), workflowFixture(userId, { name: 'rare' }), workflowFixture(userId, { name: 'stopped' })];
    for (const w of [daily, rare, stopped]) await store.workflows.insert(w);
    for (let d = 200; d > 190; d--) jobs.old!.push(await endedJob(store, daily, d, d % 2 ? 'FAILED' : 'COMPLETED'));
    for (let d = 60; d > 50; d--) jobs.middle!.push(await endedJob(store, daily, d, d % 3 ? 'COMPLETED' : 'CANCELED'));
    for (let d = 5; d > 0; d--) jobs.recent!.push(await endedJob(store, daily, d));
    // Never ended: whatever its age, it stays (the scheduler's recovery deals with it).
    stuck = await insertJob(store, daily, 'RUNNING', { at: NOW - 300 * DAY });
    for (let d = 203; d > 200; d--) jobs.rare!.push(await endedJob(store, rare, d));
    for (let d = 208; d > 200; d--) jobs.stopped!.push(await endedJob(store, stopped, d));
    for (let i = 0; i < 7; i++) await notification(store, daily, 100 + i);
    for (let i = 0; i < 2; i++) await notification(store, daily, 10 + i);
    // Windows: one-off ones that ended 100 and 10 days ago, a recurring one, a snooze that ended 120 days ago, one still to come.
    const oneOff = (name: string, fromDaysAgo: number, toDaysAgo: number) =>
      store.maintenanceWindows.insert(newId(), userId, { name, mode: 'skip', workflowId: daily.id, startsAt: NOW - fromDaysAgo * DAY, endsAt: NOW - toDaysAgo * DAY }, NOW);
    await oneOff('long ago', 101, 100);
    await oneOff('lately', 11, 10);
    await oneOff('to come', -1, -2);
    await store.maintenanceWindows.insert(newId(), userId, { name: 'weekly', mode: 'mute', workflowQuery: 'daily', cron: '0 3 * * 0', timeZone: 'UTC', durationMinutes: 60 }, NOW - 300 * DAY);
    await store.maintenanceWindows.snooze(newId(), userId, rare.id, NOW - 120 * DAY, NOW - 121 * DAY);
  });

  const ids = async (w: Workflow) => new Set((await store.jobs.list({ workflowId: w.id, limit: 1000 })).map((j) => j.id));
  const lines = async (job: Job) => (await db().handle.db.selectFrom('job_logs').select((eb) => eb.fn.countAll<number>().as('n')).where('job_id', '=', job.id).executeTakeFirstOrThrow()).n;
  const blocks = async (job: Job) => (await db().handle.db.selectFrom('job_log_blocks').select((eb) => eb.fn.countAll<number>().as('n')).where('job_id', '=', job.id).executeTakeFirstOrThrow()).n;

  it('does nothing while its replica does not lead', async () => {
    const sweeper = new RetentionSweeper({ store, clock: new ManualClock(NOW), logger: silentLogger, mayRun: () => false, config: CONFIG });
    assert.deepEqual(await sweeper.sweep(), { jobs: 0, logLines: 0, notifications: 0, windows: 0, complete: false });
    assert.equal((await ids(daily)).size, 26);
  });

  it('prunes old ended jobs, old log lines, old notifications and ended windows in batches, keeping analytics totals', async () => {
    const userTotals = await store.analytics.forUser(userId);
    const workflowTotals = await Promise.all([daily, rare, stopped].map((w) => store.analytics.forWorkflow(userId, w.id)));
    assert.equal(userTotals.totalJobs, 36);

    const sweeper = new RetentionSweeper({ store, clock: new ManualClock(NOW), logger: silentLogger, mayRun: () => true, config: CONFIG });
    const result = await sweeper.sweep();
    // Jobs: the daily workflow's 10 old ones, and the 3 oldest of the stopped one. Lines: theirs, and the middle-aged jobs'.
    assert.deepEqual(result, { jobs: 13, logLines: (10 + 3 + 10) * LINES_PER_JOB, notifications: 7, windows: 2, complete: true });

    const daily_ = await ids(daily);
    for (const j of jobs.old!) assert.ok(!daily_.has(j.id), 'an old ended job is pruned');
    for (const j of [...jobs.middle!, ...jobs.recent!, stuck]) assert.ok(daily_.has(j.id));
    for (const j of jobs.middle!) assert.equal(Number(await lines(j)), 0, 'logs older than RETENTION_JOB_LOGS are pruned');
    for (const j of jobs.middle!) assert.equal(Number(await blocks(j)), 0, 'and their search blocks');
    for (const j of jobs.recent!) assert.equal(Number(await lines(j)), LINES_PER_JOB);
    for (const j of jobs.recent!) assert.equal(Number(await blocks(j)), 1);
    // Fewer jobs than RETENTION_KEEP_JOBS: all kept, with their logs, however old.
    assert.deepEqual(await ids(rare), new Set(jobs.rare!.map((j) => j.id)));
    for (const j of jobs.rare!) assert.equal(Number(await lines(j)), LINES_PER_JOB);
    // More: the newest RETENTION_KEEP_JOBS stay, the job list's first page.
    assert.deepEqual(await ids(stopped), new Set(jobs.stopped!.slice(3).map((j) => j.id)));

    const left = await store.notifications.list({ userId, unreadOnly: false, limit: 100 });
    assert.deepEqual(left.map((n) => Math.round((NOW - n.createdAt) / DAY)), [10, 11]);
    // Ended one-off windows and snoozes go with the jobs' age; recurring ones and those still to come stay.
    assert.deepEqual((await store.maintenanceWindows.list(userId, 100)).map((w) => w.name).sort(), ['lately', 'to come', 'weekly']);
    assert.equal(await store.maintenanceWindows.snoozeOf(rare.id), undefined);

    // The contract's analytics report the same totals after the prune.
    assert.deepEqual(await store.analytics.forUser(userId), userTotals);
    assert.deepEqual(await Promise.all([daily, rare, stopped].map((w) => store.analytics.forWorkflow(userId, w.id))), workflowTotals);

    assert.deepEqual(await sweeper.sweep(), { jobs: 0, logLines: 0, notifications: 0, windows: 0, complete: true }, 'a second sweep finds nothing');
  });

  it('sweeps on its own while its replica leads, and not otherwise', async () => {
    const old = await endedJob(store, daily, 120);
    const clock = new ManualClock(NOW);
    let leads = false;
    const sweeper = new RetentionSweeper({ store, clock, logger: silentLogger, mayRun: () => leads, config: CONFIG, checkEveryMs: 5 });
    await sweeper.start();
    try {
      await new Promise((r) => setTimeout(r, 100)); // ruling out a sweep by the standby: an absence announces nothing
      assert.ok((await ids(daily)).has(old.id), 'a standby does not sweep');
      leads = true;
      const deadline = Date.now() + 10_000;
      while ((await ids(daily)).has(old.id)) {
        assert.ok(Date.now() < deadline, 'the leader swept');
        await new Promise((r) => setTimeout(r, 20)); // poll interval: the sweep announces nothing
      }
    } finally {
      await sweeper.stop();
    }
  });

  it('keeps everything a setting turns off', async () => {
    const later = new ManualClock(NOW + 1000 * DAY);
    const sweeper = new RetentionSweeper({
      store,
      clock: later,
      logger: silentLogger,
      mayRun: () => true,
      config: { ...CONFIG, jobsMs: undefined, jobLogsMs: undefined, notificationsMs: undefined },
    });
    assert.deepEqual(await sweeper.sweep(), { jobs: 0, logLines: 0, notifications: 0, windows: 0, complete: true });
    assert.equal((await ids(daily)).size, 16);
  });
});
