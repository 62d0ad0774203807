/**
 * The judge of the chaos, restart and rolling-upgrade runs (scripts/harness/verify.ts)
 * fed recorded runs: a clean one it must pass, and the same run with one violation of
 * each kind planted, each of which it must report under its guarantee's letter
 * (docs/chaos.md), and the misses it may explain, which it must not report.
 */
import assert from 'node:assert/strict';
import { verify, type JobRow, type LeaderSample, type WorkflowRow } from '../../scripts/harness/verify.js';

const MINUTE = 60_000;
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
  paused_at: null,
  attention: 3,
});

/** The job of slot k of workflow `w`: created 100 ms into its slot, ran 5 s. */
const job = (w: string, k: number, over: Partial<JobRow> = {}): JobRow => {
  const slot = BUILT + k * MINUTE;
  return {
    id: `${w}-j${k}`,
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

/** A leader sample every 10 s of the run, live unless `down` says otherwise. */
const samples = (down: (at: number) => boolean = () => false): LeaderSample[] =>
  Array.from({ length: 12 * 6 }, (_, i) => BUILT + i * 10_000).map((at) => ({ at, holder: down(at) ? undefined : 's1', token: 1, live: !down(at) }));

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
    assert.ok(off.violations.some((v) => /^\(a\) job w2-j3 of workflow w2 has slot .*off the grid/.test(v)), off.violations.join('\n'));
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
});
