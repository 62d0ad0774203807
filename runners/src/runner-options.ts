/** What a Runner is built from (RunnerOptions, with their defaults) and what it reports (RunnerMetrics). */
import type { Clock } from '@orloj/common/core';
import { SETTINGS } from '@orloj/common/config';
import type { Logger } from '@orloj/common/logging';
import type { SignedBus } from '@orloj/common/envelope';
import type { ContainerExecutor } from './executors/container.executor.js';
import type { HttpCheckExecutor } from './executors/http-check.executor.js';
import type { ImagePolicy } from './executors/image-policy.js';
import type { LogSink } from './log-sink.js';

// The settings' defaults (common's config/settings.ts), under the names this package exports.
export const DEFAULT_CONCURRENCY = SETTINGS.RUNNER_CONCURRENCY.default;
export const DEFAULT_LEASE_TTL_MS = SETTINGS.JOB_LEASE_TTL.default;
export const DEFAULT_SHUTDOWN_GRACE_MS = SETTINGS.RUNNER_SHUTDOWN_GRACE.default;
/** Image builds at once. */
export const DEFAULT_BUILD_CONCURRENCY = 2;
/** How long aborted jobs get to report their result. */
export const DEFAULT_ABORT_GRACE_MS = 10_000;
/** How long, and for how many jobs at most, a runner remembers a job.stop so that a late job.run of it is refused. */
export const DEFAULT_STOPPED_JOBS = { ttlMs: 60 * 60_000, max: 10_000 } as const;

export interface RunnerOptions {
  /** Signs as role 'runners'; verifies with PRODUCER_POLICY (job.run/build.run from the scheduler, job.stop from scheduler or api). */
  bus: SignedBus;
  logger: Logger;
  clock: Clock;
  /**
   * Names this runner in job.started/heartbeat/finished and in the
   * `orloj.runner_id` label of its containers. Keep it stable across restarts
   * and unique among runners sharing a container runtime: on start, every
   * container labelled with it is removed as a leftover of a crash.
   */
  runnerId: string;
  /**
   * Names the installation this runner works for; its containers carry it,
   * and a runner only ever removes containers of its own installation. The
   * server passes the fingerprint of the scheduler's public key.
   */
  installationId?: string;
  http: HttpCheckExecutor;
  /** Absent when no container runtime is configured or reachable: CONTAINER jobs and builds then fail with SYSTEM_ERROR. */
  containers?: ContainerExecutor;
  /**
   * The operator's container rules (registry allow-list and address guard, network
   * switch, resource maxima), applied before every pull and run. main.ts always
   * passes one; without it images and settings are used as the payload says.
   */
  imagePolicy?: ImagePolicy;
  /** Job attempts run at once; also the jobs queue prefetch (RUNNER_CONCURRENCY). */
  concurrency?: number;
  /** The scheduler's lease on a running attempt; job.heartbeat is sent every leaseTtlMs / 3 (JOB_LEASE_TTL). */
  leaseTtlMs?: number;
  /**
   * Holds job.started back this long (capped at half the heartbeat interval):
   * an attempt that ends sooner sends it right before job.finished, and the
   * scheduler records both in one transaction (docs/adr/0017).
   * Unset (0): sent before the attempt runs; the server leaves it there for now (see the ADR).
   */
  startReportDelayMs?: number;
  /** How long stop() lets running attempts finish before handing them back (RUNNER_SHUTDOWN_GRACE). */
  shutdownGraceMs?: number;
  /** After the grace: how long aborted attempts get to stop and report before stop() gives up on them (DEFAULT_ABORT_GRACE_MS unless set). */
  abortGraceMs?: number;
  /** build.run messages handled at once (image pulls; DEFAULT_BUILD_CONCURRENCY unless set). */
  buildConcurrency?: number;
  /** Where captured container lines go: a BusLogSink in production. Default: counted, then dropped. */
  logSink?: LogSink;
  /** Backoff between attempts to publish job.finished: doubling from initialMs up to maxMs, with jitter. */
  resultRetry?: { initialMs?: number; maxMs?: number };
  /** Job ids stopped while not running here are remembered this long / this many (newest kept; DEFAULT_STOPPED_JOBS unless set). */
  stoppedJobs?: { ttlMs?: number; max?: number };
}

export interface RunnerMetrics {
  /** Attempts started and not yet reported finished. */
  running: number;
  /** job.run messages held while waiting for a free slot. */
  waiting: number;
  completed: number;
  failed: number;
  canceled: number;
  /** job.run messages dropped because their job had been stopped. */
  dropped: number;
  /** Results that could not be published before stop() gave up (the scheduler recovers them by lease expiry). */
  unreported: number;
  /** Container log lines captured. */
  logLines: number;
  /** Size of the bounded set of stopped job ids. */
  stoppedRemembered: number;
}

