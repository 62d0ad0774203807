/**
 * The judge of the chaos, restart and rolling-upgrade runs (scripts/harness/verify.ts)
 * fed recorded runs: a clean one it must pass, and the same run with one violation of
 * each kind planted, each of which it must report under its guarantee's letter
 * (docs/chaos.md), and the misses it may explain, which it must not report.
 */
import assert from 'node:assert/strict';
import { jitterOffsetMs, scheduleOf } from '@orloj/common/domain';
import { verify, type JobRow, type LeaderSample, type WorkflowRow } from '../../scripts/harness/verify.js';
import { iso } from '../../scripts/harness/time.js';

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const BUILT = Date.UTC(2026, 0, 1);
const TICK = 1_000;

const workflow = (id: string): WorkflowRow => ({
  id,
  user_id: 'u1',
  name: id,
  name_folded: id,
  payload: '{}',
  kind: 'HEARTBEAT',
  build_status: 'COMPLETED',
  interval_minutes: 1,
  consecutive_job_failures_count: 0,
  max_consecutive_job_failures_allowed: 10,
  log_retention: 0,
  generation: 1,
  created_at: BUILT - MINUTE,
  updated_at: BUILT,
  terminated_at: null,
  build_completed_at: BUILT,
  next_due_at: null,
  build_token: 1,
  build_requested_at: null,
  skipped_slots: 0,
  last_slot_skipped_at: null,
  build_error_code: null,
  build_error_message: null,
  alert_after_failures: 1,
  recover_after_successes: 1,
  alert_down: 0,
  cron: null,
  timezone: 'UTC',
  jitter_seconds: 0,
  jitter_offset_ms: 0,
  paused_at: null,
  overlap_policy: 'run_after',
  catch_up_policy: 'latest',
  first_run: 'at_first_slot',
  attention: 3,
});

/** The job of slot k of workflow `w`: created 100 ms into its slot, ran 5 s. */
const job = (w: string, k: number, over: Partial<JobRow> = {}): JobRow => jobAt(w, BUILT + k * MINUTE, { id: `${w}-j${k}`, ...over });

/** The job of workflow `w` for `slot`: created 100 ms into it, ran 5 s. */
const jobAt = (w: string, slot: number, over: Partial<JobRow> = {}): JobRow => {
  return {
    id: `${w}-${slot}`,
    workflow_id: w,
    user_id: 'u1',
    generation: 1,
    trigger: 'AUTOMATIC',
    status: 'COMPLETED',
    slot_at: slot,
    scheduled_at: slot,
    attempts: 1,
    queued_at: slot + 100,
    dispatched_at: slot + 100,
    runner_id: 'r1',
    lease_expires_at: null,
    stop_requested_at: null,
    container_id: null,
    started_at: slot + 200,
    completed_at: slot + 5_200,
    status_reason_code: null,
    status_reason_message: null,
    created_at: slot + 100,
    updated_at: slot + 5_200,
    log_truncated: 0,
    check_status_code: 200,
    check_response_ms: 5,
    check_failure: null,
    request_id: null,
    ...over,
  };
};

/** A leader sample every 10 s of the run (12 minutes, or `minutes`), live unless `down` says otherwise. */
const samples = (down: (at: number) => boolean = () => false, minutes = 12): LeaderSample[] =>
  Array.from({ length: minutes * 6 }, (_, i) => BUILT + i * 10_000).map((at) => ({ at, holder: down(at) ? undefined : 's1', token: 1, live: !down(at) }));

/** Two workflows, slots 1 to 10 each, judged up to slot 10 (killEnd one interval on). */
function run(edit: (jobs: JobRow[]) => JobRow[] = (j) => j, leader = samples()) {
  const jobs = ['w1', 'w2'].flatMap((w) => Array.from({ length: 10 }, (_, i) => job(w, i + 1)));
  return verify({ workflows: [workflow('w1'), workflow('w2')], jobs: edit(jobs), killEnd: BUILT + 11 * MINUTE, tickMs: TICK, samples: leader, maxAttempts: 3 });
}

const only = (violations: string[], pattern: RegExp) => {
  assert.ok(violations.length >= 1, 'the violation was reported');
  for (const v of violations) assert.match(v, pattern);
};

