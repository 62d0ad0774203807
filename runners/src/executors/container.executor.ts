/**
 * CONTAINER job executor: runs one job as a container through the Docker Engine
 * API (Docker or Podman's compatible service) with dockerode, streams its
 * stdout/stderr as lines, enforces the time limit and always removes the
 * container afterwards.
 *
 * Every container is hardened the same way (see docs/container-runtime.md): no
 * privileged mode, all capabilities dropped, no-new-privileges, no network
 * unless `bridge` is asked for (never the host network), memory and pids limits,
 * optional CPU limit, no host mounts. Containers are labelled
 * `orloj.managed=true` and `orloj.job_id=<id>` so leftovers can be found after a
 * crash ({@link ContainerExecutor.removeOrphans}).
 *
 * Reasons are always the fixed sentences of `reasons`; library error text is
 * logged, never put in a reason.
 */
import { randomBytes } from 'node:crypto';
import Docker from 'dockerode';
import { systemClock, type Clock } from '@orloj/common/core';
import { reasons, type JobReason } from '@orloj/common/domain';
import type { Logger } from '@orloj/common/logging';
import { DockerFrameDemuxer, LineSplitter, type StreamName } from './line-splitter.js';

export const MANAGED_LABEL = 'orloj.managed';
export const JOB_ID_LABEL = 'orloj.job_id';

export const DEFAULT_MEMORY_MB = 512;
export const DEFAULT_PIDS_LIMIT = 256;

export interface ContainerExecutorOptions {
  /** A DOCKER_HOST url: `unix:///path/to/docker.sock`, a bare socket path, or `tcp://host:port`. */
  dockerHost: string;
  logger: Logger;
  clock?: Clock;
  /** Limit for one short API call (create, start, kill, inspect, remove); default 30 s. */
  apiTimeoutMs?: number;
  /** Limit for a whole image pull; default 5 min. */
  pullTimeoutMs?: number;
  /**
   * After the container has exited, how long the log stream may stay silent
   * before it is closed (guards against a runtime that never ends the stream);
   * default 10 s. Time spent inside onLine does not count.
   */
  logDrainIdleMs?: number;
  /**
   * While a container runs, the runtime is pinged this often (and at once if
   * the log stream breaks off early); a failed ping ends the run with
   * SYSTEM_ERROR instead of waiting forever on a dead connection. Default 5 s.
   */
  healthCheckMs?: number;
}

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

interface RunTimes {
  /** Absent when the container was never created. */
  containerId?: string;
  /** When the container started; absent when it never did. */
  startedAt?: number;
  finishedAt: number;
  /** Lines passed to onLine. */
  lineCount: number;
}

export type ContainerRunResult = RunTimes &
  (
    | { status: 'COMPLETED'; exitCode: 0 }
    | { status: 'FAILED'; reason: JobReason; exitCode?: number }
    | { status: 'CANCELED' }
  );

export type EnsureImageResult = { ok: true } | { ok: false; reason: JobReason };

/** Connection-level failures: the runtime did not answer at all. */
const UNAVAILABLE_CODES = new Set([
  'ENOENT',
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'EACCES',
  'ENOTSOCK',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ECONNABORTED',
  'ORLOJ_API_TIMEOUT',
]);

class ApiTimeoutError extends Error {
  readonly code = 'ORLOJ_API_TIMEOUT';
  constructor(what: string, ms: number) {
    super(`${what} did not answer within ${ms} ms`);
  }
}

function statusCodeOf(err: unknown): number | undefined {
  const s = (err as { statusCode?: unknown } | null)?.statusCode;
  return typeof s === 'number' ? s : undefined;
}

function isUnavailable(err: unknown): boolean {
  if (statusCodeOf(err) !== undefined) return false;
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && UNAVAILABLE_CODES.has(code)) return true;
  const message = err instanceof Error ? err.message : '';
  return /socket hang up|connect E|read E/i.test(message);
}

