/**
 * Cron schedules, jitter and pause with the real scheduler on both engines
 * (issue 25, ADR 0015): slots across a daylight-saving transition, exactly
 * one job per slot with two leaders ticking at random times, and a paused
 * workflow that schedules nothing and resumes at its next slot.
 */
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { isDown, jitterOffsetMs, scheduleOf, type Workflow } from '@orloj/common/domain';
import { silentLogger } from '@orloj/common/logging';
import { Scheduler } from '@orloj/scheduler';
import type { Bus } from '@orloj/common/bus';
import { describeEachEngine, until as eventually } from '@orloj/common/test-support';
import { insertUser, insertWorkflow, jobsOf, rig, TEST_BUSES, type Rig } from './support.js';

const MINUTE = 60_000;
const at = (iso: string) => Date.parse(iso);
const iso = (t: number) => new Date(t).toISOString().replace('.000Z', 'Z');

describeEachEngine('scheduler: cron, jitter, pause', (db) => {
  let r: Rig;
  let scheduler: Scheduler;
  let userId: string;
  let running = false;
  const store = () => db().store;

  const leader = () => new Scheduler({ store: store(), bus: r.schedulerBus, clock: r.clock, logger: silentLogger, config: { jobLeaseTtlMs: 30_000 } });
  /** A scheduler (its leader loop off: the test ticks it) on a clock set to `now`, and a user. */
  async function start(now: number, bus?: Bus) {
    r = await rig(now, bus);
    // Each test's clock starts afresh: the uptime record of another test's clock would read as downtime here.
    await store().db.deleteFrom('orloj_uptime').execute();
    scheduler = leader();
    await scheduler.start({ leaderLoop: false });
    running = true;
    userId = await insertUser(store());
  }
  /** What the test's bus leaves behind, removed after it. */
  let busDone: (() => Promise<void>) | undefined;
  afterEach(async () => {
    if (!running) return; // skipped before it started
    running = false;
    await scheduler.stop(); // before the bus it uses
    await r.bus.close();
    await busDone?.();
    busDone = undefined;
  });

  async function built(overrides: Partial<Workflow>): Promise<Workflow> {
    const w = await insertWorkflow(store(), userId, r.clock.now(), overrides);
    await scheduler.tick();
    return (await store().workflows.findById(w.id))!;
  }

  /** Ends every job handed out so far, so the next slot is free to run. */
  async function finishAll(): Promise<void> {
    for (const msg of r.runners.jobs.splice(0)) {
      await r.runners.started(msg, r.clock.now());
      await r.runners.finished(msg, 'COMPLETED', { started: r.clock.now(), finished: r.clock.now() });
      await eventually(() => store().jobs.findById(msg.job_id), (j) => j?.status === 'COMPLETED', 'COMPLETED');
    }
  }

  it('runs a cron workflow at its local times across the Sydney spring transition, the missing 02:30 at 03:00', async () => {
    await start(at('2026-10-02T12:00:00Z'));
    const w = await built({ cron: '30 2 * * *', timeZone: 'Australia/Sydney', intervalMinutes: 1440 });
    assert.equal(iso(w.nextDueAt!), '2026-10-02T16:30:00Z', 'the first slot is the first 02:30 after the build');
    for (const slot of ['2026-10-02T16:30:00Z', '2026-10-03T16:00:00Z', '2026-10-04T15:30:00Z']) {
      r.clock.set(at(slot) + 1_000);
      await scheduler.tick();
      await r.runners.until(() => r.runners.jobs.length === 1, `the job of ${slot}`);
      await finishAll();
    }
    assert.deepEqual((await jobsOf(store(), w.id)).map((j) => iso(j.slotAt)), ['2026-10-02T16:30:00Z', '2026-10-03T16:00:00Z', '2026-10-04T15:30:00Z']);
    assert.equal((await store().workflows.findById(w.id))?.skippedSlots, 0);
  });

  it("moves a workflow's slots by its jitter offset, the same on every pass", async () => {
    await start(at('2026-03-01T00:00:00Z'));
    const w = await built({ cron: '0 * * * *', jitterSeconds: 900 });
    const offset = jitterOffsetMs(w.id, 900);
    assert.equal(w.nextDueAt, at('2026-03-01T01:00:00Z') + offset);
    r.clock.set(w.nextDueAt!);
    await scheduler.tick();
    await r.runners.until(() => r.runners.jobs.length === 1, 'the jittered job');
    assert.equal((await jobsOf(store(), w.id))[0]!.slotAt, at('2026-03-01T01:00:00Z') + offset);
  });

  /** Today's run policy, and the other choices of catch-up and first run (overlap cannot happen here: finishAll ends each job at once). */
  const policies: [string, Partial<Workflow>][] = [
    ['default policy', {}],
    ['catch-up none, first run now', { catchUpPolicy: 'none', firstRun: 'now' }],
  ];
  for (const [busName, open] of TEST_BUSES) for (const [policyName, policy] of policies) {
    it(`creates exactly one job per slot, every slot run or counted skipped, with two leaders ticking at random times (${busName}, ${policyName})`, async function () {
      const { bus, done } = await open(this);
      busDone = done;
      await start(at('2026-10-03T12:00:00Z'), bus);
      const other = leader();
      try {
        const w = await built({ cron: '*/20 1-3 * * *', timeZone: 'Australia/Adelaide', jitterSeconds: 120, ...policy });
        const schedule = scheduleOf(w)!;
        const steps = fc.sample(fc.integer({ min: 1, max: 3 * 60 * MINUTE }), { numRuns: 25, seed: 25 });
        for (const step of steps) {
          r.clock.advance(step);
          await Promise.all([scheduler.tick(), other.tick(), scheduler.tick()]);
          // the job.run of a queued job may still be on its way
          const queued = (await jobsOf(store(), w.id)).filter((j) => j.status === 'QUEUED').length;
          await r.runners.until(() => r.runners.jobs.length >= queued, 'the queued job handed out');
          await finishAll();
        }
        const jobs = await jobsOf(store(), w.id);
        const slots = jobs.map((j) => j.slotAt);
        assert.equal(new Set(slots).size, slots.length, 'one job per slot');
        for (const s of slots) assert.ok(schedule.isSlot(s), `${iso(s)} is a slot`);
        const after = (await store().workflows.findById(w.id))!;
        assert.ok(schedule.isSlot(after.nextDueAt!), 'next due on a slot');
        // Steps longer than a leader handover are downtime: their missed slots are orloj's, not counted as the workflow's.
        // Every slot before the next due one (the first at or after the build: first run `now` adds one at it) was run,
        // counted skipped, or missed while orloj was down.
        const [first, end] = [schedule.firstSlotAfter(w.buildCompletedAt! - 1), after.nextDueAt!];
        const downtime = await store().uptime.downtime(first, end);
        const missedWhileDown = schedule.slotsIn(first, end, 10_000).filter((s) => !slots.includes(s) && isDown(downtime, s)).length;
        assert.ok(jobs.length + after.skippedSlots + missedWhileDown > 3 && jobs.length > 0, 'the walk crossed several slots');
        assert.equal(jobs.length + after.skippedSlots + missedWhileDown, schedule.countIn(first, end), 'every slot run, counted skipped, or missed while orloj was down');
        if (policy.firstRun === 'now') assert.equal(slots[0], w.buildCompletedAt, 'a run right after the build');
      } finally {
        await other.stop();
      }
    });
  }

  it('a paused workflow schedules nothing and resumes at its next slot, without catching up', async () => {
    await start(at('2026-05-01T00:00:00Z'));
    const w = await built({ intervalMinutes: 10 });
    const anchor = w.buildCompletedAt!;
    r.clock.advance(10 * MINUTE);
    await scheduler.tick();
    await r.runners.until(() => r.runners.jobs.length === 1, 'the first job');
    await finishAll();
    assert.equal(await store().workflows.pause(userId, w.id, r.clock.now()), true);
    assert.equal(await store().workflows.pause(userId, w.id, r.clock.now() + 1), false, 'a repeated pause changes nothing');
    r.clock.advance(35 * MINUTE);
    await scheduler.tick();
    assert.equal((await jobsOf(store(), w.id)).length, 1, 'nothing while paused');
    const paused = (await store().workflows.findById(w.id))!;
    assert.equal(paused.pausedAt, anchor + 10 * MINUTE);
    await store().workflows.resume(w.id, scheduleOf(paused)!.firstSlotAfter(r.clock.now()), r.clock.now());
    await scheduler.tick();
    assert.equal((await jobsOf(store(), w.id)).length, 1, 'no catch-up burst on resume');
    r.clock.set(anchor + 50 * MINUTE);
    await scheduler.tick();
    await r.runners.until(() => r.runners.jobs.length === 1, 'the job of the slot after resume');
    assert.deepEqual((await jobsOf(store(), w.id)).map((j) => j.slotAt), [anchor + 10 * MINUTE, anchor + 50 * MINUTE]);
    const resumed = (await store().workflows.findById(w.id))!;
    assert.equal(resumed.pausedAt, null);
    assert.equal(resumed.skippedSlots, 0, 'the slots of the pause are not skipped ones');
  });
});
