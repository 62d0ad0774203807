import type { Clock } from '@orloj/common/core';
import type { Logger } from '@orloj/common/logging';
import type { SignedBus } from '@orloj/common/envelope';
import type { Store } from '@orloj/common/store';
import type { SchedulerConfig, SchedulerStats } from './scheduler.js';

/** What every part of the scheduler works with; the Scheduler builds one and hands it to each part. */
export interface SchedulerContext {
  readonly store: Store;
  readonly bus: SignedBus;
  readonly clock: Clock;
  /** The time runners' work takes (SchedulerDeps.workClock). */
  readonly workClock: Clock;
  readonly log: Logger;
  readonly config: SchedulerConfig;
  /** Aborted by Scheduler.stop(). */
  readonly signal: AbortSignal;
  readonly stats: SchedulerStats;
  /** A job started or ended here: the leader loop (if this replica leads) makes its next pass now. */
  readonly roomFreed: () => void;
}
