// The guarantees of docs/chaos.md, checked from the database once a run has
// settled: verify() runs one named check per guarantee over each workflow's
// jobs, and tells the misses the most-recent-missed-slot rule, the workflow's
// run policy or a leaderless stretch explains from real violations;
// summarizeJobs() counts for the report. Slots are the workflow's own schedule
// (interval or cron in a zone, jitter, first run: common/src/domain/schedule.ts).
import { CATCH_UP_GRACE_MS, isDown, scheduleOf, TERMINAL_JOB_STATUSES, type Downtime, type Schedule } from '@orloj/common/domain';
import type { JobsTable, Selectable, WorkflowsTable } from '@orloj/common/store';
import { iso } from './time.js';

export type JobRow = Selectable<JobsTable>;
export type WorkflowRow = Selectable<WorkflowsTable>;

/** One observation of the leader lease (HarnessRun records one every 100 ms, real). */
export interface LeaderSample {
  /** clock time of the observation */
  at: number;
  holder: string | undefined;
  token: number | undefined;
  /** the lease is unexpired and its holder's process is alive */
  live: boolean;
  /** the harness could not read the lease: the database was down (scripts/restart.ts records these; chaos.ts does not) */
  unreachable?: boolean;
  /** set by verify(): the lease was live, but orloj's uptime record says no leader pass ran then */
  recordedDown?: boolean;
}

export interface Verification {
  violations: string[];
  explained: string[];
  checkedSlots: number;
}

/** What the checks found: violations and explained skips, each list capped at 200 lines (and a '… (more)'). */
class Findings {
  readonly violations: string[] = [];
  readonly explained: string[] = [];

  violation(message: string): void {
    Findings.add(this.violations, message);
  }

  explain(message: string): void {
    Findings.add(this.explained, message);
  }

  private static add(list: string[], message: string): void {
    if (list.length < 200) list.push(message);
    else if (list.length === 200) list.push('… (more)');
  }
}

/** One built workflow and its jobs, as the checks read them. */
interface Checked {
  w: WorkflowRow;
  /** every job of the workflow */
  own: JobRow[];
  /** its AUTOMATIC jobs by slot */
  automatic: JobRow[];
  /** the AUTOMATIC jobs of each slot */
  perSlot: Map<number, JobRow[]>;
  /** its slots, as the scheduler computes them */
  schedule: Schedule;
}

/**
 * The checks of docs/chaos.md: (a) one job per slot, (b) all terminal, (c)
 * no overlap, (d) no misses up to one interval before `killEnd` beyond what
 * the most-recent-missed-slot rule explains, (e) attempts ≤ maxAttempts.
 */
export function verify(input: {
  workflows: WorkflowRow[];
  jobs: JobRow[];
  killEnd: number;
  tickMs: number;
  samples: LeaderSample[];
  maxAttempts: number;
  /**
   * The times orloj recorded itself down (its uptime record: no leader pass for
   * longer than a handover), clock time. A sample inside one is not a live
   * leader, whatever the lease said: a leader that holds its lease but makes no
   * pass (a process the machine starved) is down by orloj's own account, and the
   * slot fates say so.
   */
  downtime?: readonly Downtime[];
  /**
   * How long (clock) a leader has for its first pass once it is live, or once
   * the previous job ended: two ticks by default. A harness on an accelerated
   * clock adds the real time a pass takes on a busy machine, times its speed.
   */
  passSlackMs?: number;
}): Verification {
  const { workflows, jobs, killEnd, tickMs, maxAttempts } = input;
  const downtime = input.downtime ?? [];
  const samples = input.samples.map((s) => (s.live && isDown(downtime, s.at) ? { ...s, live: false, recordedDown: true } : s));
  const passSlackMs = input.passSlackMs ?? 2 * tickMs;
  const found = new Findings();
  const byWorkflow = jobsByWorkflow(workflows, jobs, found);
  let checkedSlots = 0;
  for (const w of workflows) {
    const own = byWorkflow.get(w.id)!;
    if (w.build_completed_at === null) {
      found.violation(`(d) workflow ${w.id} was never built (build_status ${w.build_status})`);
      continue;
    }
    const automatic = own.filter((j) => j.trigger === 'AUTOMATIC').sort((a, b) => a.slot_at - b.slot_at);
    const perSlot = new Map<number, JobRow[]>();
    for (const j of automatic) perSlot.set(j.slot_at, [...(perSlot.get(j.slot_at) ?? []), j]);
    const c: Checked = { w, own, automatic, perSlot, schedule: scheduleOfRow(w, w.build_completed_at) };
    checkOneJobPerSlot(c, found);
    checkCreationOrder(c, found);
    checkEndedWithinAttempts(c, maxAttempts, found);
    checkNoOverlap(c, found);
    checkedSlots += checkNoMisses(c, { killEnd, passSlackMs, samples }, found);
  }
  return { violations: found.violations, explained: found.explained, checkedSlots };
}

