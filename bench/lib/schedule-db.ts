import { startServer, type ServerProcess } from './child.js';
import type { LagSummary, Summary } from './stats.js';

/**
 * The parent's handle on bench/servers/schedule-db.ts: a child process with
 * direct access to the benchmark's SQLite file (seeding, schedule shift, the
 * jobs table read back afterwards).
 */

export interface JobTimes {
  slot_at: number;
  created_at: number;
  queued_at: number | null;
  started_at: number | null;
  completed_at: number | null;
  updated_at: number;
  status: string;
}

/** Per step between the due slot and COMPLETED in the store (ms). */
export type Phases = Record<string, Summary>;

export interface WindowAnalysis {
  workflows: number;
  dueSlots: number;
  jobsForDueSlots: number;
  /** Due slots with no job while the workflow has a job for a later slot. */
  skipped: number;
  /** Due slots with no job at all when orloj stopped. */
  noJob: number;
  /** Jobs of the due slots by status when orloj stopped. */
  statuses: Record<string, number>;
  lag: LagSummary;
  phases: Phases;
  /** Jobs whose completed_at falls in the window. */
  completedInWindow: number;
  allJobs: Record<string, number>;
  /** Every FAILED job in the table, by "CODE: message". */
  failures: Record<string, number>;
}

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

export interface ScheduleDb {
  readonly pid: number;
  engine(): Promise<string>;
  seedHeartbeats(arg: { count: number; intervalMinutes: number; spreadMs: number; endpoint: string }): Promise<{ ms: number }>;
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
    shiftSchedule: (firstDueAt) => child.call('shiftSchedule', { firstDueAt }),
    slotProgress: (slotAt) => child.call('slotProgress', { slotAt }),
    analyzeWindow: (arg) => child.call('analyzeWindow', arg),
    analyzeSlot: (arg) => child.call('analyzeSlot', arg),
    jobRows: (ids) => child.call('jobRows', { ids }),
    stop: () => child.stop(),
  };
}
