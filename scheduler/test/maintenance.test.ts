/**
 * Maintenance windows and snooze with the real scheduler on both engines and
 * both buses (issue 25, docs/adr/0019-maintenance-windows.md): a skip window
 * gives its slots no job, through two leaders, and they read skipped for
 * maintenance; a mute window (a snooze) lets the run fail without turning the
 * workflow down, opening an incident or notifying anyone, and alerting comes
 * back when it ends.
 */
import assert from 'node:assert/strict';
import { scheduleOf, skipsSlot, slotFates, type DomainEvent, type Workflow } from '@orloj/common/domain';
import { silentLogger } from '@orloj/common/logging';
import { Scheduler } from '@orloj/scheduler';
import { newId } from '@orloj/common/core';
import { describeEachEngine, until as eventually } from '@orloj/common/test-support';
import { insertUser, insertWorkflow, jobsOf, rig, TEST_BUSES, type Rig } from './support.js';

const MINUTE = 60_000;
const START = Date.UTC(2026, 4, 1);

describeEachEngine('scheduler: maintenance windows and snooze', (db) => {
  const store = () => db().store;
  let r: Rig | undefined;
  const leaders: Scheduler[] = [];
  let busDone: (() => Promise<void>) | undefined;
  afterEach(async () => {
    for (const l of leaders.splice(0)) await l.stop(); // before the bus they use
    await r?.bus.close();
    r = undefined;
    await busDone?.();
    busDone = undefined;
  });

  /** Two leaders (their loops off: the test ticks them) on one clock, and a built interval workflow of a new user. */
  async function start(ctx: Mocha.Context, open: (typeof TEST_BUSES)[number][1], overrides: Partial<Workflow> = {}) {
    const { bus, done } = await open(ctx);
    busDone = done;
    const rg = (r = await rig(START, bus));
    for (let i = 0; i < 2; i++) {
      const l = new Scheduler({ store: store(), bus: rg.schedulerBus, clock: rg.clock, logger: silentLogger, config: { jobLeaseTtlMs: 30_000 } });
      await l.start({ leaderLoop: false });
      leaders.push(l);
    }
    const userId = await insertUser(store());
    const inserted = await insertWorkflow(store(), userId, START, { intervalMinutes: 10, maxConsecutiveJobFailuresAllowed: 100, ...overrides });
    await tickAll();
    return { rg, userId, w: (await store().workflows.findById(inserted.id))! };
  }
  const tickAll = async () => {
    await Promise.all(leaders.map((l) => l.tick()));
  };

  /** Ends every job handed out so far as `status`. */
  async function finishAll(rg: Rig, status: 'COMPLETED' | 'FAILED' = 'COMPLETED'): Promise<void> {
    for (const msg of rg.runners.jobs.splice(0)) {
      await rg.runners.started(msg, rg.clock.now());
      await rg.runners.finished(msg, status, { started: rg.clock.now(), finished: rg.clock.now() });
      await eventually(() => store().jobs.findById(msg.job_id), (j) => j?.status === status, status);
    }
  }

  /** The outbox's events of the workflow (claimed for good: no relay runs here). */
  const claimed: DomainEvent[] = [];
  async function eventsOf(workflowId: string): Promise<DomainEvent[]> {
    claimed.push(...(await store().outbox.claimDue(Number.MAX_SAFE_INTEGER - 1, Number.MAX_SAFE_INTEGER, 10_000)));
    return claimed.filter((e) => e.workflow_id === workflowId);
  }

  for (const [busName, open] of TEST_BUSES) {
    it(`creates no job for a slot inside a skip window, with two leaders, and the slot reads skipped for maintenance (${busName})`, async function () {
      const { rg, userId, w } = await start(this, open, { name: 'Nightly DB backup' });
      const anchor = w.buildCompletedAt!;
      // Over the slots at +20 and +30 of the workflows whose name contains "db backup"
      await store().maintenanceWindows.insert(newId(), userId, { name: 'Upgrade', mode: 'skip', workflowQuery: 'DB BACKUP', startsAt: anchor + 15 * MINUTE, endsAt: anchor + 35 * MINUTE }, START);
      for (let t = 5; t <= 50; t += 5) {
        rg.clock.set(anchor + t * MINUTE);
        await tickAll();
        await tickAll();
        const queued = (await jobsOf(store(), w.id)).filter((j) => j.status === 'QUEUED').length;
        await rg.runners.until(() => rg.runners.jobs.length >= queued, 'the queued job handed out');
        await finishAll(rg);
      }
      const jobs = await jobsOf(store(), w.id);
      assert.deepEqual(
        jobs.map((j) => (j.slotAt - anchor) / MINUTE),
        [10, 40, 50],
        'no job for the slots in the window, one for each other',
      );
      const after = (await store().workflows.findById(w.id))!;
      assert.equal(after.skippedSlots, 0, 'maintenance is not the runners falling behind');
      const windows = await store().maintenanceWindows.inForce([userId], anchor);
      const fates = slotFates(after, scheduleOf(after)!, jobs, { from: anchor, to: anchor + 51 * MINUTE, now: rg.clock.now() }, { inMaintenance: (s) => skipsSlot(windows, after, s) });
      assert.deepEqual(
        fates.map((f) => `${(f.slotAt - anchor) / MINUTE} ${f.fate}${f.reason ? ` ${f.reason}` : ''}`),
        ['10 ran', '20 skipped maintenance', '30 skipped maintenance', '40 ran', '50 ran'],
      );
    });
  }

  it('lets a snoozed workflow fail without going down, an incident or a notification, and alerts again once the snooze is over', async function () {
    const { rg, userId, w } = await start(this, TEST_BUSES[0]![1]);
    const anchor = w.buildCompletedAt!;
    await store().maintenanceWindows.snooze(newId(), userId, w.id, anchor + 15 * MINUTE, START);
    rg.clock.set(anchor + 10 * MINUTE);
    await tickAll();
    await rg.runners.until(() => rg.runners.jobs.length === 1, 'the job of the snoozed slot');
    await finishAll(rg, 'FAILED');
    assert.equal((await store().workflows.findById(w.id))!.alertDown, false, 'not down');
    assert.deepEqual(await store().incidents.list({ userId, workflowId: w.id, limit: 10 }), [], 'no incident');
    const [muted] = (await eventsOf(w.id)).filter((e) => e.kind === 'job.failed');
    assert.deepEqual(muted && { muted: (muted.data as { muted?: true }).muted, down: (muted.data as { down?: true }).down }, { muted: true, down: undefined });

    rg.clock.set(anchor + 20 * MINUTE);
    await tickAll();
    await rg.runners.until(() => rg.runners.jobs.length === 1, 'the job after the snooze');
    await finishAll(rg, 'FAILED');
    assert.equal((await store().workflows.findById(w.id))!.alertDown, true, 'down, once the snooze is over');
    assert.equal((await store().incidents.list({ userId, workflowId: w.id, limit: 10 })).length, 1);
    const failed = (await eventsOf(w.id)).filter((e) => e.kind === 'job.failed').map((e) => e.data as { muted?: true; down?: true });
    assert.deepEqual(failed.at(-1), { ...failed.at(-1), down: true });
    assert.equal(failed.at(-1)?.muted, undefined);
  });
});
