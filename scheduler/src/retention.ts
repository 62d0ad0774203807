import { systemClock, type Clock } from '@orloj/common/core';
import { SETTINGS } from '@orloj/common/config';
import type { Logger } from '@orloj/common/logging';
import type { EndedJobPosition, Store } from '@orloj/common/store';

export interface RetentionConfig {
  /** Ended jobs older than this go, with their log lines; undefined: kept forever. */
  jobsMs: number | undefined;
  /** Log lines of jobs that ended longer ago than this go; undefined: kept as long as their job. */
  jobLogsMs: number | undefined;
  notificationsMs: number | undefined;
  /** The newest jobs of every workflow (and their logs), kept whatever their age. */
  keepJobs: number;
  /** Time between sweeps (clock time). */
  intervalMs: number;
  /** Rows per statement. */
  batchSize: number;
  /** Real-time pause between two statements, so other writers get the database in between. */
  pauseMs: number;
}

/** How often a replica looks whether a sweep is due (and whether it leads). */
const CHECK_EVERY_MS = 60_000;
/** The settings' defaults (RETENTION_*), and a 20 ms pause between two delete statements. */
export const DEFAULT_RETENTION_CONFIG: RetentionConfig = {
  jobsMs: SETTINGS.RETENTION_JOBS.default,
  jobLogsMs: SETTINGS.RETENTION_JOB_LOGS.default,
  notificationsMs: SETTINGS.RETENTION_NOTIFICATIONS.default,
  keepJobs: SETTINGS.RETENTION_KEEP_JOBS.default,
  intervalMs: SETTINGS.RETENTION_INTERVAL.default,
  batchSize: SETTINGS.RETENTION_BATCH_SIZE.default,
  pauseMs: 20,
};

export interface SweepResult {
  jobs: number;
  logLines: number;
  notifications: number;
  /** One-off maintenance windows and snoozes that ended before RETENTION_JOBS. */
  windows: number;
  /** False when the sweep stopped early (leadership lost, or stopping). */
  complete: boolean;
}

export interface RetentionDeps {
  store: Store;
  clock: Clock;
  logger: Logger;
  /** Whether this process may sweep now: the scheduler leader does, so one process at a time sweeps. */
  mayRun: () => boolean;
  config?: Partial<RetentionConfig>;
  /** How often the replica checks whether a sweep is due (real time); the first sweep comes this long after start. */
  checkEveryMs?: number;
}

/**
 * Prunes old rows (docs/operations.md, "Retention"): log lines of jobs that
 * ended before RETENTION_JOB_LOGS, jobs that ended before RETENTION_JOBS,
 * notifications created before RETENTION_NOTIFICATIONS. Runs in the
 * scheduler role and sweeps only while its replica leads, so exactly one
 * process sweeps in either topology (two overlapping for a moment after a
 * lease change would only delete the same rows). Every statement touches at
 * most `batchSize` rows and a short pause follows it, so a sweep over
 * millions of rows is many short transactions, never one long lock.
 */
export class RetentionSweeper {
  readonly config: RetentionConfig;
  private readonly abort = new AbortController();
  private loop: Promise<void> | undefined;

  constructor(private readonly deps: RetentionDeps) {
    this.config = { ...DEFAULT_RETENTION_CONFIG, ...deps.config };
  }

  start(): Promise<void> {
    const { jobsMs, jobLogsMs, notificationsMs } = this.config;
    if (jobsMs !== undefined || jobLogsMs !== undefined || notificationsMs !== undefined) this.loop ??= this.run();
    return Promise.resolve();
  }

  async stop(): Promise<void> {
    this.abort.abort();
    await this.loop;
  }

  private async run(): Promise<void> {
    const { clock, logger } = this.deps;
    const { signal } = this.abort;
    let last = -Infinity;
    while (!signal.aborted) {
      await systemClock.sleep(this.deps.checkEveryMs ?? CHECK_EVERY_MS, signal);
      if (signal.aborted || !this.deps.mayRun() || clock.now() - last < this.config.intervalMs) continue;
      last = clock.now();
      try {
        const result = await this.sweep();
        if (result.jobs || result.logLines || result.notifications || result.windows) logger.info({ retention: result }, 'retention sweep pruned old rows');
      } catch (err) {
        logger.warn({ err }, 'retention sweep failed; the next sweep goes on');
      }
    }
  }

  /** One sweep over everything that is due; stops early when leadership is lost. */
  async sweep(): Promise<SweepResult> {
    const now = this.deps.clock.now();
    const { jobsMs, jobLogsMs, notificationsMs } = this.config;
    const result: SweepResult = { jobs: 0, logLines: 0, notifications: 0, windows: 0, complete: true };
    // Log lines first: the jobs step deletes the lines of the jobs it prunes anyway.
    if (jobLogsMs !== undefined && (jobsMs === undefined || jobLogsMs < jobsMs)) {
      if (!(await this.walkEndedJobs(now - jobLogsMs, result, false))) return { ...result, complete: false };
    }
    if (jobsMs !== undefined && !(await this.walkEndedJobs(now - jobsMs, result, true))) return { ...result, complete: false };
    const { retention, maintenanceWindows } = this.deps.store;
    if (notificationsMs !== undefined) {
      const before = now - notificationsMs;
      if (!(await this.inBatches((limit) => retention.deleteNotifications(before, limit), (n) => (result.notifications += n)))) return { ...result, complete: false };
    }
    // An ended one-off window goes with the jobs whose skipped slots it explained.
    if (jobsMs !== undefined) {
      const before = now - jobsMs;
      if (!(await this.inBatches((limit) => maintenanceWindows.deleteEndedBefore(before, limit), (n) => (result.windows += n)))) return { ...result, complete: false };
    }
    return result;
  }

  /** Runs `remove` batch after batch until a batch is short; false when it had to stop early. */
  private async inBatches(remove: (limit: number) => Promise<number>, count: (n: number) => void): Promise<boolean> {
    for (;;) {
      if (!this.mayGoOn()) return false;
      const n = await remove(this.config.batchSize);
      count(n);
      if (n < this.config.batchSize) return true;
      await this.pause();
    }
  }

  /**
   * Walks the jobs that ended before `before`, a page at a time in the order
   * they ended, deleting the log lines of those that may go (and, with
   * `deleteJobs`, the jobs). False when it had to stop early.
   */
  private async walkEndedJobs(before: number, result: SweepResult, deleteJobs: boolean): Promise<boolean> {
    const { retention } = this.deps.store;
    const { batchSize, keepJobs } = this.config;
    let after: EndedJobPosition | undefined;
    for (;;) {
      if (!this.mayGoOn()) return false;
      const page = await retention.endedBefore(before, after, batchSize);
      if (page.length === 0) return true;
      after = page[page.length - 1];
      const ids = await retention.prunable(
        page.map((j) => j.id),
        keepJobs,
      );
      if (!(await this.inBatches((limit) => retention.deleteLogLines(ids, limit), (n) => (result.logLines += n)))) return false;
      // The search blocks over those lines (one per 1 024 lines, so rarely more than one statement).
      if (!(await this.inBatches((limit) => retention.deleteLogBlocks(ids, limit), () => undefined))) return false;
      if (deleteJobs) result.jobs += await retention.deleteJobs(ids);
      if (page.length < batchSize) return true;
      await this.pause();
    }
  }

  private mayGoOn(): boolean {
    return !this.abort.signal.aborted && this.deps.mayRun();
  }

  private pause(): Promise<void> {
    return this.config.pauseMs > 0 ? systemClock.sleep(this.config.pauseMs, this.abort.signal) : new Promise((r) => setImmediate(r));
  }
}