/** Parses a DOCKER_HOST value into dockerode connection options. */
export function dockerOptionsFromHost(dockerHost: string): Docker.DockerOptions {
  const value = dockerHost.trim();
  if (value.startsWith('/')) return { socketPath: value };
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new Error(`unsupported DOCKER_HOST "${value}": expected unix:///path or tcp://host:port`);
  }
  switch (url.protocol) {
    case 'unix:': {
      const path = decodeURIComponent(url.pathname);
      if (!path || path === '/') throw new Error(`DOCKER_HOST "${value}" names no socket path`);
      return { socketPath: path };
    }
    case 'tcp:':
    case 'http:':
    case 'https:': {
      if (!url.hostname) throw new Error(`DOCKER_HOST "${value}" names no host`);
      const https = url.protocol === 'https:';
      const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
      return { host, port: Number(url.port || (https ? 2376 : 2375)), protocol: https ? 'https' : 'http' };
    }
    default:
      throw new Error(`unsupported DOCKER_HOST "${value}": expected unix:///path or tcp://host:port`);
  }
}

/** Adds `:latest` when the reference names neither a tag nor a digest (a pull would fetch every tag). */
export function normalizeImageRef(image: string): string {
  if (image.includes('@')) return image;
  const lastSlash = image.lastIndexOf('/');
  return image.slice(lastSlash + 1).includes(':') ? image : `${image}:latest`;
}

/** Container names allow [a-zA-Z0-9][a-zA-Z0-9_.-]*. */
function containerName(jobId: string): string {
  const safe = jobId.replace(/[^a-zA-Z0-9_.-]/g, '-').slice(0, 100);
  return `orloj-${safe}-${randomBytes(4).toString('hex')}`;
}

type StopCause = 'timeout' | 'cancel';

export class ContainerExecutor {
  private readonly docker: Docker;
  private readonly logger: Logger;
  private readonly clock: Clock;
  private readonly apiTimeoutMs: number;
  private readonly pullTimeoutMs: number;
  private readonly logDrainIdleMs: number;
  private readonly healthCheckMs: number;

  constructor(options: ContainerExecutorOptions) {
    this.docker = new Docker(dockerOptionsFromHost(options.dockerHost));
    this.logger = options.logger;
    this.clock = options.clock ?? systemClock;
    this.apiTimeoutMs = options.apiTimeoutMs ?? 30_000;
    this.pullTimeoutMs = options.pullTimeoutMs ?? 5 * 60_000;
    this.logDrainIdleMs = options.logDrainIdleMs ?? 10_000;
    this.healthCheckMs = options.healthCheckMs ?? 5_000;
  }

  /** True when the runtime answers its ping endpoint. */
  async ping(): Promise<boolean> {
    try {
      await this.api('ping', () => this.docker.ping(), Math.min(this.apiTimeoutMs, 5_000));
      return true;
    } catch (err) {
      this.logger.debug({ err }, 'container runtime ping failed');
      return false;
    }
  }

  /**
   * Makes sure the image is present locally, pulling it when missing. When
   * `beforePull` returns a reason, the image is not pulled and that reason is
   * the result (the runner's image policy: registry allow-list, address guard).
   */
  async ensureImage(
    image: string,
    options: { beforePull?: () => Promise<JobReason | undefined> | JobReason | undefined } = {},
  ): Promise<EnsureImageResult> {
    const ref = normalizeImageRef(image);
    const log = this.logger.child({ image: ref });
    try {
      await this.api('image inspect', () => this.docker.getImage(ref).inspect());
      return { ok: true };
    } catch (err) {
      if (isUnavailable(err)) {
        log.error({ err }, 'container runtime unavailable while inspecting an image');
        return { ok: false, reason: reasons.runtimeUnavailable() };
      }
      if (statusCodeOf(err) !== 404) {
        log.error({ err }, 'image inspect failed');
        return { ok: false, reason: reasons.imagePullFailed() };
      }
    }
    const refused = await options.beforePull?.();
    if (refused) {
      log.warn({ reason: refused.message }, 'image missing and not pulled');
      return { ok: false, reason: refused };
    }
    log.info('pulling image');
    try {
      await this.pull(ref);
      await this.api('image inspect', () => this.docker.getImage(ref).inspect());
      log.info('image pulled');
      return { ok: true };
    } catch (err) {
      if (isUnavailable(err) && !(await this.ping())) {
        log.error({ err }, 'container runtime unavailable while pulling an image');
        return { ok: false, reason: reasons.runtimeUnavailable() };
      }
      log.warn({ err }, 'image pull failed');
      return { ok: false, reason: reasons.imagePullFailed() };
    }
  }

