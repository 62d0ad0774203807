/**
 * The run policy with the real scheduler on both engines (issue 25, ADR
 * 0020): overlap `skip` against today's `run_after`, catch-up `none` after
 * downtime within and beyond the grace, and first run `now`.
 */
import assert from 'node:assert/strict';
import { CATCH_UP_GRACE_MS, type Workflow } from '@orloj/common/domain';
import { silentLogger } from '@orloj/common/logging';
import { Scheduler } from '@orloj/scheduler';
import { describeEachEngine, until as eventually } from '@orloj/common/test-support';
import { insertUser, insertWorkflow, jobsOf, ranWithoutJobs, rig, type Rig } from './support.js';

const MINUTE = 60_000;

describeEachEngine('scheduler: run policy', (db) => {
  let r: Rig;
  let scheduler: Scheduler;
  let userId: string;
  const store = () => db().store;

  beforeEach(async () => {
    r = await rig(Date.parse('2026-06-01T00:00:00Z'));
    // Each test's clock starts afresh: the uptime record of another test's clock would read as orloj running here.
    await store().db.deleteFrom('orloj_uptime').execute();
    scheduler = new Scheduler({ store: store(), bus: r.schedulerBus, clock: r.clock, logger: silentLogger, config: { jobLeaseTtlMs: 30_000 } });
    await scheduler.start({ leaderLoop: false });
    userId = await insertUser(store());
  });
  afterEach(async () => {
    await scheduler.stop();
    await r.bus.close();
  });

  /** A built workflow every 10 minutes, with the given policy. */
  async function built(overrides: Partial<Workflow>): Promise<Workflow> {
    const w = await insertWorkflow(store(), userId, r.clock.now(), { intervalMinutes: 10, ...overrides });
    await scheduler.tick();
    return (await store().workflows.findById(w.id))!;
  }

  /** The first slot's job runs past the second slot and ends 3 minutes after it. */
  async function overrun(w: Workflow): Promise<void> {
    const anchor = w.buildCompletedAt!;
    r.clock.set(anchor + 10 * MINUTE);
    await scheduler.tick();
    await r.runners.until(() => r.runners.jobs.length === 1, 'first job');
    const first = r.runners.jobs.shift()!;
    await r.runners.started(first, r.clock.now());
    await eventually(() => store().jobs.findById(first.job_id), (j) => j?.status === 'RUNNING', 'RUNNING');
    r.clock.set(anchor + 20 * MINUTE);
    await r.runners.heartbeat(first);
    const renewedUntil = r.clock.now() + 30_000;
    await eventually(() => store().jobs.findById(first.job_id), (j) => j?.leaseExpiresAt === renewedUntil, 'lease renewed');
    await scheduler.tick();
    assert.equal((await store().workflows.findById(w.id))?.nextDueAt, anchor + 30 * MINUTE, 'set aside while it runs');
    r.clock.advance(3 * MINUTE);
    await r.runners.finished(first, 'COMPLETED', { started: anchor + 10 * MINUTE, finished: r.clock.now() });
    await eventually(() => store().jobs.findById(first.job_id), (j) => j?.status === 'COMPLETED', 'COMPLETED');
    await scheduler.tick();
  }

  it('overlap run_after (the default) runs the slot that came during the run as soon as it ends', async () => {
    const w = await built({});
    assert.equal(w.overlapPolicy, 'run_after');
    await overrun(w);
    const anchor = w.buildCompletedAt!;
    assert.deepEqual((await jobsOf(store(), w.id)).map((j) => j.slotAt), [anchor + 10 * MINUTE, anchor + 20 * MINUTE]);
    assert.equal((await store().workflows.findById(w.id))?.skippedSlots, 0);
  });

  it('overlap skip runs no slot that came during the run, counts it skipped, and waits for the next', async () => {
    const w = await built({ overlapPolicy: 'skip' });
    await overrun(w);
    const anchor = w.buildCompletedAt!;
    assert.deepEqual((await jobsOf(store(), w.id)).map((j) => j.slotAt), [anchor + 10 * MINUTE]);
    const after = (await store().workflows.findById(w.id))!;
    assert.equal(after.nextDueAt, anchor + 30 * MINUTE);
    assert.equal(after.skippedSlots, 1);
    r.clock.set(anchor + 30 * MINUTE);
    await scheduler.tick();
    assert.deepEqual((await jobsOf(store(), w.id)).map((j) => j.slotAt), [anchor + 10 * MINUTE, anchor + 30 * MINUTE]);
  });

  it('catch-up none runs a slot taken within the grace, and passes over one taken after it, counted skipped', async () => {
    const w = await built({ catchUpPolicy: 'none' });
    const anchor = w.buildCompletedAt!;
    r.clock.set(anchor + 10 * MINUTE + CATCH_UP_GRACE_MS);
    await scheduler.tick();
    await r.runners.until(() => r.runners.jobs.length === 1, 'the job of a slot within the grace');
    const first = r.runners.jobs.shift()!;
    await r.runners.started(first, r.clock.now());
    await r.runners.finished(first, 'COMPLETED', { started: r.clock.now(), finished: r.clock.now() });
    await eventually(() => store().jobs.findById(first.job_id), (j) => j?.status === 'COMPLETED', 'COMPLETED');
    // orloj runs without taking the slots at 20, 30 and 40 (the runners behind) until 1 s past the grace after 40: they never run.
    await ranWithoutJobs(store(), r.clock, anchor + 40 * MINUTE + CATCH_UP_GRACE_MS + 1_000 - r.clock.now());
    await scheduler.tick();
    assert.deepEqual((await jobsOf(store(), w.id)).map((j) => j.slotAt), [anchor + 10 * MINUTE]);
    const after = (await store().workflows.findById(w.id))!;
    assert.equal(after.nextDueAt, anchor + 50 * MINUTE);
    assert.equal(after.skippedSlots, 3);
    await scheduler.tick();
    assert.equal((await store().workflows.findById(w.id))?.skippedSlots, 3, 'a second pass counts nothing again');
  });

  it("catch-up none after orloj was down passes over the most recent slot too, and counts none of them: they are orloj's", async () => {
    const w = await built({ catchUpPolicy: 'none' });
    const anchor = w.buildCompletedAt!;
    // No tick and no uptime beat from the build until past the grace after the slot at 30: orloj was down.
    r.clock.set(anchor + 30 * MINUTE + CATCH_UP_GRACE_MS + 1_000);
    await scheduler.tick();
    assert.deepEqual(await jobsOf(store(), w.id), []);
    const after = (await store().workflows.findById(w.id))!;
    assert.equal(after.nextDueAt, anchor + 40 * MINUTE);
    assert.equal(after.skippedSlots, 0);
  });

  it('catch-up latest (the default) runs the most recent missed slot however late', async () => {
    const w = await built({});
    const anchor = w.buildCompletedAt!;
    // orloj runs without taking the slots (the runners behind): the three before the one at 40 count as missed.
    await ranWithoutJobs(store(), r.clock, anchor + 45 * MINUTE - r.clock.now());
    await scheduler.tick();
    assert.deepEqual((await jobsOf(store(), w.id)).map((j) => j.slotAt), [anchor + 40 * MINUTE]);
    assert.equal((await store().workflows.findById(w.id))?.skippedSlots, 3);
  });

  it('first run now runs right after the build, then keeps to the schedule', async () => {
    const w = await built({ firstRun: 'now' });
    const anchor = w.buildCompletedAt!;
    await scheduler.tick();
    await r.runners.until(() => r.runners.jobs.length === 1, 'the job after the build');
    assert.deepEqual((await jobsOf(store(), w.id)).map((j) => j.slotAt), [anchor]);
    assert.equal((await store().workflows.findById(w.id))?.nextDueAt, anchor + 10 * MINUTE);
  });
});
