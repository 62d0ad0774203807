/**
 * One container from its creation on: attach to its output, start it, watch
 * it until it exits (or is stopped, or lost), decide the outcome, remove it.
 *
 * How the exit is seen: the attached output ends when the container closes
 * it, which it does when it exits; the container is then inspected at once
 * (a few times over the next ~0.6 s if it still shows as running). Podman's
 * `wait` endpoint answers 200-300 ms after the exit (it polls), which was
 * most of a short job's time. Only a clean exit (0) is taken from that early
 * inspection; `wait`, which runs beside it, decides everything else: a
 * non-zero exit (an outside `rm -f` kills before it removes), output that
 * ends early or breaks off. A container that cannot be attached is never
 * started (SYSTEM failure when the runtime does not answer).
 *
 * An exit code only counts when the runtime still has the container to
 * report it: one removed behind our back is a SYSTEM failure, never
 * COMPLETED — checked by an inspection after `wait`, and for an early clean
 * exit by our own removal finding the container already gone.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type Docker from 'dockerode';
import type { Clock } from '@orloj/common/core';
import { reasons } from '@orloj/common/domain';
import type { Logger } from '@orloj/common/logging';
import { OutputReader, type LogStream } from './output-reader.js';
import { RunWatchdog } from './run-watchdog.js';
import { isNoSuchContainer, isUnavailable, type RuntimeClient } from './runtime-client.js';
import type { ContainerRunHooks, ContainerRunSpec, RunOutcome } from './types.js';

export interface ContainerRunContext {
  client: RuntimeClient;
  clock: Clock;
  healthCheckMs: number;
  logDrainIdleMs: number;
}

/** What was seen of the container's end. */
type ExitSeen =
  /** `confirmed`: read from an inspection, so the container was still there to report it. */
  | { kind: 'exited'; exitCode: number; confirmed: boolean }
  | { kind: 'gone' }
  | { kind: 'lost'; err?: unknown };

/** Pauses between inspections once the output has ended (ms): the exit is usually recorded by the first. */
const EXIT_POLL_DELAYS_MS = [0, 5, 10, 20, 40, 80, 160, 320];

const CANCELED: RunOutcome = { status: 'CANCELED' };

export class ContainerRun {
  startedAt: number | undefined;
  /** When the outcome was decided (before the removal). */
  finishedAt: number | undefined;
  private readonly watchdog: RunWatchdog;
  private stream: LogStream | undefined;
  private output: OutputReader | undefined;
  /** The exit code came from an inspection as the output ended, not from wait. */
  private exitReadEarly = false;

  constructor(
    private readonly ctx: ContainerRunContext,
    readonly container: Docker.Container,
    private readonly spec: ContainerRunSpec,
    private readonly hooks: ContainerRunHooks,
    private readonly log: Logger,
  ) {
    this.watchdog = new RunWatchdog({
      ...(hooks.signal ? { signal: hooks.signal } : {}),
      kill: () => ctx.client.kill(container, log),
      ping: () => ctx.client.ping(),
      healthCheckMs: ctx.healthCheckMs,
      giveUpMs: ctx.client.apiTimeoutMs,
      log,
    });
  }

  get lineCount(): number {
    return this.output?.lineCount ?? 0;
  }

  /**
   * Runs the container to its end and removes it. Rejects only when onLine
   * throws (the container is killed and removed first).
   */
  async execute(): Promise<RunOutcome> {
    let outcome: RunOutcome;
    let removal: 'removed' | 'gone' | 'failed';
    try {
      outcome = await this.steps();
      this.finishedAt = this.ctx.clock.now();
    } catch (err) {
      // onLine failed (or an unexpected bug): make sure the container is gone, then report it.
      this.log.error({ err }, 'container run aborted');
      this.watchdog.stop('cancel');
      await this.watchdog.settled();
      throw err;
    } finally {
      await this.watchdog.dispose();
      if (!this.output) this.stream?.destroy?.(); // attached, but the container never ran
      removal = await this.ctx.client.remove(this.container, this.log);
    }
    // A clean exit read early (while the output ended) from a container that
    // someone else removed before we could: it may have been stopped by that
    // removal, so it does not count as COMPLETED.
    if (outcome.status === 'COMPLETED' && this.exitReadEarly && removal === 'gone') {
      this.log.error('the container was removed by someone else as it exited');
      return { status: 'FAILED', reason: reasons.containerRemoved() };
    }
    return outcome;
  }

