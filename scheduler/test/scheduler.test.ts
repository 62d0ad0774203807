import assert from 'node:assert/strict';
import { newId, type Clock } from '@orloj/common/core';
import { newJob, type Job } from '@orloj/common/domain';
import { silentLogger } from '@orloj/common/logging';
import { MESSAGE_TYPES, QUEUES, TOPICS, type JobRunMessage } from '@orloj/common/messages';
import { roleBus } from '@orloj/common/envelope';
import type { Store } from '@orloj/common/store';
import { Scheduler, type JobEvent } from '@orloj/scheduler';
import { deferred, describeEachEngine, until as eventually, within } from '@orloj/common/test-support';
import { insertUser, insertWorkflow, ranWithoutJobs, rig, type Rig } from './support.js';

const MINUTE = 60_000;
/** These tests' fake runners start a job only when a test says so: room for every job a test hands out at once (hand-out.ts, QueueRoom). */
const FAKE_RUNNERS_ROOM = 100;

async function jobsOf(store: Store, workflowId: string): Promise<Job[]> {
  return (await store.jobs.list({ workflowId, limit: 1000 })).reverse();
}

describeEachEngine('scheduler', (db) => {
  let r: Rig;
  let scheduler: Scheduler;
  let userId: string;
  const store = () => db().store;

  beforeEach(async () => {
    r = await rig();
    // Each test's clock starts afresh: the uptime record of another test's clock would read as downtime here.
    await store().db.deleteFrom('orloj_uptime').execute();
    scheduler = new Scheduler({ store: store(), bus: r.schedulerBus, clock: r.clock, workClock: r.clock, logger: silentLogger, config: { jobLeaseTtlMs: 30_000, queueFloor: FAKE_RUNNERS_ROOM } });
    await scheduler.start({ leaderLoop: false });
    userId = await insertUser(store());
  });
  afterEach(async () => {
    await scheduler.stop();
    await r.bus.close();
  });

  /** A built HEARTBEAT workflow whose first slot is one interval after `now`. */
  async function built(overrides = {}) {
    const w = await insertWorkflow(store(), userId, r.clock.now(), overrides);
    await scheduler.tick();
    const after = await store().workflows.findById(w.id);
    assert.equal(after?.buildStatus, 'COMPLETED');
    return after!;
  }

  it('builds a HEARTBEAT workflow by validation and anchors its first slot one interval later', async () => {
    const w = await built({ intervalMinutes: 5 });
    assert.equal(w.buildCompletedAt, r.clock.now());
    assert.equal(w.nextDueAt, r.clock.now() + 5 * MINUTE);
    await scheduler.tick();
    assert.deepEqual(await jobsOf(store(), w.id), []);
  });

  it('runs one job per due slot: QUEUED, handed out, RUNNING, COMPLETED', async () => {
    const w = await built();
    const anchor = w.buildCompletedAt!;
    r.clock.advance(MINUTE);
    await scheduler.tick();
    await r.runners.until(() => r.runners.jobs.length === 1, 'a job.run');
    const msg = r.runners.jobs[0]!;
    assert.equal(msg.attempt, 1);
    assert.equal(msg.kind, 'HEARTBEAT');
    let [job] = await jobsOf(store(), w.id);
    assert.equal(job?.status, 'QUEUED');
    assert.equal(job?.slotAt, anchor + MINUTE);
    assert.equal(job?.trigger, 'AUTOMATIC');
    await r.runners.started(msg, r.clock.now());
    await eventually(() => store().jobs.findById(msg.job_id), (j) => j?.status === 'RUNNING', 'RUNNING');
    await r.runners.finished(msg, 'COMPLETED', { started: r.clock.now(), finished: r.clock.now() + 1500 });
    job = await eventually(() => store().jobs.findById(msg.job_id), (j) => j?.status === 'COMPLETED', 'COMPLETED');
    assert.equal(job?.completedAt, r.clock.now() + 1500);
    assert.equal(job?.attempts, 1);
  });

  it("records a HEARTBEAT job's check with its result, and drops a malformed one without losing the result", async () => {
    const w = await built();
    const other = await built();
    r.clock.advance(MINUTE);
    await scheduler.tick();
    await r.runners.until(() => r.runners.jobs.length === 2, 'two job.run');
    const msg = r.runners.jobs.find((j) => j.workflow_id === w.id)!;
    const next = r.runners.jobs.find((j) => j.workflow_id === other.id)!;
    await r.runners.started(msg, r.clock.now());
    await r.runners.finished(msg, 'FAILED', { started: r.clock.now(), finished: r.clock.now() + 20 }, {
      reason: { code: 'UNEXPECTED_STATUS_CODE', message: 'The endpoint answered with status 500; expected 200.' },
      check: { status_code: 500, response_time_ms: 17, failure: 'status' },
    });
    const job = await eventually(() => store().jobs.findById(msg.job_id), (j) => j?.status === 'FAILED', 'FAILED');
    assert.deepEqual(job?.check, { statusCode: 500, responseTimeMs: 17, failure: 'status' });

    await r.runners.started(next, r.clock.now());
    await r.runners.finished(next, 'COMPLETED', { started: r.clock.now(), finished: r.clock.now() + 5 }, {
      check: { status_code: 200, response_time_ms: -1 } as never,
    });
    const second = await eventually(() => store().jobs.findById(next.job_id), (j) => j?.status === 'COMPLETED', 'COMPLETED');
    assert.equal(second?.check, null);
    assert.equal((await store().workflows.findById(other.id))?.consecutiveJobFailuresCount, 0);
  });

  it('creates exactly one job per slot when two leaders tick at once', async () => {
    const w = await built();
    const other = new Scheduler({ store: store(), bus: r.schedulerBus, clock: r.clock, workClock: r.clock, logger: silentLogger });
    r.clock.advance(MINUTE);
    await Promise.all([scheduler.tick(), other.tick(), scheduler.tick(), other.tick()]);
    const jobs = await jobsOf(store(), w.id);
    assert.equal(jobs.length, 1);
    await other.stop();
  });

  it('after downtime runs only the most recent missed slot, then continues the schedule', async () => {
    const w = await built();
    const anchor = w.buildCompletedAt!;
    r.clock.advance(10 * MINUTE + 20_000);
    await scheduler.tick();
    const jobs = await jobsOf(store(), w.id);
    assert.equal(jobs.length, 1);
    assert.equal(jobs[0]!.slotAt, anchor + 10 * MINUTE);
    assert.equal((await store().workflows.findById(w.id))?.nextDueAt, anchor + 11 * MINUTE);
  });

  it('records skipped slots: on the workflow and in the stats', async () => {
    const counting = new Scheduler({ store: store(), bus: r.schedulerBus, clock: r.clock, workClock: r.clock, logger: silentLogger });
    const w = await built();
    await ranWithoutJobs(store(), r.clock, 10 * MINUTE + 20_000);
    await counting.tick();
    // slots 1 to 9 never run; slot 10 does
    const after = await store().workflows.findById(w.id);
    assert.equal(after?.skippedSlots, 9);
    assert.equal(after?.lastSlotSkippedAt, r.clock.now());
    assert.equal(counting.stats.slotsSkipped, 9);
    await counting.stop();
  });

  it('does not count the slots missed while orloj itself was down as the workflow\'s missed runs', async () => {
    const counting = new Scheduler({ store: store(), bus: r.schedulerBus, clock: r.clock, workClock: r.clock, logger: silentLogger });
    const w = await built();
    await ranWithoutJobs(store(), r.clock, 2 * MINUTE + 20_000);
    const downFrom = r.clock.now();
    // No leader ran for 8 minutes: slots 3 to 9 came while orloj was down, slot 10 runs.
    r.clock.advance(8 * MINUTE);
    await counting.tick();
    const after = await store().workflows.findById(w.id);
    assert.equal(after?.skippedSlots, 2, 'slots 1 and 2 were missed while orloj ran');
    assert.equal(counting.stats.slotsSkipped, 2);
    assert.deepEqual(await store().uptime.downtime(downFrom - 1, r.clock.now() + 1), [{ from: downFrom, to: r.clock.now() }]);
    await counting.stop();
  });

  it('hands out again, at once, a job whose message a runner refused (dead-lettered)', async () => {
    const w = await built();
    r.clock.advance(MINUTE);
    await scheduler.tick();
    await r.runners.until(() => r.runners.jobs.length === 1, 'a job.run');
    const first = r.runners.jobs[0]!;
    // What a runner that could not verify it leaves on jobs.dead (untrusted: the store decides).
    await r.bus.publish(`${QUEUES.jobs}.dead`, { type: MESSAGE_TYPES.jobRun, producer: 'scheduler', body: first });
    await r.runners.until(() => r.runners.jobs.length === 2, 'the job handed out again');
    assert.equal(r.runners.jobs[1]!.job_id, first.job_id);
    // the same attempt: it never ran, and attempts count runs
    assert.equal(r.runners.jobs[1]!.attempt, 1);
    assert.equal(scheduler.stats.jobsRefused, 1);
    // Once a runner started it, a refused copy changes nothing.
    await r.runners.started(r.runners.jobs[1]!, r.clock.now());
    await eventually(() => store().jobs.findById(first.job_id), (j) => j?.status === 'RUNNING', 'RUNNING');
    await r.bus.publish(`${QUEUES.jobs}.dead`, { type: MESSAGE_TYPES.jobRun, producer: 'scheduler', body: first });
    await new Promise((resolve) => setTimeout(resolve, 600)); // ruling out a third hand-out of the refused copy: an absence announces nothing
    assert.equal(r.runners.jobs.length, 2);
    assert.equal((await jobsOf(store(), w.id)).length, 1);
  });

  it('on the in-process bus, hands out at once what was QUEUED or RUNNING before a restart', async () => {
    const a = await built();
    const b = await built();
    r.clock.advance(MINUTE);
    await scheduler.tick();
    await r.runners.until(() => r.runners.jobs.length === 2, 'two jobs');
    const running = r.runners.jobs.find((j) => j.workflow_id === a.id)!;
    await r.runners.started(running, r.clock.now());
    await eventually(() => store().jobs.findById(running.job_id), (j) => j?.status === 'RUNNING', 'RUNNING');
    await scheduler.stop();
    // The process is gone, and with it the bus's messages and its runners.
    r.clock.advance(1_000);
    scheduler = new Scheduler({ store: store(), bus: r.schedulerBus, clock: r.clock, workClock: r.clock, logger: silentLogger });
    await scheduler.start({ leaderLoop: false });
    await scheduler.tick();
    // (jobs other tests left open in this database are handed out again too)
    const ours = () => r.runners.jobs.slice(2).filter((j) => j.workflow_id === a.id || j.workflow_id === b.id);
    await r.runners.until(() => ours().length === 2, 'both jobs handed out again');
    // b's QUEUED job on the same attempt (its message died with the process), a's RUNNING one as a new attempt (its run was lost)
    assert.deepEqual(ours().map((j) => [j.workflow_id, j.attempt]).sort(), [[a.id, 2], [b.id, 1]].sort());
    assert.ok(scheduler.stats.jobsRecoveredAfterRestart >= 2);
    // Once: the next tick leaves the new attempts alone.
    const sent = r.runners.jobs.length;
    await scheduler.tick();
    await new Promise((resolve) => setTimeout(resolve, 100)); // ruling out a second recovery: an absence announces nothing
    assert.equal(r.runners.jobs.length, sent);
  });

  it('never overlaps runs: a slot that comes while a job runs waits, and only the latest such slot runs', async () => {
    const w = await built();
    const anchor = w.buildCompletedAt!;
    r.clock.advance(MINUTE);
    await scheduler.tick();
    await r.runners.until(() => r.runners.jobs.length === 1, 'first job');
    const first = r.runners.jobs[0]!;
    await r.runners.started(first, r.clock.now());
    await eventually(() => store().jobs.findById(first.job_id), (j) => j?.status === 'RUNNING', 'RUNNING');
    // the run overruns three intervals
    for (let i = 0; i < 3; i++) {
      r.clock.advance(MINUTE);
      await r.runners.heartbeat(first);
      const renewedUntil = r.clock.now() + 30_000;
      await eventually(() => store().jobs.findById(first.job_id), (j) => j?.leaseExpiresAt === renewedUntil, 'lease renewed');
      await scheduler.tick();
    }
    assert.equal((await jobsOf(store(), w.id)).length, 1);
    await r.runners.finished(first, 'COMPLETED', { started: anchor + MINUTE, finished: r.clock.now() });
    await eventually(() => store().jobs.findById(first.job_id), (j) => j?.status === 'COMPLETED', 'COMPLETED');
    r.clock.advance(1_000);
    await scheduler.tick();
    const jobs = await jobsOf(store(), w.id);
    assert.equal(jobs.length, 2);
    assert.equal(jobs[1]!.slotAt, anchor + 4 * MINUTE);
    assert.equal(jobs[1]!.status, 'QUEUED');
  });

  it('runs a slot missed during an overrun as soon as the job ends, not at the next slot', async () => {
    const w = await built({ intervalMinutes: 10 });
    const anchor = w.buildCompletedAt!;
    r.clock.advance(10 * MINUTE);
    await scheduler.tick();
    await r.runners.until(() => r.runners.jobs.length === 1, 'first job');
    const first = r.runners.jobs[0]!;
    await r.runners.started(first, r.clock.now());
    await eventually(() => store().jobs.findById(first.job_id), (j) => j?.status === 'RUNNING', 'RUNNING');
    // The next slot (anchor + 20 min) comes while it runs: set aside until the slot after.
    r.clock.advance(10 * MINUTE);
    await r.runners.heartbeat(first);
    const renewedUntil = r.clock.now() + 30_000;
    await eventually(() => store().jobs.findById(first.job_id), (j) => j?.leaseExpiresAt === renewedUntil, 'lease renewed');
    await scheduler.tick();
    assert.equal((await store().workflows.findById(w.id))?.nextDueAt, anchor + 30 * MINUTE);
    // It ends 3 minutes later: the missed slot runs now, once.
    r.clock.advance(3 * MINUTE);
    await r.runners.finished(first, 'COMPLETED', { started: anchor + 10 * MINUTE, finished: r.clock.now() });
    await eventually(() => store().workflows.findById(w.id), (x) => x?.nextDueAt === r.clock.now(), 'due again');
    await scheduler.tick();
    const jobs = await jobsOf(store(), w.id);
    assert.deepEqual(jobs.map((j) => j.slotAt), [anchor + 10 * MINUTE, anchor + 20 * MINUTE]);
    assert.equal((await store().workflows.findById(w.id))?.nextDueAt, anchor + 30 * MINUTE);
  });

  it('counts consecutive failures once per job even when a result is delivered twice, and terminates at the limit', async () => {
    const w = await built({ maxConsecutiveJobFailuresAllowed: 3 });
    for (let n = 1; n <= 3; n++) {
      r.clock.advance(MINUTE);
      await scheduler.tick();
      await r.runners.until(() => r.runners.jobs.length === n, `job ${n}`);
      const msg = r.runners.jobs[n - 1]!;
      await r.runners.started(msg, r.clock.now());
      await r.runners.finished(msg, 'FAILED', { started: r.clock.now(), finished: r.clock.now() });
      await r.runners.finished(msg, 'FAILED', { started: r.clock.now(), finished: r.clock.now() });
      await eventually(() => store().jobs.findById(msg.job_id), (j) => j?.status === 'FAILED', 'FAILED');
      const after = await eventually(() => store().workflows.findById(w.id), (x) => x?.consecutiveJobFailuresCount === n, `count ${n}`);
      assert.equal(after?.terminatedAt !== null, n === 3);
    }
  });

  it('resets the failure count on a COMPLETED job', async () => {
    const w = await built();
    let n = 0;
    for (const status of ['FAILED', 'FAILED', 'COMPLETED'] as const) {
      r.clock.advance(MINUTE);
      await scheduler.tick();
      n++;
      await r.runners.until(() => r.runners.jobs.length === n, `job ${n}`);
      const msg = r.runners.jobs[n - 1]!;
      await r.runners.finished(msg, status, { started: r.clock.now(), finished: r.clock.now() });
      await eventually(() => store().jobs.findById(msg.job_id), (j) => j?.status === status, status);
    }
    assert.equal((await store().workflows.findById(w.id))?.consecutiveJobFailuresCount, 0);
  });

  it('retries a job whose runner vanished on a new attempt, and fails it with SYSTEM_ERROR after 3', async () => {
    const w = await built();
    r.clock.advance(MINUTE);
    await scheduler.tick();
    for (let attempt = 1; attempt <= 3; attempt++) {
      await r.runners.until(() => r.runners.jobs.length === attempt, `attempt ${attempt}`);
      const msg = r.runners.jobs[attempt - 1]!;
      assert.equal(msg.attempt, attempt);
      await r.runners.started(msg, r.clock.now());
      await eventually(() => store().jobs.findById(msg.job_id), (j) => j?.status === 'RUNNING' && j.attempts === attempt, 'RUNNING');
      r.clock.advance(31_000); // no heartbeats: the lease expires
      await scheduler.tick();
    }
    const [job] = await jobsOf(store(), w.id);
    assert.equal(job?.status, 'FAILED');
    assert.equal(job?.statusReasonCode, 'SYSTEM_ERROR');
    assert.equal(job?.attempts, 3);
    assert.equal((await store().workflows.findById(w.id))?.consecutiveJobFailuresCount, 1);
    // The two attempts given up are recorded with their runner and why; the third is the job's own row.
    const given = await store().jobAttempts.ofJob(job!.id);
    assert.deepEqual(given.map((a) => [a.attempt, a.runnerId, a.end.code]), [[1, 'r1', 'lease_lost'], [2, 'r1', 'lease_lost']]);
    assert.ok(given.every((a) => a.startedAt !== null && a.endedAt > a.startedAt));
  });

  it('hands out again, as a new attempt, a job queued by a leader that died before publishing it', async () => {
    const w = await built();
    const job = newJob(w, 'MANUAL', r.clock.now(), r.clock.now());
    await store().jobs.insert(job);
    // what the dead leader managed: the state change, not the message
    await store().jobMoves.transition(job.id, 'QUEUED', r.clock.now(), { attempts: 1, queuedAt: r.clock.now() });
    await scheduler.tick();
    assert.equal(r.runners.jobs.length, 0);
    r.clock.advance(15_001);
    await scheduler.tick();
    await r.runners.until(() => r.runners.jobs.length === 1, 'the job handed out again');
    assert.equal(r.runners.jobs[0]!.attempt, 2);
    assert.ok((await store().jobs.findById(job.id))?.attempts === 2);
    assert.deepEqual((await store().jobAttempts.ofJob(job.id)).map((a) => a.end.code), ['not_started']);
  });

  it('ignores events about an old attempt and tells that runner to stop', async () => {
    await built();
    r.clock.advance(MINUTE);
    await scheduler.tick();
    await r.runners.until(() => r.runners.jobs.length === 1, 'attempt 1');
    const old = r.runners.jobs[0]!;
    await r.runners.started(old, r.clock.now());
    await eventually(() => store().jobs.findById(old.job_id), (j) => j?.status === 'RUNNING', 'RUNNING');
    r.clock.advance(31_000);
    await scheduler.tick();
    await r.runners.until(() => r.runners.jobs.length === 2, 'attempt 2');
    await r.runners.finished(old, 'COMPLETED', { started: 0, finished: 1 });
    await r.runners.heartbeat(old);
    await r.runners.until(() => r.runners.stops.some((s) => s.job_id === old.job_id && s.attempt === 1), 'stop for attempt 1');
    const job = await store().jobs.findById(old.job_id);
    assert.equal(job?.status, 'QUEUED');
    assert.equal(job?.attempts, 2);
  });

  it('retries a SYSTEM failure reported by a runner', async () => {
    await built();
    r.clock.advance(MINUTE);
    await scheduler.tick();
    await r.runners.until(() => r.runners.jobs.length === 1, 'attempt 1');
    const msg = r.runners.jobs[0]!;
    await r.runners.finished(msg, 'FAILED', { started: 0, finished: 1 }, { system_failure: true, reason: { code: 'SYSTEM_ERROR', message: 'The container runtime is not available.' } });
    await r.runners.until(() => r.runners.jobs.length === 2, 'attempt 2');
    assert.equal(r.runners.jobs[1]!.attempt, 2);
    const [given] = await store().jobAttempts.ofJob(msg.job_id);
    assert.deepEqual(given?.end, { code: 'runner_failure', message: 'The container runtime is not available.' });
  });

  it('asks runners to stop the running job of a terminated workflow, and cancels queued ones', async () => {
    const w = await built();
    r.clock.advance(MINUTE);
    await scheduler.tick();
    await r.runners.until(() => r.runners.jobs.length === 1, 'job');
    const msg = r.runners.jobs[0]!;
    await r.runners.started(msg, r.clock.now());
    await eventually(() => store().jobs.findById(msg.job_id), (j) => j?.status === 'RUNNING', 'RUNNING');
    await store().transaction(async (tx) => {
      const { terminateWorkflow } = await import('@orloj/common/store');
      assert.equal(await terminateWorkflow(tx, userId, w.id, r.clock.now()), true);
    });
    await scheduler.tick();
    await r.runners.until(() => r.runners.stops.some((s) => s.job_id === msg.job_id), 'stop');
    assert.equal(r.runners.stops.find((s) => s.job_id === msg.job_id)?.reason.code, 'WORKFLOW_TERMINATED');
    await r.runners.finished(msg, 'CANCELED', { started: 0, finished: 1 }, { reason: { code: 'WORKFLOW_TERMINATED', message: 'The workflow was terminated.' } });
    const job = await eventually(() => store().jobs.findById(msg.job_id), (j) => j?.status === 'CANCELED', 'CANCELED');
    assert.equal(job?.statusReasonCode, 'WORKFLOW_TERMINATED');
    // a terminated workflow gets no new jobs
    r.clock.advance(5 * MINUTE);
    await scheduler.tick();
    assert.equal((await jobsOf(store(), w.id)).length, 1);
  });

  it('builds a CONTAINER workflow through the runners and ignores a stale build result', async () => {
    const w = await insertWorkflow(store(), userId, r.clock.now(), { kind: 'CONTAINER', payload: JSON.stringify({ image: 'busybox:1' }) });
    await scheduler.tick();
    await r.runners.until(() => r.runners.builds.length === 1, 'build.run');
    const build = r.runners.builds[0]!;
    assert.equal(build.image, 'busybox:1');
    assert.equal((await store().workflows.findById(w.id))?.buildStatus, 'STARTED');
    await r.runners.buildFinished({ ...build, build_token: build.build_token - 1 }, true);
    await r.runners.buildFinished(build, true);
    const done = await eventually(() => store().workflows.findById(w.id), (x) => x?.buildStatus === 'COMPLETED', 'COMPLETED');
    assert.equal(done?.nextDueAt, done!.buildCompletedAt! + MINUTE);
  });

  it('marks a CONTAINER build FAILED when the runner cannot get the image, and requests a lost build again', async () => {
    const w = await insertWorkflow(store(), userId, r.clock.now(), { kind: 'CONTAINER', payload: JSON.stringify({ image: 'missing:1' }) });
    await scheduler.tick();
    await r.runners.until(() => r.runners.builds.length === 1, 'build.run');
    r.clock.advance(5 * MINUTE + 1);
    await scheduler.tick();
    await r.runners.until(() => r.runners.builds.length === 2, 'build.run again');
    await r.runners.buildFinished(r.runners.builds[0]!, true); // stale token: ignored
    await r.runners.buildFinished(r.runners.builds[1]!, false);
    await eventually(() => store().workflows.findById(w.id), (x) => x?.buildStatus === 'FAILED', 'FAILED');
  });

  it('dispatches a manual job and never runs it beside another job of the workflow', async () => {
    const w = await built();
    await store().jobs.insert(newJob(w, 'MANUAL', r.clock.now(), r.clock.now()));
    await store().jobs.insert(newJob(w, 'MANUAL', r.clock.now(), r.clock.now()));
    await scheduler.tick();
    await r.runners.until(() => r.runners.jobs.length === 1, 'manual job');
    await scheduler.tick();
    assert.equal(r.runners.jobs.length, 1);
    const statuses = (await jobsOf(store(), w.id)).map((j) => j.status).sort();
    assert.deepEqual(statuses, ['PENDING', 'QUEUED']);
  });

  describe('runner events applied in one batch', () => {
    // As the consumer would hand them over, but not decoded: a bad field reaches the store (and fails there).
    function event(type: string, body: unknown): JobEvent {
      const now = r.clock.now();
      return { id: newId(), type, producer: 'runners', issued_at: now, expires_at: now + MINUTE, body, sig: '-' } as JobEvent;
    }
    const started = (m: JobRunMessage, attempt = m.attempt) =>
      event(MESSAGE_TYPES.jobStarted, { job_id: m.job_id, attempt, runner_id: 'r1', started_at: r.clock.now() });
    const finished = (m: JobRunMessage, status: string) =>
      event(MESSAGE_TYPES.jobFinished, {
        job_id: m.job_id,
        attempt: m.attempt,
        runner_id: 'r1',
        status,
        started_at: r.clock.now(),
        finished_at: r.clock.now() + 10,
        ...(status === 'FAILED' ? { reason: { code: 'UNEXPECTED_STATUS_CODE', message: '500' } } : {}),
      });

    /** Due jobs of `count` new workflows, handed out (attempt 1). */
    async function handedOut(count: number, overrides = {}): Promise<JobRunMessage[]> {
      const workflows = await Promise.all(Array.from({ length: count }, () => insertWorkflow(store(), userId, r.clock.now(), overrides)));
      await scheduler.tick();
      r.clock.advance(MINUTE);
      await scheduler.tick();
      await r.runners.until(() => workflows.every((w) => r.runners.jobs.some((j) => j.workflow_id === w.id)), 'the job.run messages');
      return workflows.map((w) => r.runners.jobs.find((j) => j.workflow_id === w.id)!);
    }

    async function jobEvents(jobId: string): Promise<string[]> {
      const rows = await store().db.selectFrom('domain_events').select(['kind', 'data']).execute();
      return rows.filter((e) => (JSON.parse(e.data) as { job_id?: string }).job_id === jobId).map((e) => e.kind);
    }

    it('applies a duplicate result and a stale attempt in the same batch as if each came alone', async () => {
      const [a, b] = await handedOut(2, { maxConsecutiveJobFailuresAllowed: 5 });
      const results = await scheduler.applyEvents([
        started(a!),
        finished(a!, 'FAILED'),
        finished(a!, 'FAILED'), // delivered twice
        started(b!, 7), // an attempt the store does not expect
        started(b!),
        finished(b!, 'COMPLETED'),
      ]);
      assert.deepEqual(results.map((x) => x.status), Array(6).fill('fulfilled'));
      const jobA = await store().jobs.findById(a!.job_id);
      assert.equal(jobA?.status, 'FAILED');
      assert.equal(jobA?.attempts, 1);
      assert.equal((await store().workflows.findById(a!.workflow_id))?.consecutiveJobFailuresCount, 1);
      assert.deepEqual(await jobEvents(a!.job_id), ['job.failed']);
      assert.equal((await store().jobs.findById(b!.job_id))?.status, 'COMPLETED');
      assert.deepEqual(await jobEvents(b!.job_id), ['job.completed']);
      await r.runners.until(() => r.runners.stops.some((s) => s.job_id === b!.job_id && s.attempt === 7), 'a stop for the stale attempt');
      assert.ok(!r.runners.stops.some((s) => s.job_id === b!.job_id && s.attempt === 1));
    });

    it('records a start and the result that follows it in the batch in one write, as the two in turn would', async () => {
      const [a] = await handedOut(1);
      const before = await store().jobs.findById(a!.job_id);
      const results = await scheduler.applyEvents([started(a!), finished(a!, 'COMPLETED')]);
      assert.deepEqual(results.map((x) => x.status), ['fulfilled', 'fulfilled']);
      const job = await store().jobs.findById(a!.job_id);
      assert.equal(before?.status, 'QUEUED');
      assert.deepEqual(
        { status: job?.status, runnerId: job?.runnerId, startedAt: job?.startedAt, leaseExpiresAt: job?.leaseExpiresAt, attempts: job?.attempts },
        { status: 'COMPLETED', runnerId: 'r1', startedAt: r.clock.now(), leaseExpiresAt: null, attempts: 1 },
      );
      assert.deepEqual(await jobEvents(a!.job_id), ['job.completed']);
      assert.ok(!r.runners.stops.some((x) => x.job_id === a!.job_id));
    });

    it('tells of a recovery and resets the failure count from a batch, as when each event came alone', async () => {
      const [a, b] = await handedOut(2, { maxConsecutiveJobFailuresAllowed: 5 });
      await scheduler.applyEvents([started(a!), started(b!), finished(a!, 'FAILED'), finished(b!, 'COMPLETED')]);
      assert.equal((await store().workflows.findById(a!.workflow_id))?.consecutiveJobFailuresCount, 1);
      r.clock.advance(MINUTE);
      await scheduler.tick();
      await r.runners.until(() => r.runners.jobs.filter((j) => j.workflow_id === a!.workflow_id || j.workflow_id === b!.workflow_id).length === 4, 'the next jobs');
      const next = (w: string) => r.runners.jobs.filter((j) => j.workflow_id === w).at(-1)!;
      const [a2, b2] = [next(a!.workflow_id), next(b!.workflow_id)];
      const results = await scheduler.applyEvents([started(a2), started(b2), finished(a2, 'COMPLETED'), finished(b2, 'COMPLETED')]);
      assert.deepEqual(results.map((x) => x.status), Array(4).fill('fulfilled'));
      assert.equal((await store().workflows.findById(a!.workflow_id))?.consecutiveJobFailuresCount, 0);
      assert.deepEqual((await jobEvents(a2.job_id)).sort(), ['job.completed', 'workflow.recovered']);
      assert.deepEqual(await jobEvents(b2.job_id), ['job.completed']);
      assert.equal(r.runners.stops.length, 0, 'no runner was told to stop');
    });

    it('applies the other events of a batch when one of them fails', async () => {
      const [a, b] = await handedOut(2);
      const applying = scheduler.applyEvents([started(a!), finished(a!, 'NOT_A_STATUS'), started(b!), finished(b!, 'COMPLETED')]);
      // The bad event is retried on its own with backoff (clock time) until it is given back to the bus.
      let settled = false;
      void applying.finally(() => (settled = true));
      while (!settled) {
        r.clock.advance(10_000);
        await new Promise((resolve) => setImmediate(resolve));
      }
      const results = await applying;
      assert.deepEqual(results.map((x) => x.status), ['fulfilled', 'rejected', 'fulfilled', 'fulfilled']);
      assert.equal((await store().jobs.findById(a!.job_id))?.status, 'RUNNING');
      assert.equal((await store().jobs.findById(b!.job_id))?.status, 'COMPLETED');
      assert.deepEqual(await jobEvents(b!.job_id), ['job.completed']);
    });

    it('applies the events the consumer holds at once, each once, when runners report many jobs together', async () => {
      const messages = await handedOut(20);
      await Promise.all(messages.flatMap((m) => [r.runners.started(m, r.clock.now()), r.runners.finished(m, 'COMPLETED', { started: r.clock.now(), finished: r.clock.now() })]));
      for (const m of messages) {
        await eventually(() => store().jobs.findById(m.job_id), (j) => j?.status === 'COMPLETED', 'COMPLETED');
        assert.deepEqual(await jobEvents(m.job_id), ['job.completed']);
      }
    });
  });

  describe('with batches of 3', () => {
    let small: Scheduler;
    beforeEach(() => {
      small = new Scheduler({ store: store(), bus: r.schedulerBus, clock: r.clock, workClock: r.clock, logger: silentLogger, config: { batchSize: 3, queueFloor: FAKE_RUNNERS_ROOM } });
    });
    afterEach(() => small.stop());

    it('takes batch after batch in one tick when more slots are due than a batch holds', async () => {
      const workflows = await Promise.all(Array.from({ length: 8 }, () => insertWorkflow(store(), userId, r.clock.now())));
      await scheduler.tick(); // builds all eight
      r.clock.advance(MINUTE);
      await small.tick();
      await r.runners.until(() => r.runners.jobs.length === 8, 'eight job.run');
      for (const w of workflows) assert.equal((await jobsOf(store(), w.id)).length, 1);
    });

    it('does not let workflows whose jobs overrun hold back the others', async () => {
      const overrunning = await Promise.all(Array.from({ length: 3 }, () => insertWorkflow(store(), userId, r.clock.now())));
      await scheduler.tick();
      r.clock.advance(MINUTE);
      await small.tick();
      await r.runners.until(() => r.runners.jobs.length === 3, 'three job.run');
      // Their jobs are still QUEUED when the next slots come, and one more workflow is built and due.
      const late = await insertWorkflow(store(), userId, r.clock.now());
      await scheduler.tick();
      r.clock.advance(MINUTE);
      await small.tick();
      await r.runners.until(() => r.runners.jobs.some((j) => j.workflow_id === late.id), "the other workflow's job.run");
      for (const w of overrunning) assert.equal((await jobsOf(store(), w.id)).length, 1);
    });
  });

  it('hands out no more than maxQueued jobs until the runners start them', async () => {
    // Earlier tests in this store left QUEUED jobs behind; room for two more.
    const before = await store().jobQueue.countQueued(10_000);
    const held = new Scheduler({ store: store(), bus: r.schedulerBus, clock: r.clock, workClock: r.clock, logger: silentLogger, config: { maxQueued: before + 2 } });
    try {
      await Promise.all(Array.from({ length: 5 }, () => insertWorkflow(store(), userId, r.clock.now())));
      await scheduler.tick(); // builds
      r.clock.advance(MINUTE);
      await held.tick();
      await r.runners.until(() => r.runners.jobs.length === 2, 'two job.run');
      await held.tick();
      assert.equal(r.runners.jobs.length, 2);
      for (const job of r.runners.jobs) await r.runners.started(job, r.clock.now());
      await eventually(() => store().jobQueue.countQueued(10_000), (n) => n === before, 'both started');
      await held.tick();
      await r.runners.until(() => r.runners.jobs.length === 4, 'two more job.run');
    } finally {
      await held.stop();
    }
  });

  /**
   * The rig's clock, telling when the scheduler's loop first sleeps on it: its first (full)
   * tick is over, so whatever it does next was woken by the clock or a nudge.
   */
  function watchedClock(): { clock: Clock; asleep: Promise<void> } {
    const asleep = deferred();
    const clock: Clock = {
      now: () => r.clock.now(),
      sleep: (ms, signal) => {
        asleep.resolve();
        return r.clock.sleep(ms, signal);
      },
    };
    return { clock, asleep: within(asleep.promise, "the loop's first sleep", 60_000) };
  }

  it('wakes when the next slot falls due instead of waiting for the next tick', async () => {
    const watched = watchedClock();
    const looping = new Scheduler({ store: store(), bus: r.schedulerBus, clock: watched.clock, logger: silentLogger, config: { tickMs: 10 * MINUTE } });
    try {
      const w = await built({ intervalMinutes: 1 });
      await looping.start();
      // The loop's first (full) tick, then its sleep until the slot one minute on, well before its next tick.
      await watched.asleep;
      assert.ok(looping.isLeader);
      assert.ok(!r.runners.jobs.some((j) => j.workflow_id === w.id), 'nothing was due at the first tick');
      r.clock.advance(MINUTE);
      await r.runners.until(() => r.runners.jobs.some((j) => j.workflow_id === w.id), 'a job.run before the next tick');
    } finally {
      await looping.stop();
    }
  });

  it('takes a manual job at once when the api nudges it, without waiting for the tick', async () => {
    const watched = watchedClock();
    const looping = new Scheduler({ store: store(), bus: r.schedulerBus, clock: watched.clock, logger: silentLogger, config: { tickMs: 10 * MINUTE } });
    const api = roleBus({ bus: r.bus, role: 'api', keys: r.keys, clock: r.clock, logger: silentLogger });
    try {
      const w = await built({ intervalMinutes: 60 });
      await looping.start();
      // After the first tick: a job inserted now is not one that tick could have handed out.
      await watched.asleep;
      assert.ok(looping.isLeader);
      await store().jobs.insert(newJob(w, 'MANUAL', r.clock.now(), r.clock.now()));
      await api.broadcast(TOPICS.schedulerWake, MESSAGE_TYPES.schedulerWake, {});
      // The clock stands still: only the nudge can have the job handed out.
      await r.runners.until(() => r.runners.jobs.some((j) => j.workflow_id === w.id), 'the manual job.run');
    } finally {
      await looping.stop();
    }
  });
});