/** The schedule of a workflow row, built at `builtAt`. */
function scheduleOfRow(w: WorkflowRow, builtAt: number): Schedule {
  return scheduleOf({
    buildCompletedAt: builtAt,
    intervalMinutes: w.interval_minutes,
    cron: w.cron,
    timeZone: w.timezone,
    jitterOffsetMs: w.jitter_offset_ms,
    firstRun: w.first_run,
  })!;
}

/** Every seeded workflow with its jobs; a job of another workflow is a violation. */
function jobsByWorkflow(workflows: readonly WorkflowRow[], jobs: readonly JobRow[], found: Findings): Map<string, JobRow[]> {
  const byWorkflow = new Map<string, JobRow[]>();
  for (const w of workflows) byWorkflow.set(w.id, []);
  for (const j of jobs) {
    const list = byWorkflow.get(j.workflow_id);
    if (list) list.push(j);
    else found.violation(`job ${j.id} belongs to an unknown workflow ${j.workflow_id}`);
  }
  return byWorkflow;
}

/**
 * (a) one job per (workflow, slot), and the stronger property: every slot is
 * one of the workflow's schedule, and each job was created while its slot was
 * the most recent one (slot ≤ created_at < the next slot).
 */
function checkOneJobPerSlot({ w, perSlot, schedule }: Checked, found: Findings): void {
  for (const [slot, list] of perSlot) {
    if (list.length > 1) found.violation(`(a) workflow ${w.id} has ${list.length} jobs for slot ${iso(slot)}: ${list.map((j) => j.id).join(', ')}`);
    if (!schedule.isSlot(slot)) found.violation(`(a) job ${list[0]!.id} of workflow ${w.id} has slot ${iso(slot)}, off its schedule (${scheduleName(w)})`);
    for (const j of list) {
      if (j.created_at < slot || j.created_at >= schedule.firstSlotAfter(slot)) {
        found.violation(`(a) job ${j.id} for slot ${iso(slot)} was created at ${iso(j.created_at)}, outside its slot's window`);
      }
    }
  }
}

/** (a) slots only move forward in creation order: no two jobs served one window, and no older slot ran after a newer one. */
function checkCreationOrder({ w, automatic }: Checked, found: Findings): void {
  const byCreation = [...automatic].sort((a, b) => a.created_at - b.created_at || a.slot_at - b.slot_at);
  for (let i = 1; i < byCreation.length; i++) {
    const [a, b] = [byCreation[i - 1]!, byCreation[i]!];
    if (b.slot_at <= a.slot_at) {
      found.violation(`(a) workflow ${w.id}: job ${b.id} for slot ${iso(b.slot_at)} was created after job ${a.id} for the later or same slot ${iso(a.slot_at)}`);
    }
  }
}

/** (b) every job ended, (e) within maxAttempts attempts. */
function checkEndedWithinAttempts({ w, own }: Checked, maxAttempts: number, found: Findings): void {
  for (const j of own) {
    if (!TERMINAL_JOB_STATUSES.includes(j.status)) found.violation(`(b) job ${j.id} (workflow ${w.id}, slot ${iso(j.slot_at)}) is still ${j.status}`);
    if (j.attempts > maxAttempts) found.violation(`(e) job ${j.id} took ${j.attempts} attempts (at most ${maxAttempts})`);
  }
}

/** (c) runs of one workflow never overlap. */
function checkNoOverlap({ w, own }: Checked, found: Findings): void {
  const runs = own.filter((j) => j.started_at !== null).sort((a, b) => a.started_at! - b.started_at!);
  for (let i = 1; i < runs.length; i++) {
    const prev = runs[i - 1]!;
    const next = runs[i]!;
    if (prev.completed_at === null || prev.completed_at > next.started_at!) {
      found.violation(
        `(c) workflow ${w.id}: job ${prev.id} [${iso(prev.started_at!)}, ${prev.completed_at === null ? 'open' : iso(prev.completed_at)}] overlaps job ${next.id} started ${iso(next.started_at!)}`,
      );
    }
  }
}

const scheduleName = (w: WorkflowRow) => (w.cron === null ? `build + k×${w.interval_minutes} min` : `cron "${w.cron}" in ${w.timezone}`) + (w.jitter_seconds > 0 ? `, jitter ≤ ${w.jitter_seconds} s` : '');

/**
 * (d) no misses: every slot whose window (up to the next slot) closed by the
 * end of the disruption (`killEnd`) has a job, unless the most-recent-missed-slot
 * rule, the run policy or a stretch without a live leader explains it. Returns
 * the slots that had one.
 */
function checkNoMisses(c: Checked, run: { killEnd: number; passSlackMs: number; samples: readonly LeaderSample[] }, found: Findings): number {
  let checkedSlots = 0;
  const { schedule } = c;
  for (let slot = schedule.firstSlotAfter(c.w.build_completed_at! - 1); schedule.firstSlotAfter(slot) <= run.killEnd; slot = schedule.firstSlotAfter(slot)) {
    if ((c.perSlot.get(slot)?.length ?? 0) >= 1) checkedSlots += 1;
    else judgeMiss(c, slot, run, found);
  }
  return checkedSlots;
}