  private async steps(): Promise<RunOutcome> {
    if (this.hooks.signal?.aborted) return CANCELED;
    // Attached before the start, so no output can pass unseen. A container
    // whose output cannot be read is never started: its lines would be lost
    // without a trace and the run reported COMPLETED all the same.
    const attached = await this.attach();
    if ('failed' in attached) return attached.failed;
    this.stream = attached.stream;
    const failed = await this.start();
    if (failed) return failed;
    const output = new OutputReader(this.stream, {
      onLine: this.hooks.onLine,
      clock: this.ctx.clock,
      log: this.log,
      exited: () => this.watchdog.hasExited,
      drainIdleMs: this.ctx.logDrainIdleMs,
    });
    this.output = output;
    // onLine failed: kill the container at once (the error is rethrown below).
    output.done.catch(() => this.watchdog.stop('cancel'));
    output.done.then(
      () => void this.watchdog.checkHealth(),
      () => undefined,
    );
    this.watchdog.started(this.spec.timeoutMs);

    const waitStarted = performance.now();
    const exit = await this.awaitExit(output.ended);
    this.ctx.client.observe(`exit seen (${exit.kind === 'exited' && exit.confirmed ? 'output end + inspect' : 'wait'})`, waitStarted);
    this.watchdog.markExited();
    await output.done; // rethrows an onLine failure
    await this.watchdog.settled();
    return this.outcome(exit);
  }

  /** The container's output stream, or the outcome when it cannot be attached. */
  private async attach(): Promise<{ stream: LogStream } | { failed: RunOutcome }> {
    try {
      const stream = (await this.ctx.client.call('container attach', () =>
        this.container.attach({ stream: true, stdout: true, stderr: true, logs: false }),
      )) as LogStream;
      return { stream };
    } catch (err) {
      if (this.watchdog.stopCause === 'cancel') return { failed: CANCELED };
      if (isUnavailable(err)) {
        this.log.error({ err }, 'container runtime unavailable while attaching to a container; not started');
        return { failed: { status: 'FAILED', reason: reasons.runtimeUnavailable() } };
      }
      this.log.warn({ err }, 'could not attach to the container output; not started');
      return { failed: { status: 'FAILED', reason: reasons.containerStartFailed() } };
    }
  }

  /** Starts the container; the outcome when it could not be started. */
  private async start(): Promise<RunOutcome | undefined> {
    try {
      await this.ctx.client.call('container start', () => this.container.start());
      this.startedAt = this.ctx.clock.now();
      this.log.debug('container started');
      return undefined;
    } catch (err) {
      if (isUnavailable(err)) {
        this.log.error({ err }, 'container runtime unavailable while starting a container');
        return { status: 'FAILED', reason: reasons.runtimeUnavailable() };
      }
      this.log.warn({ err }, 'container start failed');
      if (this.watchdog.stopCause === 'cancel') return CANCELED;
      return { status: 'FAILED', reason: reasons.containerStartFailed() };
    }
  }

