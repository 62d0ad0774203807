/**
 * What a CONTAINER run is asked to do and what it reports: the executor's
 * public types, in their own module so the run's parts can share them
 * without importing the executor.
 */
import type { JobReason } from '@orloj/common/domain';
import type { StreamName } from '../line-splitter.js';

export interface ContainerRunSpec {
  jobId: string;
  image: string;
  /** Command; the image's default when omitted. */
  cmd?: string[];
  env: Record<string, string>;
  timeoutMs: number;
  /** Memory limit (no extra swap); default 512 MiB. */
  memoryMb?: number;
  /** CPU limit in cores (e.g. 0.5); unlimited when omitted. */
  cpus?: number;
  network: 'none' | 'bridge';
  /** Extra labels (e.g. a runner id). `orloj.managed` and `orloj.job_id` always win. */
  labels?: Record<string, string>;
}

export interface ContainerLogLine {
  stream: StreamName;
  message: string;
  /** Milliseconds since the epoch. */
  timestamp: number;
}

export interface ContainerRunHooks {
  /** Called once per line, in order per stream. A returned promise pauses reading until it settles. */
  onLine(line: ContainerLogLine): void | Promise<void>;
  /** Aborting kills the container; run() then resolves with CANCELED. */
  signal?: AbortSignal;
}

export interface RunTimes {
  /** Absent when the container was never created. */
  containerId?: string;
  /** When the container started; absent when it never did. */
  startedAt?: number;
  finishedAt: number;
  /** Lines passed to onLine. */
  lineCount: number;
}

/** How a run ended, without its times. */
export type RunOutcome =
  | { status: 'COMPLETED'; exitCode: 0 }
  | { status: 'FAILED'; reason: JobReason; exitCode?: number }
  | { status: 'CANCELED' };

export type ContainerRunResult = RunTimes & RunOutcome;