/**
 * A slot without a job: explained, or a violation. Overlap `run_after` runs
 * only the latest slot that came during a run (the earlier ones' windows
 * closed before it ended); `skip` runs none of them. Catch-up `latest` runs a
 * slot while it is the most recent one; `none` only within the grace.
 */
function judgeMiss({ w, automatic, schedule }: Checked, slot: number, run: { passSlackMs: number; samples: readonly LeaderSample[] }, found: Findings): void {
  const windowEnd = schedule.firstSlotAfter(slot);
  const prev = [...automatic].reverse().find((j) => j.slot_at < slot);
  const next = automatic.find((j) => j.slot_at > slot);
  // The scheduler-side time the previous job ended: its last transition.
  const prevEnd = prev ? (TERMINAL_JOB_STATUSES.includes(prev.status) ? prev.updated_at : Number.POSITIVE_INFINITY) : undefined;
  const where = `workflow ${w.id}, slot ${iso(slot)}`;
  const ended = (at: string) => `ended ${Number.isFinite(prevEnd) ? iso(prevEnd!) : 'never'}, at or after ${at}`;
  const previous = prev && `the previous job (slot ${iso(prev.slot_at)}, ${prev.attempts} attempt(s), ${prev.status})`;
  // An overrun explains the slot whether or not a later job came: one that ended after the
  // schedules were frozen (the end of the run) has none.
  if (prev && prevEnd! >= windowEnd - run.passSlackMs) {
    const after = next ? `the next job ran for slot ${iso(next.slot_at)}` : 'no later job (it ended after the schedules were frozen)';
    found.explain(`${where}: ${previous} ${ended(`this slot's window closed (${iso(windowEnd)})`)}; ${after}`);
    return;
  }
  if (!next) {
    found.violation(`(d) ${where}: no job for this slot or any later one`);
    return;
  }
  if (prev && w.overlap_policy === 'skip' && prevEnd! >= slot) {
    found.explain(`${where}: ${previous} ${ended('the slot')}, and overlap_policy skip runs no slot that came during a run`);
    return;
  }
  const from = Math.max(slot, prevEnd ?? slot);
  // Catch-up `none`: a leader that comes back after the grace passes over the slot.
  const until = w.catch_up_policy === 'none' ? Math.min(windowEnd, from + CATCH_UP_GRACE_MS) : windowEnd;
  const seen = run.samples.filter((s) => s.at >= from && s.at < until);
  // A leader first seen live in the window's last moments (the pass slack) cannot be held to a
  // pass before it closes (the same slack as for the previous job's end above): a restarted leader's first pass.
  if (seen.length > 0 && seen.every((s) => !s.live || s.at >= until - run.passSlackMs)) {
    const down = seen.filter((s) => s.unreachable).length;
    const recorded = seen.filter((s) => s.recordedDown).length;
    found.explain(
      `${where}: no live scheduler leader from ${iso(from)} to ${iso(until)}${down > 0 ? ` (the database was unreachable in ${down}/${seen.length} observations)` : ''}` +
        `${recorded > 0 ? ` (orloj recorded itself down, no leader pass, in ${recorded}/${seen.length} observations)` : ''}${until < windowEnd ? ' (catch_up_policy none)' : ''}; the next job ran for slot ${iso(next.slot_at)}`,
    );
    return;
  }
  found.violation(
    `(d) ${where}: missed although the workflow was free from ${iso(from)} and a leader was live in ${seen.filter((s) => s.live).length}/${seen.length} observations before ${iso(until)}; ` +
      `the next job (slot ${iso(next.slot_at)}) was created ${iso(next.created_at)}`,
  );
}

/** Counts for the summary: jobs by status and reason, retries. */
export function summarizeJobs(jobs: readonly JobRow[]): { byStatus: string; byReason: string; retried: number; extraAttempts: number; maxSeen: number } {
  const byStatus = new Map<string, number>();
  const byReason = new Map<string, number>();
  let retried = 0;
  let extraAttempts = 0;
  let maxSeen = 0;
  for (const j of jobs) {
    byStatus.set(j.status, (byStatus.get(j.status) ?? 0) + 1);
    if (j.status_reason_code) byReason.set(j.status_reason_code, (byReason.get(j.status_reason_code) ?? 0) + 1);
    if (j.attempts > 1) {
      retried += 1;
      extraAttempts += j.attempts - 1;
    }
    maxSeen = Math.max(maxSeen, j.attempts);
  }
  const fmtMap = (m: Map<string, number>) => [...m].sort().map(([k, v]) => `${k} ${v}`).join(', ') || 'none';
  return { byStatus: fmtMap(byStatus), byReason: fmtMap(byReason), retried, extraAttempts, maxSeen };
}