  /** Waits for the first sign of the container's end, under the watchdog. */
  private async awaitExit(outputEnded: Promise<boolean>): Promise<ExitSeen> {
    const stopWaiting = new AbortController();
    const waited = this.ctx.client.waitExit(this.container, stopWaiting.signal).then(
      (res): ExitSeen =>
        typeof res.StatusCode === 'number' ? { kind: 'exited', exitCode: res.StatusCode, confirmed: false } : { kind: 'lost' },
      (err: unknown): ExitSeen => ({ kind: 'lost', err }),
    );
    const seen = outputEnded.then((clean) => (clean ? this.exitAfterOutput(stopWaiting.signal) : never<ExitSeen>()));
    try {
      return await this.watchdog.guard(Promise.race([waited, seen]));
    } catch (err) {
      return { kind: 'lost', err };
    } finally {
      stopWaiting.abort();
    }
  }

  /**
   * The output has ended: inspects the container until it shows as exited
   * or gone. Never settles when it still runs after the last inspection
   * (it closed its output and carries on), or when an inspection fails:
   * `wait` decides then.
   */
  private async exitAfterOutput(stop: AbortSignal): Promise<ExitSeen> {
    for (const delay of EXIT_POLL_DELAYS_MS) {
      if (delay > 0) await sleep(delay, undefined, { signal: stop }).catch(() => undefined);
      if (stop.aborted) break;
      const state = await this.exitState();
      if (state === 'gone') return { kind: 'gone' };
      if (state === undefined) break;
      if (state === 0) {
        this.exitReadEarly = true;
        return { kind: 'exited', exitCode: 0, confirmed: true };
      }
      // Any other exit may be a removal from outside in progress (its kill
      // ends the output too; the container vanishes a moment later): wait,
      // then the inspection after it, decide. Only failures take this path.
      if (state !== 'running') break;
    }
    return never<ExitSeen>();
  }

  private async outcome(exit: ExitSeen): Promise<RunOutcome> {
    const cause = this.watchdog.stopCause;
    if (cause === 'cancel') return CANCELED;
    if (cause === 'timeout') return { status: 'FAILED', reason: reasons.timeLimitExceeded(this.spec.timeoutMs) };
    if (exit.kind === 'lost') {
      // We lost track of the container (runtime gone, container removed behind
      // our back): a SYSTEM failure, not the job's fault.
      this.log.error({ err: exit.err }, 'lost the container while waiting for it to exit');
      return { status: 'FAILED', reason: reasons.runtimeUnavailable() };
    }
    const exitCode = exit.kind === 'exited' ? await this.confirmedExitCode(exit) : 'gone';
    if (exitCode === 'gone') {
      this.log.error('the container was removed by someone else while it ran');
      return { status: 'FAILED', reason: reasons.containerRemoved() };
    }
    this.log.info({ exitCode, lines: this.lineCount }, 'container exited');
    if (exitCode === 0) return { status: 'COMPLETED', exitCode: 0 };
    return { status: 'FAILED', reason: reasons.nonZeroExit(exitCode), exitCode };
  }

  /**
   * A container removed behind our back (another runner's sweep, an operator's
   * `rm -f`) can report a clean exit on some runtimes: the exit code only counts
   * if the container is still there to say so.
   */
  private async confirmedExitCode(exit: { exitCode: number; confirmed: boolean }): Promise<number | 'gone'> {
    if (exit.confirmed) return exit.exitCode;
    const state = await this.exitState();
    if (state === 'gone') return 'gone';
    return typeof state === 'number' ? state : exit.exitCode;
  }

  /** The exit code the runtime recorded, 'running', 'gone' when the container no longer exists, undefined when it cannot tell. */
  private async exitState(): Promise<number | 'running' | 'gone' | undefined> {
    try {
      const info = await this.ctx.client.call('container inspect', () => this.container.inspect());
      if (info.State?.Running) return 'running';
      return typeof info.State?.ExitCode === 'number' ? info.State.ExitCode : undefined;
    } catch (err) {
      return isNoSuchContainer(err) ? 'gone' : undefined;
    }
  }
}

/** A promise that never settles: a race entrant that gives way to the others. */
function never<T>(): Promise<T> {
  return new Promise<T>(() => undefined);
}
