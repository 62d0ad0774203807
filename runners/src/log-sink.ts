import type { ContainerLogLine } from './executors/container.executor.js';

/**
 * Where a CONTAINER job's captured lines go. In production it is the
 * BusLogSink (bus-log-sink.ts), which batches lines onto QUEUES.logs for
 * log-ingest; the default only counts them (the runner's metrics show the
 * count) and drops them.
 */
export interface LogSink {
  /** Called once per CONTAINER attempt, before its container is created. */
  open(job: LogSinkJob): JobLogWriter;
  /**
   * The runner's stop() gave up on unreported work: stop retrying, and let
   * pending writes and close() reject. Optional.
   */
  abandon?(): void;
}

export interface LogSinkJob {
  job_id: string;
  workflow_id: string;
  attempt: number;
  log_retention: boolean;
}

/** One captured line with its place in the job's single sequence (both streams, from 0). */
export interface CapturedLine extends ContainerLogLine {
  sequence_num: number;
}

export interface JobLogWriter {
  /**
   * One line, in sequence order. A returned promise pauses reading the
   * container's output until it settles (backpressure); a rejection kills
   * the container and fails the attempt as a system failure.
   */
  write(line: CapturedLine): void | Promise<void>;
  /**
   * After the last line, before job.finished is published; awaited.
   * `lineCount`: lines the container printed when that is more than were
   * written (the log cap dropped some); they are counted, not stored.
   */
  close(options?: { lineCount?: number }): Promise<void>;
}

/** The default: lines are counted by the runner and dropped. */
export const discardingLogSink: LogSink = {
  open: () => ({
    write: () => undefined,
    close: () => Promise.resolve(),
  }),
};
