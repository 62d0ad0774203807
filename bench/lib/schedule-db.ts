import { startServer, type ServerProcess } from './child.js';
import type { DistributedRun } from './scheduling-report.js';
import type { LagSummary } from './stats.js';
import type { Phases, WindowAnalysis } from './window-analysis.js';

/**
 * The parent's handle on bench/servers/schedule-db.ts: a child process with
 * direct access to the benchmark's SQLite file (seeding, schedule shift, the
 * jobs table read back afterwards).
 */

export type { JobTimes, Phases, WindowAnalysis } from './window-analysis.js';

export interface SlotAnalysis {
  jobs: number;
  statuses: Record<string, number>;
  /** Milliseconds after the slot when the last job was created, queued, started, finished, COMPLETED in the store. */
  lastCreated: number;
  lastQueued: number;
  lastStarted: number;
  lastFinished: number;
  lastCompleted: number;
  lag: LagSummary;
  phases: Phases;
  /** FAILED jobs of the slot, by "CODE: message". */
  failures: Record<string, number>;
}

export interface JobRow {
  id: string;
  status: string;
  attempts: number;
  scheduled_at: number;
  created_at: number;
  queued_at: number | null;
  dispatched_at: number | null;
  started_at: number | null;
  completed_at: number | null;
  updated_at: number;
}

/** BENCH_SCHED_ORDER: see ScheduleDb.seedHeartbeats. */
export type DueOrder = 'random' | 'ids';

export interface ScheduleDb {
  readonly pid: number;
  engine(): Promise<string>;
  /** `cron`: cron workflows on that expression, in the zones in turn, spread by the jitter (interval and spread do not apply). */
  seedHeartbeats(arg: {
    count: number;
    intervalMinutes: number;
    spreadMs: number;
    endpoint: string;
    cron?: { expression: string; zones: readonly string[]; jitterSeconds: number };
    /**
     * Interval workflows' places in the spread: `random` (a fixed shuffle: the order
     * in which they fall due has nothing to do with the order of their ids, as for
     * workflows a user created over days) or `ids` (due in the order they were
     * created, ids ascending: every index keyed by workflow is then walked in order).
     */
    dueOrder?: DueOrder;
    /** The seeded user's stored password hash (default: one nobody can sign in with). */
    passwordHash?: string;
  }): Promise<{ ms: number; email: string }>;
  /** A year of history for the seeded workflows (lib/seed-history.ts; PostgreSQL). */
  seedHistory(arg: { jobs: number; days: number }): Promise<NonNullable<DistributedRun['history']>>;
  /** The newest COMPLETED job, if any. */
  someFinishedJob(): Promise<{ id: string; workflow_id: string } | undefined>;
  shiftSchedule(firstDueAt: number): Promise<{ ms: number }>;
  slotProgress(slotAt: number): Promise<Record<string, number>>;
  analyzeWindow(arg: { windowStart: number; windowEnd: number; stopAt: number }): Promise<WindowAnalysis>;
  analyzeSlot(arg: { slotAt: number; stopAt: number }): Promise<SlotAnalysis>;
  jobRows(ids: string[]): Promise<JobRow[]>;
  stop(): Promise<void>;
}

export async function startScheduleDb(databaseUrl: string): Promise<ScheduleDb> {
  const child: ServerProcess = await startServer('schedule-db', { DATABASE_URL: databaseUrl, LOG_LEVEL: 'warn' });
  return {
    pid: child.pid,
    engine: () => child.call<{ engine: string }>('info').then((i) => i.engine),
    seedHeartbeats: (arg) => child.call('seedHeartbeats', arg),
    seedHistory: (arg) => child.call('seedHistory', arg),
    someFinishedJob: () => child.call('someFinishedJob', {}),
    shiftSchedule: (firstDueAt) => child.call('shiftSchedule', { firstDueAt }),
    slotProgress: (slotAt) => child.call('slotProgress', { slotAt }),
    analyzeWindow: (arg) => child.call('analyzeWindow', arg),
    analyzeSlot: (arg) => child.call('analyzeSlot', arg),
    jobRows: (ids) => child.call('jobRows', { ids }),
    stop: () => child.stop(),
  };
}
