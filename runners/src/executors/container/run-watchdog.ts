/**
 * The watchdog of one container run: everything that may stop it from the
 * outside, and the timers that go with it, in one disposable object.
 *
 * - cancellation: the hooks' AbortSignal stops the container (CANCELED);
 * - the time limit, counted from the start (TIME_LIMIT_EXCEEDED);
 * - the runtime's health: while the container runs the runtime is pinged
 *   every healthCheckMs (and at once when the output ends), and a failed
 *   ping ends the wait, since a wait on a connection to a dead daemon may
 *   never settle on its own;
 * - a killed container that still does not report its exit (a hung runtime)
 *   is given up on after giveUpMs.
 *
 * Stopping kills the container; kills are serialised, so `dispose()` can
 * await the last one. `dispose()` clears every timer and listener; the run
 * calls it in `finally`.
 */
import type { Logger } from '@orloj/common/logging';
import { ApiTimeoutError } from './runtime-client.js';

export type StopCause = 'timeout' | 'cancel';

export interface RunWatchdogOptions {
  signal?: AbortSignal;
  /** Sends SIGKILL to the container. */
  kill: () => Promise<void>;
  /** True when the runtime answers. */
  ping: () => Promise<boolean>;
  healthCheckMs: number;
  /** How long a killed container may take to report its exit. */
  giveUpMs: number;
  log: Logger;
}

export class RunWatchdog {
  private cause: StopCause | undefined;
  private killing: Promise<void> | undefined;
  private exited = false;
  private checking = false;
  private timeLimit: NodeJS.Timeout | undefined;
  private healthTimer: NodeJS.Timeout | undefined;
  private giveUpTimer: NodeJS.Timeout | undefined;
  /** Rejects when the run must stop waiting for the container: the runtime was lost, or a kill went unanswered. */
  private readonly trouble: Promise<never>;
  private fail: (err: Error) => void = () => undefined;
  private readonly onAbort = (): void => this.stop('cancel');

  constructor(private readonly options: RunWatchdogOptions) {
    this.trouble = new Promise<never>((_, reject) => (this.fail = reject));
    this.trouble.catch(() => undefined);
    options.signal?.addEventListener('abort', this.onAbort, { once: true });
  }

  /** Why the container was stopped, if it was. */
  get stopCause(): StopCause | undefined {
    return this.cause;
  }

  get hasExited(): boolean {
    return this.exited;
  }

  /** Stops the container (the first cause wins). */
  stop(cause: StopCause): void {
    if (this.cause) return;
    this.cause = cause;
    this.options.log.info({ cause }, 'stopping container');
    this.killNow();
  }

  /** The container is running: the time limit and the health checks start. */
  started(timeoutMs: number): void {
    // A kill sent while the container was still starting may have missed it.
    if (this.cause) this.killNow();
    this.timeLimit = setTimeout(() => this.stop('timeout'), timeoutMs);
    this.healthTimer = setInterval(() => void this.checkHealth(), this.options.healthCheckMs);
  }

  /** Pings the runtime now (one check at a time); a runtime that does not answer ends the wait. */
  async checkHealth(): Promise<void> {
    if (this.checking || this.exited) return;
    this.checking = true;
    try {
      if (!(await this.options.ping()) && !this.exited) this.fail(new Error('the container runtime stopped answering'));
    } finally {
      this.checking = false;
    }
  }

  /** The promise, or a rejection as soon as the runtime is lost or a killed container is given up on. */
  guard<T>(promise: Promise<T>): Promise<T> {
    return Promise.race([promise, this.trouble]);
  }

  /** The container has exited (or is lost): the time limit and the health checks end. */
  markExited(): void {
    this.exited = true;
    clearTimeout(this.timeLimit);
    clearInterval(this.healthTimer);
  }

  /** Resolves once every kill sent so far has been answered. */
  async settled(): Promise<void> {
    await this.killing;
  }

  async dispose(): Promise<void> {
    clearTimeout(this.timeLimit);
    clearInterval(this.healthTimer);
    this.options.signal?.removeEventListener('abort', this.onAbort);
    await this.killing;
    clearTimeout(this.giveUpTimer);
  }

  private killNow(): void {
    const previous = this.killing;
    this.killing = (async () => {
      await previous;
      await this.options.kill();
      clearTimeout(this.giveUpTimer);
      this.giveUpTimer = setTimeout(() => this.fail(new ApiTimeoutError('container wait', this.options.giveUpMs)), this.options.giveUpMs);
    })();
  }
}
