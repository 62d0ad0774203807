import assert from 'node:assert/strict';
import { newJob } from '@orloj/common/domain';
import { silentLogger } from '@orloj/common/logging';
import type { JobRunMessage } from '@orloj/common/messages';
import type { Store } from '@orloj/common/store';
import { QUEUE_FLOOR, Scheduler } from '@orloj/scheduler';
import { assertNoBacklogRead, describeEachEngine, insertWorkflowsWithJobs, tracedStore, until } from '@orloj/common/test-support';
import { insertUser, insertWorkflow, rig, type Rig } from './support.js';

const MINUTE = 60_000;
/** The runners the test plays: four slots, as RUNNER_CONCURRENCY's default. */
const SLOTS = 4;
/** Each job the test's runners take "lasts" this long on the manual clock, so the hand-out's five-second depth is measured in jobs, not in the machine's speed. */
const JOB_MS = 2_000;
/** Generous for a loaded machine: each wait is for events applied, never for time to pass. */
const WAIT_MS = 30_000;

/**
 * The work-conserving fair hand-out (docs/adr/0014-work-conserving-fair-hand-out.md)
 * with the default settings (no per-user limit), against runners with 4 slots
 * played by the test on a manual clock: each pass, the test's runners start
 * what fits in their slots and finish what the test says, so the shares
 * measured are the scheduler's choice alone, whatever the machine's load.
 */
