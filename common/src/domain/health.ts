import type { CheckResult } from './check.js';
import type { JobStatus } from './job.js';
import type { WorkflowSummary } from './workflow.js';

/**
 * A workflow's state as a monitoring user reads it (docs/api.md, "Checks and
 * health"; dashboard/README.md explains each to people). The first rule that
 * holds decides:
 *
 * - `paused`: paused by its owner (`paused_at`, ADR 0015), or terminated (by
 *   its owner, or automatically after too many failures in a row:
 *   `autoTerminated`).
 * - `building`: its build is queued or running; no run can start yet.
 * - `down`: its build failed or was canceled, or it is down by its alert
 *   policy (`alertDown`: `alert_after_failures` failed runs in a row, until
 *   `recover_after_successes` completed ones), the state the bell announced.
 * - `degraded`: its latest finished run FAILED, but it is not down by its policy (yet).
 * - `late`: no run is going on and a run is overdue: its next slot, or a job
 *   waiting for a runner, is more than {@link LATE_AFTER_MS} in the past.
 * - `up`: its latest finished run COMPLETED.
 * - `pending`: built, waiting for its first run.
 *
 * CANCELED runs say nothing about the target and are passed over when the
 * latest run is looked for.
 */
export const HEALTH_STATES = ['up', 'down', 'late', 'paused', 'building', 'pending', 'degraded'] as const;
export type HealthState = (typeof HEALTH_STATES)[number];

/** How far past its slot a run that has not started makes the workflow `late`. */
export const LATE_AFTER_MS = 60_000;
/** Runs shown in a workflow's strip of recent runs. */
export const RECENT_RUNS = 20;
/** The window uptime is counted over. */
export const UPTIME_WINDOW_MS = 24 * 3_600_000;

/** A finished run as the strip shows it. */
export interface RunSummary {
  jobId: string;
  status: Extract<JobStatus, 'COMPLETED' | 'FAILED' | 'CANCELED'>;
  scheduledAt: number;
  completedAt: number | null;
  check: CheckResult | null;
}

/** A job not yet finished. */
export interface OpenRun {
  jobId: string;
  status: Extract<JobStatus, 'PENDING' | 'QUEUED' | 'RUNNING'>;
  scheduledAt: number;
}

export interface RunCounts {
  completed: number;
  failed: number;
  canceled: number;
}

/** What the store knows about a workflow's runs, read for a page of workflows at once. */
export interface RunFacts {
  /** Finished runs, newest first, at most {@link RECENT_RUNS}. */
  recent: RunSummary[];
  /** Runs finished within the uptime window. */
  window: RunCounts;
  open: OpenRun[];
  nextDueAt: number | null;
  /** Due slots that never got a job of their own, and when the last one passed (absent: none). */
  skipped?: { count: number; lastAt: number | null };
}

export interface WorkflowHealth {
  state: HealthState;
  /** Terminated by the failure limit, not by its owner; stays so until the workflow is updated (PUT) or deleted. */
  autoTerminated: boolean;
  /** The run going on now, if any. */
  running: (OpenRun & { status: 'RUNNING' }) | null;
  lastRun: RunSummary | null;
  /** When the next run is due; null when none will be (terminated, not built). */
  nextRunAt: number | null;
  recentRuns: RunSummary[];
  uptime: { windowMs: number } & RunCounts;
  /** Missed runs: due slots that never got a job of their own since the workflow was created, and when the last one passed. */
  skippedSlots: number;
  lastSlotSkippedAt: number | null;
}

type HealthInput = Pick<
  WorkflowSummary,
  'buildStatus' | 'terminatedAt' | 'consecutiveJobFailuresCount' | 'maxConsecutiveJobFailuresAllowed' | 'alertDown'
> & { pausedAt?: number | null };

export function workflowHealth(w: HealthInput, facts: RunFacts, now: number): WorkflowHealth {
  const terminated = w.terminatedAt !== null;
  const running = facts.open.find((r): r is OpenRun & { status: 'RUNNING' } => r.status === 'RUNNING') ?? null;
  const waiting = facts.open.filter((r) => r.status !== 'RUNNING').map((r) => r.scheduledAt);
  const lastRun = facts.recent.find((r) => r.status !== 'CANCELED') ?? null;
  const built = w.buildStatus === 'COMPLETED';
  const paused = w.pausedAt != null;
  // A paused workflow's next slot is not due (a manual run waiting still is).
  const candidates = [...waiting, ...(facts.nextDueAt === null || paused ? [] : [facts.nextDueAt])];
  const nextRunAt = terminated || !built || candidates.length === 0 ? null : Math.min(...candidates);
  const late = running === null && nextRunAt !== null && nextRunAt < now - LATE_AFTER_MS;

  let state: HealthState;
  if (terminated || paused) state = 'paused';
  else if (w.buildStatus === 'QUEUED' || w.buildStatus === 'STARTED') state = 'building';
  else if (!built || w.alertDown) state = 'down';
  else if (lastRun?.status === 'FAILED') state = 'degraded';
  else if (late) state = 'late';
  else if (lastRun?.status === 'COMPLETED') state = 'up';
  else state = 'pending';

  return {
    state,
    autoTerminated: terminated && w.consecutiveJobFailuresCount >= w.maxConsecutiveJobFailuresAllowed,
    running,
    lastRun,
    nextRunAt,
    recentRuns: facts.recent,
    uptime: { windowMs: UPTIME_WINDOW_MS, ...facts.window },
    skippedSlots: facts.skipped?.count ?? 0,
    lastSlotSkippedAt: facts.skipped?.lastAt ?? null,
  };
}
