import assert from 'node:assert/strict';
import { newJob } from '@orloj/common/domain';
import { silentLogger } from '@orloj/common/logging';
import type { Store } from '@orloj/common/store';
import { Scheduler } from '@orloj/scheduler';
import { describeEachEngine, until as eventually } from '@orloj/common/test-support';
import { insertUser, insertWorkflow, rig, type Rig } from './support.js';

const MINUTE = 60_000;

/**
 * MAX_ACTIVE_JOBS_PER_USER, the optional hard limit (off by default; issue 14,
 * finding 5, and issue 30): the leader hands out at most that many jobs per
 * user; the user's other due slots wait PENDING, others' don't.
 */
describeEachEngine('scheduler fairness between users', (db) => {
  let r: Rig;
  let scheduler: Scheduler;
  const store = (): Store => db().store;

  beforeEach(async () => {
    r = await rig();
    scheduler = new Scheduler({ store: store(), bus: r.schedulerBus, clock: r.clock, workClock: r.clock, logger: silentLogger, config: { maxActivePerUser: 2 } });
    await scheduler.start({ leaderLoop: false });
  });
  afterEach(async () => {
    await scheduler.stop();
    await r.bus.close();
  });

  const active = async (userId: string) => (await store().jobQueue.activeCountsByUser([userId])).get(userId) ?? 0;

  it("hands out at most the user's share of due slots; the rest wait PENDING and run once a job ends", async () => {
    const greedy = await insertUser(store());
    const other = await insertUser(store());
    const greedyFlows = [];
    for (let i = 0; i < 5; i++) greedyFlows.push(await insertWorkflow(store(), greedy, r.clock.now()));
    const otherFlow = await insertWorkflow(store(), other, r.clock.now());
    await scheduler.tick(); // builds
    r.clock.advance(MINUTE);
    await scheduler.tick();
    assert.equal(await active(greedy), 2);
    assert.equal(await active(other), 1);
    await r.runners.until(() => r.runners.jobs.length === 3, 'three job.run messages');
    assert.equal(r.runners.jobs.filter((j) => j.workflow_id === otherFlow.id).length, 1);
    // Held back: each slot has its job, waiting PENDING for a place in the user's share.
    const waiting = [];
    for (const w of greedyFlows) {
      const jobs = await store().jobs.list({ workflowId: w.id, limit: 10 });
      assert.equal(jobs.length, 1, 'one job per due slot');
      if (jobs[0]!.status === 'PENDING') waiting.push(w.id);
    }
    assert.equal(waiting.length, 3);

    // Another tick changes nothing while the share is taken.
    await scheduler.tick();
    assert.equal(r.runners.jobs.length, 3);

    // One of the greedy user's jobs ends: exactly one held-back slot is handed out.
    const first = r.runners.jobs.find((j) => j.workflow_id !== otherFlow.id)!;
    await r.runners.started(first, r.clock.now());
    await r.runners.finished(first, 'COMPLETED', { started: r.clock.now(), finished: r.clock.now() });
    await eventually(() => store().jobs.findById(first.job_id), (j) => j?.status === 'COMPLETED', 'COMPLETED');
    r.clock.advance(1_000);
    await scheduler.tick();
    await r.runners.until(() => r.runners.jobs.length === 4, 'a fourth job.run');
    assert.equal(await active(greedy), 2);
  });

  it('holds back manual jobs of a user at their share too', async () => {
    const greedy = await insertUser(store());
    const flows = [];
    for (let i = 0; i < 3; i++) flows.push(await insertWorkflow(store(), greedy, r.clock.now(), { intervalMinutes: 600 }));
    await scheduler.tick();
    for (const w of flows) {
      const built = (await store().workflows.findById(w.id))!;
      await store().jobs.insert(newJob(built, 'MANUAL', r.clock.now(), r.clock.now()));
    }
    await scheduler.tick();
    await r.runners.until(() => r.runners.jobs.length === 2, 'two job.run messages');
    assert.equal(await active(greedy), 2);
    const statuses = [];
    for (const w of flows) for (const j of await store().jobs.list({ workflowId: w.id, limit: 10 })) statuses.push(j.status);
    assert.deepEqual(statuses.sort(), ['PENDING', 'QUEUED', 'QUEUED']);
  });

  it("gives a manual job the user's next place before their automatic slots", async () => {
    const busy = await insertUser(store());
    const flows = [];
    for (let i = 0; i < 4; i++) flows.push(await insertWorkflow(store(), busy, r.clock.now()));
    const manualFlow = await insertWorkflow(store(), busy, r.clock.now(), { intervalMinutes: 600 });
    await scheduler.tick(); // builds
    r.clock.advance(MINUTE);
    await scheduler.tick();
    await r.runners.until(() => r.runners.jobs.length === 2, 'two job.run messages');
    // The share is full of automatic jobs, and more slots are due; the user asks for a run now.
    const built = (await store().workflows.findById(manualFlow.id))!;
    const manual = newJob(built, 'MANUAL', r.clock.now(), r.clock.now());
    await store().jobs.insert(manual);
    const first = r.runners.jobs[0]!;
    await r.runners.started(first, r.clock.now());
    await r.runners.finished(first, 'COMPLETED', { started: r.clock.now(), finished: r.clock.now() });
    await eventually(() => store().jobs.findById(first.job_id), (j) => j?.status === 'COMPLETED', 'COMPLETED');
    r.clock.advance(1_000);
    await scheduler.tick();
    await r.runners.until(() => r.runners.jobs.length === 3, 'a third job.run');
    assert.equal(r.runners.jobs[2]!.job_id, manual.id, 'the freed place went to the manual job');
    assert.equal(await active(busy), 2);
  });
});
