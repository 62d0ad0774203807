import type { Clock, Logger, SignedBus, Store } from '@orloj/common';
import type { SchedulerConfig, SchedulerStats } from './scheduler.js';

/** What every part of the scheduler works with; the Scheduler builds one and hands it to each part. */
export interface SchedulerContext {
  readonly store: Store;
  readonly bus: SignedBus;
  readonly clock: Clock;
  readonly log: Logger;
  readonly config: SchedulerConfig;
  /** Aborted by Scheduler.stop(). */
  readonly signal: AbortSignal;
  readonly stats: SchedulerStats;
}
