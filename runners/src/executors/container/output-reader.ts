/**
 * A container's output: reads the attached stream (stdout and stderr,
 * multiplexed), splits it into lines and passes each to onLine, awaiting it.
 *
 * Attach, not `logs?follow=1`: Podman 4's follow stream loses records when a
 * container writes fast (a container printing 200 000 lines lost most of
 * them, from the middle too), while the attach stream delivered every line in
 * every run. Attach also carries back-pressure: while onLine is pending the
 * stream is not read, and the container blocks on its full pipe. Lines are
 * stamped when they are read (attach carries no runtime timestamps).
 */
import type { Clock } from '@orloj/common/core';
import type { Logger } from '@orloj/common/logging';
import { DockerFrameDemuxer, LineSplitter, type StreamName } from '../line-splitter.js';
import type { ContainerRunHooks } from './types.js';

/** The attached output of a container: Docker's multiplexed stream. */
export type LogStream = NodeJS.ReadableStream & AsyncIterable<Buffer> & { destroy?: (err?: Error) => void };

export interface OutputReaderOptions {
  onLine: ContainerRunHooks['onLine'];
  clock: Clock;
  log: Logger;
  /** True once the container has exited: only then may a silent stream be closed. */
  exited: () => boolean;
  /**
   * After the container has exited, how long the stream may stay silent
   * before it is closed (guards against a runtime that never ends it). Time
   * spent inside onLine does not count.
   */
  drainIdleMs: number;
}

/** Wraps an error thrown by onLine, so it is not mistaken for a stream failure. */
class SinkFailure extends Error {
  constructor(override readonly cause: unknown) {
    super('onLine failed');
  }
}

export class OutputReader {
  /** Lines passed to onLine. */
  lineCount = 0;
  /**
   * Resolves true when the stream reached its end — the container closed its
   * output, which it does when it exits — and false when the stream broke
   * off, was closed by the idle watchdog, or never was. Never rejects.
   */
  readonly ended: Promise<boolean>;
  /** Resolves once every line, including a final one without a newline, has been delivered; rejects with onLine's error. */
  readonly done: Promise<void>;

  private readonly demux = new DockerFrameDemuxer();
  private readonly splitters: Record<StreamName, LineSplitter<number>> = {
    stdout: new LineSplitter<number>(),
    stderr: new LineSplitter<number>(),
  };
  private idleTimer: NodeJS.Timeout | undefined;
  private closedByWatchdog = false;
  private markEnded: (clean: boolean) => void = () => undefined;

  constructor(
    private readonly stream: LogStream,
    private readonly options: OutputReaderOptions,
  ) {
    this.ended = new Promise<boolean>((resolve) => (this.markEnded = resolve));
    this.done = this.read();
    this.done.catch(() => this.markEnded(false));
  }

  private async read(): Promise<void> {
    const { stream, options } = this;
    try {
      this.armIdle();
      for await (const chunk of stream) {
        clearTimeout(this.idleTimer);
        const timestamp = options.clock.now();
        for (const frame of this.demux.push(chunk)) {
          for (const line of this.splitters[frame.stream].push(frame.payload, timestamp)) {
            await this.deliver(frame.stream, line.text, line.meta);
          }
        }
        this.armIdle();
      }
      this.markEnded(!this.closedByWatchdog);
    } catch (err) {
      this.markEnded(false);
      if (err instanceof SinkFailure) {
        stream.destroy?.();
        throw err.cause;
      }
      // A closed or broken connection: deliver what we have, and say so.
      if (!this.closedByWatchdog) options.log.warn({ err }, 'container log stream broke off');
    } finally {
      clearTimeout(this.idleTimer);
    }
    this.reportTrouble();
    try {
      for (const name of ['stdout', 'stderr'] as const) {
        for (const line of this.splitters[name].end()) await this.deliver(name, line.text, line.meta);
      }
    } catch (err) {
      throw err instanceof SinkFailure ? err.cause : err;
    }
  }

  private async deliver(stream: StreamName, message: string, timestamp: number): Promise<void> {
    this.lineCount++;
    try {
      const r = this.options.onLine({ stream, message, timestamp });
      if (r) await r;
    } catch (err) {
      throw new SinkFailure(err);
    }
  }

  /** Once the container has exited, a silent stream (while we are not inside onLine) is closed after drainIdleMs. */
  private armIdle(): void {
    clearTimeout(this.idleTimer);
    const check = (): void => {
      if (!this.options.exited()) {
        this.idleTimer = setTimeout(check, 250);
        return;
      }
      this.closedByWatchdog = true;
      this.stream?.destroy?.();
    };
    this.idleTimer = setTimeout(check, this.options.drainIdleMs);
  }

  private reportTrouble(): void {
    const { log } = this.options;
    if (this.closedByWatchdog) log.warn('container log stream did not end after the container exited; closed it');
    if (this.demux.leftover > 0) log.warn({ bytes: this.demux.leftover }, 'container log stream ended inside a frame');
    // The runtime's own errors in the stream: the runner's log, never the job's output.
    if (this.demux.runtimeErrors.length > 0) log.error({ runtimeErrors: this.demux.runtimeErrors }, 'the container runtime reported errors in the log stream');
  }
}