  /** Reads the pull progress stream to its end; rejects on an error message or a timeout. */
  private async pull(ref: string): Promise<void> {
    const stream = (await this.api('image pull', () => this.docker.pull(ref))) as NodeJS.ReadableStream &
      AsyncIterable<Buffer> & { destroy?: (err?: Error) => void };
    const timer = setTimeout(() => stream.destroy?.(new ApiTimeoutError('image pull', this.pullTimeoutMs)), this.pullTimeoutMs);
    try {
      let text = '';
      let lastError: string | undefined;
      const handle = (line: string): void => {
        if (!line.trim()) return;
        try {
          const msg = JSON.parse(line) as { error?: unknown; errorDetail?: { message?: unknown } };
          if (msg.error !== undefined || msg.errorDetail !== undefined) {
            lastError = String(msg.error ?? msg.errorDetail?.message ?? 'unknown pull error');
          }
        } catch {
          // not JSON: progress text from some runtimes; ignore
        }
      };
      for await (const chunk of stream) {
        text += chunk.toString('utf8');
        let nl: number;
        while ((nl = text.indexOf('\n')) !== -1) {
          handle(text.slice(0, nl));
          text = text.slice(nl + 1);
        }
      }
      handle(text);
      if (lastError !== undefined) throw new Error(`pull of ${ref} failed: ${lastError}`);
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Runs one job to its end. Resolves with the outcome once every log line has
   * been passed to onLine and the container has been removed. Rejects only when
   * onLine itself throws (the container is killed and removed first).
   */
  async run(spec: ContainerRunSpec, hooks: ContainerRunHooks): Promise<ContainerRunResult> {
    const log = this.logger.child({ jobId: spec.jobId, image: spec.image });
    let lineCount = 0;
    const done = (
      outcome:
        | { status: 'COMPLETED'; exitCode: 0 }
        | { status: 'FAILED'; reason: JobReason; exitCode?: number }
        | { status: 'CANCELED' },
      times: { containerId?: string; startedAt?: number },
    ): ContainerRunResult => ({ ...outcome, ...times, finishedAt: this.clock.now(), lineCount });

    if (hooks.signal?.aborted) return done({ status: 'CANCELED' }, {});

    let container: Docker.Container;
    try {
      container = await this.api('container create', () => this.docker.createContainer(this.createOptions(spec)));
    } catch (err) {
      if (isUnavailable(err)) {
        log.error({ err }, 'container runtime unavailable while creating a container');
        return done({ status: 'FAILED', reason: reasons.runtimeUnavailable() }, {});
      }
      if (statusCodeOf(err) === 404) {
        log.warn({ err }, 'container image missing at create');
        return done({ status: 'FAILED', reason: reasons.imagePullFailed() }, {});
      }
      log.warn({ err }, 'container create failed');
      return done({ status: 'FAILED', reason: reasons.containerStartFailed() }, {});
    }
    const containerId = container.id;
    const clog = log.child({ containerId });
    let startedAt: number | undefined;

    let stopCause: StopCause | undefined;
    let output: LogStream | undefined;
    let timer: NodeJS.Timeout | undefined;
    let healthTimer: NodeJS.Timeout | undefined;
    let killing: Promise<void> | undefined;
    // Once killed, a container that still does not report its exit (a hung
    // runtime) is given up on after apiTimeoutMs.
    let giveUpTimer: NodeJS.Timeout | undefined;
    let giveUp: (err: Error) => void = () => undefined;
    const gaveUp = new Promise<never>((_, reject) => (giveUp = reject));
    gaveUp.catch(() => undefined);
    const killNow = (): void => {
      const previous = killing;
      killing = (async () => {
        await previous;
        await this.kill(container, clog);
        clearTimeout(giveUpTimer);
        giveUpTimer = setTimeout(() => giveUp(new ApiTimeoutError('container wait', this.apiTimeoutMs)), this.apiTimeoutMs);
      })();
    };
    const stop = (cause: StopCause): void => {
      if (stopCause) return;
      stopCause = cause;
      clog.info({ cause }, 'stopping container');
      killNow();
    };
    const onAbort = (): void => stop('cancel');

    try {
      hooks.signal?.addEventListener('abort', onAbort, { once: true });
      if (hooks.signal?.aborted) return done({ status: 'CANCELED' }, { containerId });

      // Attached before the start, so no output can pass unseen (see streamLogs).
      try {
        output = (await this.api('container attach', () =>
          container.attach({ stream: true, stdout: true, stderr: true, logs: false }),
        )) as LogStream;
      } catch (err) {
        clog.error({ err }, 'could not attach to the container output; its lines will be missing');
      }

      try {
        await this.api('container start', () => container.start());
        startedAt = this.clock.now();
      } catch (err) {
        if (isUnavailable(err)) {
          clog.error({ err }, 'container runtime unavailable while starting a container');
          return done({ status: 'FAILED', reason: reasons.runtimeUnavailable() }, { containerId });
        }
        clog.warn({ err }, 'container start failed');
        if (stopCause === 'cancel') return done({ status: 'CANCELED' }, { containerId });
        return done({ status: 'FAILED', reason: reasons.containerStartFailed() }, { containerId });
      }
      clog.debug('container started');
      // A kill sent while the container was still starting may have missed it.
      if (stopCause) killNow();
      timer = setTimeout(() => stop('timeout'), spec.timeoutMs);

      let exited = false;
      const drain = this.streamLogs(output, hooks, clog, () => exited, () => lineCount++);
      output = undefined; // streamLogs owns it now
      // onLine failed: kill the container at once (the error is rethrown below).
      drain.catch(() => stop('cancel'));
      // The runtime's health while we wait: a wait on a connection to a dead
      // daemon may never settle on its own.
      let lose: (err: Error) => void = () => undefined;
      const lost = new Promise<never>((_, reject) => (lose = reject));
      lost.catch(() => undefined);
      let checking = false;
      const checkHealth = async (): Promise<void> => {
        if (checking || exited) return;
        checking = true;
        try {
          if (!(await this.ping()) && !exited) lose(new Error('the container runtime stopped answering'));
        } finally {
          checking = false;
        }
      };
      healthTimer = setInterval(() => void checkHealth(), this.healthCheckMs);
      drain.then(
        () => void checkHealth(),
        () => undefined,
      );

      let exitCode: number | undefined;
      let waitError: unknown;
      try {
        const res = (await Promise.race([container.wait(), gaveUp, lost])) as { StatusCode?: unknown };
        exitCode = typeof res.StatusCode === 'number' ? res.StatusCode : undefined;
      } catch (err) {
        waitError = err;
      }
      exited = true;
      clearTimeout(timer);
      clearInterval(healthTimer);
      await drain; // rethrows an onLine failure
      await killing;

      if (stopCause === 'cancel') return done({ status: 'CANCELED' }, { containerId, startedAt });
      if (stopCause === 'timeout') {
        return done({ status: 'FAILED', reason: reasons.timeLimitExceeded(spec.timeoutMs) }, { containerId, startedAt });
      }
      if (waitError !== undefined || exitCode === undefined) {
        // We lost track of the container (runtime gone, container removed behind
        // our back): a SYSTEM failure, not the job's fault.
        clog.error({ err: waitError }, 'lost the container while waiting for it to exit');
        return done({ status: 'FAILED', reason: reasons.runtimeUnavailable() }, { containerId, startedAt });
      }
      // A container removed behind our back (another runner's sweep, an operator's
      // `rm -f`) can report a clean exit on some runtimes: the exit code only counts
      // if the container is still there to say so.
      const state = await this.exitState(container);
      if (state === 'gone') {
        clog.error('the container was removed by someone else while it ran');
        return done({ status: 'FAILED', reason: reasons.containerRemoved() }, { containerId, startedAt });
      }
      if (state !== undefined) exitCode = state;
      clog.info({ exitCode, lines: lineCount }, 'container exited');
      if (exitCode === 0) return done({ status: 'COMPLETED', exitCode: 0 }, { containerId, startedAt });
      return done({ status: 'FAILED', reason: reasons.nonZeroExit(exitCode), exitCode }, { containerId, startedAt });
    } catch (err) {
      // onLine failed (or an unexpected bug): make sure the container is gone, then report it.
      clog.error({ err }, 'container run aborted');
      stop('cancel');
      await killing;
      throw err;
    } finally {
      clearTimeout(timer);
      clearInterval(healthTimer);
      clearTimeout(giveUpTimer);
      hooks.signal?.removeEventListener('abort', onAbort);
      output?.destroy?.(); // attached, but the container never ran
      await this.remove(container, clog);
    }
  }

  /**
   * Reads the container's attached output (stdout and stderr, multiplexed)
   * and passes each line to onLine, awaiting it. Resolves when the stream
   * ends and every line, including a final one without a newline, has been
   * delivered.
   *
   * Attach, not `logs?follow=1`: Podman 4's follow stream loses records when a
   * container writes fast (a container printing 200 000 lines lost most of
   * them, from the middle too), while the attach stream delivered every line
   * in every run. Attach also carries back-pressure: while onLine is pending
   * the stream is not read, and the container blocks on its full pipe. Lines
   * are stamped when they are read (attach carries no runtime timestamps).
   */
  private async streamLogs(
    stream: LogStream | undefined,
    hooks: ContainerRunHooks,
    log: Logger,
    exited: () => boolean,
    counted: () => void,
  ): Promise<void> {
    if (!stream) return;

    const demux = new DockerFrameDemuxer();
    const splitters: Record<StreamName, LineSplitter<number>> = {
      stdout: new LineSplitter<number>(),
      stderr: new LineSplitter<number>(),
    };
    // Watchdog: once the container has exited, a silent stream (while we are
    // not inside onLine) is closed after logDrainIdleMs.
    let idleTimer: NodeJS.Timeout | undefined;
    let closedByWatchdog = false;
    const check = (): void => {
      if (!exited()) {
        idleTimer = setTimeout(check, 250);
        return;
      }
      closedByWatchdog = true;
      stream.destroy?.();
    };
    const armIdle = (): void => {
      clearTimeout(idleTimer);
      idleTimer = setTimeout(check, this.logDrainIdleMs);
    };
    const deliver = async (name: StreamName, message: string, timestamp: number): Promise<void> => {
      counted();
      try {
        const r = hooks.onLine({ stream: name, message, timestamp });
        if (r) await r;
      } catch (err) {
        throw new SinkFailure(err);
      }
    };

    try {
      armIdle();
      for await (const chunk of stream) {
        clearTimeout(idleTimer);
        const timestamp = this.clock.now();
        for (const frame of demux.push(chunk)) {
          for (const line of splitters[frame.stream].push(frame.payload, timestamp)) {
            await deliver(frame.stream, line.text, line.meta);
          }
        }
        armIdle();
      }
    } catch (err) {
      if (err instanceof SinkFailure) {
        stream.destroy?.();
        throw err.cause;
      }
      // A closed or broken connection: deliver what we have, and say so.
      if (!closedByWatchdog) log.warn({ err }, 'container log stream broke off');
    } finally {
      clearTimeout(idleTimer);
    }
    if (closedByWatchdog) log.warn('container log stream did not end after the container exited; closed it');
    if (demux.leftover > 0) log.warn({ bytes: demux.leftover }, 'container log stream ended inside a frame');
    // The runtime's own errors in the stream: the runner's log, never the job's output.
    if (demux.runtimeErrors.length > 0) log.error({ runtimeErrors: demux.runtimeErrors }, 'the container runtime reported errors in the log stream');
    try {
      for (const name of ['stdout', 'stderr'] as const) {
        for (const line of splitters[name].end()) await deliver(name, line.text, line.meta);
      }
    } catch (err) {
      throw err instanceof SinkFailure ? err.cause : err;
    }
  }

  /** The exit code the runtime recorded, 'gone' when the container no longer exists, undefined when it cannot tell. */
  private async exitState(container: Docker.Container): Promise<number | 'gone' | undefined> {
    try {
      const info = await this.api('container inspect', () => container.inspect());
      return typeof info.State?.ExitCode === 'number' ? info.State.ExitCode : undefined;
    } catch (err) {
      // Docker: "No such container: …"; Podman: "… no such container"
      // (the runtime's own words, in the body: dockerode's message says so for any 404)
      const said = (err as { json?: { message?: unknown } } | null)?.json?.message;
      return statusCodeOf(err) === 404 && typeof said === 'string' && /no such container/i.test(said) ? 'gone' : undefined;
    }
  }

  private async kill(container: Docker.Container, log: Logger): Promise<void> {
    try {
      await this.api('container kill', () => container.kill({ signal: 'SIGKILL' }));
    } catch (err) {
      const code = statusCodeOf(err);
      // 304/409: already stopped or not running.
      if (code === 304 || code === 409) return;
      log.warn({ err }, 'container kill failed');
    }
  }

  private async remove(container: Docker.Container, log: Logger): Promise<void> {
    try {
      await this.api('container remove', () => container.remove({ force: true, v: true }));
      log.debug('container removed');
    } catch (err) {
      if (statusCodeOf(err) === 404) return;
      log.error({ err }, 'container remove failed; it will be removed by the orphan sweep');
    }
  }

  /**
   * Removes every container labelled `orloj.managed=true` (running or not) that
   * also carries all of `labelFilter` (e.g. `{ 'orloj.runner_id': id }`, so one
   * runner only sweeps its own). Returns the removed container ids.
   */
  async removeOrphans(
    labelFilter: Record<string, string> = {},
    /** A further test on each container's labels: only those it accepts are removed. */
    accept: (labels: Record<string, string>) => boolean = () => true,
  ): Promise<string[]> {
    const labels = [`${MANAGED_LABEL}=true`, ...Object.entries(labelFilter).map(([k, v]) => `${k}=${v}`)];
    const list = await this.api('container list', () =>
      this.docker.listContainers({ all: true, filters: { label: labels } }),
    );
    const removed: string[] = [];
    for (const info of list) {
      // Filter again client-side: a runtime that ignored the filter must not cost us foreign containers.
      if (info.Labels?.[MANAGED_LABEL] !== 'true') continue;
      if (!Object.entries(labelFilter).every(([k, v]) => info.Labels?.[k] === v)) continue;
      if (!accept(info.Labels ?? {})) continue;
      try {
        await this.api('container remove', () => this.docker.getContainer(info.Id).remove({ force: true, v: true }));
        removed.push(info.Id);
      } catch (err) {
        if (statusCodeOf(err) === 404) continue;
        this.logger.warn({ err, containerId: info.Id }, 'could not remove an orphaned container');
      }
    }
    if (removed.length > 0) this.logger.info({ count: removed.length }, 'removed orphaned containers');
    return removed;
  }

  private createOptions(spec: ContainerRunSpec): Docker.ContainerCreateOptions {
    const memoryBytes = Math.round((spec.memoryMb ?? DEFAULT_MEMORY_MB) * 1024 * 1024);
    const env = Object.entries(spec.env)
      .filter(([k]) => k.length > 0 && !k.includes('=') && !k.includes('\0'))
      .map(([k, v]) => `${k}=${v}`);
    return {
      name: containerName(spec.jobId),
      Image: normalizeImageRef(spec.image),
      ...(spec.cmd ? { Cmd: spec.cmd } : {}),
      Env: env,
      Labels: { ...spec.labels, [MANAGED_LABEL]: 'true', [JOB_ID_LABEL]: spec.jobId },
      Tty: false,
      OpenStdin: false,
      AttachStdin: false,
      AttachStdout: false,
      AttachStderr: false,
      HostConfig: {
        Memory: memoryBytes,
        MemorySwap: memoryBytes,
        PidsLimit: DEFAULT_PIDS_LIMIT,
        ...(spec.cpus ? { NanoCpus: Math.round(spec.cpus * 1e9) } : {}),
        CapDrop: ['ALL'],
        SecurityOpt: ['no-new-privileges'],
        Privileged: false,
        NetworkMode: spec.network === 'bridge' ? 'bridge' : 'none',
        Binds: [],
        Mounts: [],
        AutoRemove: false,
        PublishAllPorts: false,
      },
    };
  }

  /** One API call with a time limit; a timeout counts as the runtime being unavailable. */
  private api<T>(what: string, call: () => Promise<T>, ms: number = this.apiTimeoutMs): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => reject(new ApiTimeoutError(what, ms)), ms);
      call().then(
        (v) => {
          clearTimeout(timer);
          resolve(v);
        },
        (e: unknown) => {
          clearTimeout(timer);
          reject(e instanceof Error ? e : new Error(String(e)));
        },
      );
    });
  }
}

/** The attached output of a container: Docker's multiplexed stream. */
type LogStream = NodeJS.ReadableStream & AsyncIterable<Buffer> & { destroy?: (err?: Error) => void };

/** Wraps an error thrown by onLine, so it is not mistaken for a stream failure. */
class SinkFailure extends Error {
  constructor(override readonly cause: unknown) {
    super('onLine failed');
  }
}