describe('issue 30', function () {
  // Thousands of events applied one by one on a loaded machine; no wait here is on wall time.
  this.timeout(300_000);
describeEachEngine('the fair hand-out: work-conserving sharing of the runners', (db, engine) => {
  let r: Rig;
  let scheduler: Scheduler;
  const store = (): Store => db().store;
  /** Jobs the test's runners hold: started, not finished. */
  let running: JobRunMessage[];
  let taken: number;
  /** This test's users (the database holds other tests' jobs too). */
  let users: string[];
  const newUser = async () => {
    const id = await insertUser(store());
    users.push(id);
    return id;
  };

  beforeEach(async () => {
    r = await rig();
    scheduler = new Scheduler({ store: store(), bus: r.schedulerBus, clock: r.clock, workClock: r.clock, logger: silentLogger });
    await scheduler.start({ leaderLoop: false });
    running = [];
    taken = 0;
    users = [];
  });
  afterEach(async () => {
    await scheduler.stop();
    await r.bus.close();
    // The engine's database is shared by the suite: this test's workflows must not fall due in the next one.
    // Nor its open jobs take the next one's runner slots.
    if (users.length === 0) return;
    await store().db.deleteFrom('jobs').where('user_id', 'in', users).execute();
    await store().db.updateTable('workflows').set({ terminated_at: 1 }).where('user_id', 'in', users).execute();
  });

  /** The runners start the job messages they have room for (oldest first), as a FIFO queue's consumers do. */
  async function startWhatFits(): Promise<JobRunMessage[]> {
    // Every job handed out (one attempt each here) has its message delivered first.
    const handedOut = async () =>
      Number((await store().db.selectFrom('jobs').select((eb) => eb.fn.countAll().as('n')).where('status', '!=', 'PENDING').where('user_id', 'in', users).executeTakeFirstOrThrow()).n);
    await until(handedOut, (n) => r.runners.jobs.length >= n, 'the job.run messages delivered', WAIT_MS);
    const started: JobRunMessage[] = [];
    while (running.length < SLOTS && taken < r.runners.jobs.length) {
      const job = r.runners.jobs[taken++]!;
      await r.runners.started(job, r.clock.now());
      running.push(job);
      started.push(job);
    }
    for (const job of started) await until(() => store().jobs.findById(job.job_id), (j) => j?.status !== 'QUEUED', 'the start applied', WAIT_MS);
    return started;
  }

  /** The jobs end after `ms` of the manual clock. */
  async function finishAfter(ms: number, ...jobs: JobRunMessage[]): Promise<void> {
    r.clock.advance(ms);
    running = running.filter((j) => !jobs.includes(j));
    for (const job of jobs) await r.runners.finished(job, 'COMPLETED', { started: r.clock.now(), finished: r.clock.now() });
    const ids = jobs.map((j) => j.job_id);
    const completed = async () => (await store().db.selectFrom('jobs').select('id').where('id', 'in', ids).where('status', '=', 'COMPLETED').execute()).length;
    await until(completed, (n) => n === ids.length, 'the results applied', WAIT_MS);
  }

  it("runs every slot of a lone user's 500 fast checks, minute after minute", async () => {
    const user = await newUser();
    const flows = [];
    for (let i = 0; i < 500; i++) flows.push(await insertWorkflow(store(), user, r.clock.now()));
    await scheduler.tick(); // builds
    for (let minute = 1; minute <= 3; minute++) {
      r.clock.advance(MINUTE);
      // A pass per job started or ended (as Scheduler.roomFreed makes them): fast checks end as soon as they start.
      for (let passes = 0; r.runners.jobs.length < 500 * minute; passes++) {
        assert.ok(passes < 1_000, 'the minute never ended');
        await scheduler.leaderPass();
        await finishAfter(0, ...(await startWhatFits()));
      }
      assert.equal(r.runners.jobs.length, 500 * minute, `minute ${minute}: every workflow ran its slot`);
    }
    assert.equal(scheduler.stats.slotsSkipped, 0);
  });

  it('keeps only a few jobs waiting while the runners take none, and gives every due slot its job', async () => {
    const user = await newUser();
    const flows = [];
    for (let i = 0; i < 50; i++) flows.push(await insertWorkflow(store(), user, r.clock.now()));
    await scheduler.tick();
    r.clock.advance(MINUTE);
    await scheduler.tick();
    await r.runners.until(() => r.runners.jobs.length === QUEUE_FLOOR, 'four job.run messages');
    await scheduler.tick();
    assert.equal(r.runners.jobs.length, QUEUE_FLOOR, 'nothing more while the runners take nothing');
    const jobs = await store().db.selectFrom('jobs').select(['workflow_id', 'status']).where('user_id', '=', user).execute();
    assert.equal(jobs.length, 50, 'each due slot has its job');
    assert.equal(jobs.filter((j) => j.status === 'PENDING').length, 50 - QUEUE_FLOOR);
    assert.equal(scheduler.stats.slotsSkipped, 0);
  });

  it("starts a user's run-now within one job's time while another user fills the runners", async () => {
    const greedy = await newUser();
    const other = await newUser();
    for (let i = 0; i < 40; i++) await insertWorkflow(store(), greedy, r.clock.now());
    const manualFlow = await insertWorkflow(store(), other, r.clock.now(), { intervalMinutes: 600 });
    await scheduler.tick();
    r.clock.advance(MINUTE);
    await scheduler.tick();
    await startWhatFits();
    assert.equal(running.length, SLOTS, "the greedy user's jobs fill the runners");
    const built = (await store().workflows.findById(manualFlow.id))!;
    const manual = newJob(built, 'MANUAL', r.clock.now(), r.clock.now());
    await store().jobs.insert(manual);
    // Jobs end one by one; the manual job must start before the greedy user's backlog.
    for (let ended = 0; !running.some((j) => j.job_id === manual.id); ended++) {
      assert.ok(ended <= SLOTS * 2, `the run-now still waits after ${ended} jobs ended`);
      await finishAfter(JOB_MS, running[0]!);
      await scheduler.leaderPass();
      await startWhatFits();
    }
    // At worst behind the jobs already waiting in the queue: within one round of the runners.
    assert.ok(taken <= 3 * SLOTS, `started as job ${taken}`);
  });

  it("hands another user's one job out in the first pass behind 5,000 of one user's waiting, reading none of that backlog", async () => {
    const greedy = await newUser();
    const other = await newUser();
    // Waiting since a minute ago: older than the other user's job, which a queue by age would give the runners last.
    await insertWorkflowsWithJobs(store(), greedy, 5_000, 'PENDING', r.clock.now() - MINUTE);
    const lone = await insertWorkflow(store(), other, r.clock.now(), { buildStatus: 'COMPLETED', buildCompletedAt: r.clock.now(), intervalMinutes: 600 });
    const manual = newJob(lone, 'MANUAL', r.clock.now(), r.clock.now());
    await store().jobs.insert(manual);
    // The leader on a store that records its statements.
    await scheduler.stop();
    const trace = tracedStore(store());
    scheduler = new Scheduler({ store: trace.store, bus: r.schedulerBus, clock: r.clock, workClock: r.clock, logger: silentLogger });
    await scheduler.start({ leaderLoop: false });

    await scheduler.leaderPass();
    await r.runners.until(() => r.runners.jobs.length === QUEUE_FLOOR, 'the first room handed out');
    assert.ok(r.runners.jobs.some((j) => j.job_id === manual.id), "the other user's job went in the first pass");
    const reads = trace.statements().filter((q) => /\bjobs\b/.test(q.sql) && /^\s*(select|with)/i.test(q.sql));
    assert.ok(reads.some((q) => q.sql.includes('jobs_pending_user_idx') || q.sql.includes("'PENDING'")), 'the pass read the PENDING jobs');
    for (const q of reads) await assertNoBacklogRead(store().db, engine, q, 100);
  });

  it('gives two users who each want every slot about half each', async () => {
    const a = await newUser();
    const b = await newUser();
    const owner = new Map<string, string>();
    for (const user of [a, b]) for (let i = 0; i < 60; i++) owner.set((await insertWorkflow(store(), user, r.clock.now())).id, user);
    await scheduler.tick();
    r.clock.advance(MINUTE);
    const ran = new Map([
      [a, 0],
      [b, 0],
    ]);
    await scheduler.leaderPass();
    await startWhatFits();
    // 80 jobs end, one at a time, the oldest first (as equal jobs on busy runners do).
    for (let i = 0; i < 80; i++) {
      const job = running[0]!;
      const user = owner.get(job.workflow_id)!;
      ran.set(user, ran.get(user)! + 1);
      await finishAfter(JOB_MS, job);
      await scheduler.leaderPass();
      await startWhatFits();
    }
    const share = ran.get(a)! / 80;
    assert.ok(share >= 0.4 && share <= 0.6, `user a ran ${ran.get(a)} and user b ${ran.get(b)} of 80`);
  });
});
});