describe('verify: the judge of chaos and restart runs', () => {
  it('passes a clean run, counting every slot it checked', () => {
    const r = run();
    assert.deepEqual(r.violations, []);
    assert.deepEqual(r.explained, []);
    assert.equal(r.checkedSlots, 20);
  });

  it('reports a duplicate job for one slot (a)', () => {
    const r = run((jobs) => [...jobs, job('w1', 4, { id: 'w1-j4-again', created_at: BUILT + 4 * MINUTE + 900, started_at: BUILT + 4 * MINUTE + 5_300, completed_at: BUILT + 4 * MINUTE + 9_000 })]);
    assert.ok(r.violations.some((v) => /^\(a\) workflow w1 has 2 jobs for slot .*w1-j4, w1-j4-again/.test(v)), r.violations.join('\n'));
  });

  it('reports a job off the slot grid or created outside its slot window (a)', () => {
    const off = run((jobs) => jobs.map((j) => (j.id === 'w2-j3' ? { ...j, slot_at: j.slot_at + 7_000 } : j)));
    assert.ok(off.violations.some((v) => /^\(a\) job w2-j3 of workflow w2 has slot .*off its schedule/.test(v)), off.violations.join('\n'));
    const late = run((jobs) => jobs.map((j) => (j.id === 'w2-j3' ? { ...j, created_at: j.slot_at + 2 * MINUTE } : j)));
    assert.ok(late.violations.some((v) => /^\(a\) job w2-j3 for slot .* was created at .*outside its slot's window/.test(v)), late.violations.join('\n'));
  });

  it('reports a missed slot while a leader was live and the workflow free (d)', () => {
    const r = run((jobs) => jobs.filter((j) => j.id !== 'w1-j5'));
    only(r.violations, /^\(d\) workflow w1, slot .*: missed although the workflow was free/);
    assert.equal(r.checkedSlots, 19);
  });

  it('reports a workflow whose jobs stop altogether (d)', () => {
    const r = run((jobs) => jobs.filter((j) => !(j.workflow_id === 'w2' && j.slot_at >= BUILT + 8 * MINUTE)));
    assert.ok(r.violations.some((v) => /^\(d\) workflow w2, slot .*: no job for this slot or any later one/.test(v)), r.violations.join('\n'));
  });

  it('explains, and does not report, a miss with no live leader, or after a job that ran past the window', () => {
    const leaderless = run(
      (jobs) => jobs.filter((j) => j.id !== 'w1-j5'),
      samples((at) => at >= BUILT + 5 * MINUTE && at < BUILT + 6 * MINUTE),
    );
    assert.deepEqual(leaderless.violations, []);
    only(leaderless.explained, /^workflow w1, slot .*: no live scheduler leader from/);
    const overran = run((jobs) =>
      jobs.filter((j) => j.id !== 'w1-j5').map((j) => (j.id === 'w1-j4' ? { ...j, completed_at: BUILT + 6 * MINUTE + 100, updated_at: BUILT + 6 * MINUTE + 100 } : j)),
    );
    assert.deepEqual(overran.violations, []);
    only(overran.explained, /^workflow w1, slot .*: the previous job .* ended .*at or after this slot's window closed/);
    // A job that ran on past the end of the run (the schedules frozen) leaves no later job: still an overrun.
    const lastOverran = run((jobs) =>
      jobs.filter((j) => !(j.workflow_id === 'w1' && j.slot_at > BUILT + 9 * MINUTE)).map((j) => (j.id === 'w1-j9' ? { ...j, completed_at: BUILT + 12 * MINUTE, updated_at: BUILT + 12 * MINUTE } : j)),
    );
    assert.deepEqual(lastOverran.violations, []);
    only(lastOverran.explained, /^workflow w1, slot .*: the previous job .* at or after this slot's window closed .*; no later job \(it ended after the schedules were frozen\)/);
  });

  it('explains a miss while the lease was live only where orloj recorded no leader pass, with the pass slack given', () => {
    const jobs = ['w1', 'w2'].flatMap((w) => Array.from({ length: 10 }, (_, i) => job(w, i + 1))).filter((j) => j.id !== 'w1-j5');
    const judge = (over: { downtime?: { from: number; to: number }[]; passSlackMs?: number }) =>
      verify({ workflows: [workflow('w1'), workflow('w2')], jobs, killEnd: BUILT + 11 * MINUTE, tickMs: TICK, samples: samples(), maxAttempts: 3, ...over });
    // The lease was live throughout; orloj's uptime record has no pass from before slot 5 until 15 s before its window closed.
    const stalled = [{ from: BUILT + 5 * MINUTE - 1_000, to: BUILT + 6 * MINUTE - 15_000 }];
    only(judge({ downtime: stalled }).violations, /^\(d\) workflow w1, slot .*: missed although/);
    const slack = judge({ downtime: stalled, passSlackMs: 20_000 });
    assert.deepEqual(slack.violations, []);
    only(slack.explained, /^workflow w1, slot .*: no live scheduler leader from .*\(orloj recorded itself down, no leader pass, in \d+\/\d+ observations\)/);
    // A recorded gap elsewhere explains nothing; nor does the slack where a leader was live and passing.
    only(judge({ downtime: [{ from: BUILT + 2 * MINUTE, to: BUILT + 3 * MINUTE }], passSlackMs: 20_000 }).violations, /^\(d\) workflow w1, slot .*: missed although/);
  });

  it('reports overlapping runs of one workflow (c)', () => {
    const r = run((jobs) => jobs.map((j) => (j.id === 'w2-j6' ? { ...j, completed_at: BUILT + 7 * MINUTE + 1_000, updated_at: BUILT + 7 * MINUTE + 1_000 } : j)));
    only(r.violations, /^\(c\) workflow w2: job w2-j6 .* overlaps job w2-j7/);
  });

  it('reports a job that never ended (b) and one that took more attempts than allowed (e)', () => {
    const open = run((jobs) => jobs.map((j) => (j.id === 'w1-j10' ? { ...j, status: 'RUNNING', completed_at: null } : j)));
    assert.ok(open.violations.some((v) => /^\(b\) job w1-j10 .* is still RUNNING/.test(v)), open.violations.join('\n'));
    const retried = run((jobs) => jobs.map((j) => (j.id === 'w2-j2' ? { ...j, attempts: 4 } : j)));
    only(retried.violations, /^\(e\) job w2-j2 took 4 attempts \(at most 3\)/);
  });

  it('reports an older slot run after a newer one (a), and a job of a workflow it does not know', () => {
    const r = run((jobs) => jobs.map((j) => (j.id === 'w1-j2' ? { ...j, created_at: BUILT + 3 * MINUTE + 50 } : j)));
    assert.ok(r.violations.some((v) => /^\(a\) workflow w1: job w1-j3 .* was created after job w1-j2/.test(v) || /^\(a\) job w1-j2 .*outside its slot's window/.test(v)), r.violations.join('\n'));
    const stray = run((jobs) => [...jobs, job('w9', 1)]);
    only(stray.violations, /^job w9-j1 belongs to an unknown workflow w9/);
  });

  describe('cron workflows and run policies', () => {
    /** `*\/7` in Kolkata (+5:30): UTC minutes 30, 37, 44, 51, 58, then 05 after a 7-minute and a 4-minute gap (56 → 00 local) — not build + k × interval. */
    const cronWorkflow = (over: Partial<WorkflowRow> = {}): WorkflowRow => ({ ...workflow('c1'), cron: '*/7 * * * *', timezone: 'Asia/Kolkata', interval_minutes: 7, ...over });
    const slotsOf = (w: WorkflowRow, until: number) =>
      scheduleOf({ buildCompletedAt: BUILT, intervalMinutes: w.interval_minutes, cron: w.cron, timeZone: w.timezone, jitterOffsetMs: w.jitter_offset_ms, firstRun: w.first_run })!.slotsIn(BUILT - 1, until, 1000);
    const END = BUILT + 90 * MINUTE;
    const judge = (w: WorkflowRow, jobs: JobRow[], leader = samples(undefined, 90)) =>
      verify({ workflows: [w], jobs, killEnd: END, tickMs: TICK, samples: leader, maxAttempts: 3 });

    it('checks a cron workflow against its own slots in its zone, with the jitter and the first run', () => {
      for (const over of [{}, { jitter_seconds: 40, jitter_offset_ms: jitterOffsetMs('c1', 40) }, { first_run: 'now' as const }]) {
        const w = cronWorkflow(over);
        const slots = slotsOf(w, END);
        assert.ok(slots.some((s, i) => i > 0 && s - slots[i - 1]! === 4 * MINUTE), 'the uneven gap is there');
        const r = judge(w, slots.map((s) => jobAt('c1', s)));
        assert.deepEqual(r.violations, [], JSON.stringify(over));
        const later = slotsOf(w, END + HOUR);
        assert.equal(r.checkedSlots, later.filter((_, i) => (later[i + 1] ?? Infinity) <= END).length, 'those whose window closed by the end');
      }
      assert.equal(slotsOf(cronWorkflow({ first_run: 'now' }), END)[0], BUILT, 'first run now: a slot at the build');
    });

    it('reports a cron workflow\'s job on the interval grid but off its cron slots (a), and its missed slot (d)', () => {
      const w = cronWorkflow();
      const slots = slotsOf(w, END);
      const off = judge(w, [...slots.map((s) => jobAt('c1', s)), jobAt('c1', BUILT + 7 * MINUTE, { id: 'grid' })]);
      assert.ok(off.violations.some((v) => /^\(a\) job grid of workflow c1 has slot .*off its schedule \(cron "\*\/7 \* \* \* \*" in Asia\/Kolkata\)/.test(v)), off.violations.join('\n'));
      const missed = judge(w, slots.filter((_, i) => i !== 3).map((s) => jobAt('c1', s)));
      only(missed.violations, new RegExp(`^\\(d\\) workflow c1, slot ${iso(slots[3]!).replace(/[.]/g, '\\.')}: missed although`));
    });

    it('explains slots that came during a run only for overlap_policy skip', () => {
      // Slot 4's job runs until 30 s into slot 5's window; slot 5 gets no job.
      const overrun = (jobs: JobRow[]) =>
        jobs.filter((j) => j.id !== 'w1-j5').map((j) => (j.id === 'w1-j4' ? { ...j, completed_at: BUILT + 5 * MINUTE + 30_000, updated_at: BUILT + 5 * MINUTE + 30_000 } : j));
      const jobs = overrun(Array.from({ length: 10 }, (_, i) => job('w1', i + 1)));
      const judgeW = (w: WorkflowRow) => verify({ workflows: [w], jobs, killEnd: BUILT + 11 * MINUTE, tickMs: TICK, samples: samples(), maxAttempts: 3 });
      only(judgeW(workflow('w1')).violations, /^\(d\) workflow w1, slot .*: missed although the workflow was free/);
      const skip = judgeW({ ...workflow('w1'), overlap_policy: 'skip' });
      assert.deepEqual(skip.violations, []);
      only(skip.explained, /overlap_policy skip runs no slot that came during a run/);
    });

    it('explains a slot passed over after a leaderless stretch longer than the grace only for catch_up_policy none', () => {
      // Every 5 minutes; no leader from slot 2 (10:00) until 80 s after it, well inside the slot's window.
      const w = { ...workflow('w5'), interval_minutes: 5 };
      const jobs = [1, 3, 4, 5].map((k) => jobAt('w5', BUILT + k * 5 * MINUTE));
      const leader = samples((at) => at >= BUILT + 10 * MINUTE && at < BUILT + 10 * MINUTE + 80_000, 30);
      const judgeW = (row: WorkflowRow) => verify({ workflows: [row], jobs, killEnd: BUILT + 26 * MINUTE, tickMs: TICK, samples: leader, maxAttempts: 3 });
      only(judgeW(w).violations, /^\(d\) workflow w5, slot .*: missed although/);
      const none = judgeW({ ...w, catch_up_policy: 'none' });
      assert.deepEqual(none.violations, []);
      only(none.explained, /no live scheduler leader .*\(catch_up_policy none\)/);
    });
  });
});
