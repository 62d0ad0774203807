/**
 * The connection to the container runtime (Docker, or Podman's compatible
 * service) through dockerode: DOCKER_HOST parsing, one time limit for every
 * short API call, and how a failed call is read (runtime unavailable, not
 * found, the container gone).
 */
import Docker from 'dockerode';
import type { Logger } from '@orloj/common/logging';

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

export class ApiTimeoutError extends Error {
  readonly code = 'ORLOJ_API_TIMEOUT';
  constructor(what: string, ms: number) {
    super(`${what} did not answer within ${ms} ms`);
  }
}

export function statusCodeOf(err: unknown): number | undefined {
  const s = (err as { statusCode?: unknown } | null)?.statusCode;
  return typeof s === 'number' ? s : undefined;
}

/** True when the call failed because the runtime did not answer (as opposed to answering with an error). */
export function isUnavailable(err: unknown): boolean {
  if (statusCodeOf(err) !== undefined) return false;
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && UNAVAILABLE_CODES.has(code)) return true;
  const message = err instanceof Error ? err.message : '';
  return /socket hang up|connect E|read E/i.test(message);
}

/**
 * True when the runtime said the container does not exist. Docker: "No such
 * container: …"; Podman: "… no such container" (the runtime's own words, in
 * the body: dockerode's message says so for any 404).
 */
export function isNoSuchContainer(err: unknown): boolean {
  const said = (err as { json?: { message?: unknown } } | null)?.json?.message;
  return statusCodeOf(err) === 404 && typeof said === 'string' && /no such container/i.test(said);
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

/** Told how long each runtime call took (ms), answered or not; for profiles (bench/containers.bench.ts). */
export type CallObserver = (what: string, ms: number) => void;

/** What a container's `wait` answers: its exit code. */
export interface WaitAnswer {
  StatusCode?: unknown;
}

/**
 * How often Podman's own wait endpoint looks at the container. Its
 * Docker-compatible `/containers/{id}/wait` looks every microsecond before
 * Podman 4.5 (containers/podman#18150): Debian 12's Podman 4.3 spent a core
 * and a quarter on one waiting runner, the whole time a job ran.
 */
const PODMAN_WAIT_INTERVAL = '250ms';

/**
 * The exit code in Podman's answer to its own wait: the number alone, which
 * dockerode parses as JSON, except 0 (falsy, so it hands over the raw body,
 * `0\n`).
 */
function exitCodeOf(answer: unknown): number | undefined {
  if (typeof answer === 'number') return answer;
  const text = Buffer.isBuffer(answer) ? answer.toString('utf8') : typeof answer === 'string' ? answer : undefined;
  return text !== undefined && /^\s*-?\d+\s*$/.test(text) ? Number(text) : undefined;
}

/** dockerode with a time limit on each short call; a timeout counts as the runtime being unavailable. */
export class RuntimeClient {
  readonly docker: Docker;
  private podman: Promise<boolean> | undefined;

  constructor(
    dockerHost: string,
    /** Limit for one short API call (create, start, kill, inspect, remove). */
    readonly apiTimeoutMs: number,
    private readonly logger: Logger,
    private readonly observer?: CallObserver,
  ) {
    this.docker = new Docker(dockerOptionsFromHost(dockerHost));
  }

  /** One API call with a time limit. */
  call<T>(what: string, call: () => Promise<T>, ms: number = this.apiTimeoutMs): Promise<T> {
    const started = performance.now();
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => reject(new ApiTimeoutError(what, ms)), ms);
      call().then(
        (v) => {
          clearTimeout(timer);
          this.observe(what, started);
          resolve(v);
        },
        (e: unknown) => {
          clearTimeout(timer);
          this.observe(what, started);
          reject(e instanceof Error ? e : new Error(String(e)));
        },
      );
    });
  }

  /** Reports a step that began at `started` (a performance.now() value) to the observer, if any. */
  observe(what: string, started: number): void {
    this.observer?.(what, performance.now() - started);
  }

  /** Whether the runtime is Podman (its version names a Podman component); asked once, again after a failed ask. */
  isPodman(): Promise<boolean> {
    this.podman ??= this.call('version', () => this.docker.version()).then(
      (version) => (version.Components ?? []).some((c) => /podman/i.test(c.Name)),
      (err: unknown) => {
        this.podman = undefined;
        throw err;
      },
    );
    return this.podman;
  }

  /**
   * Waits for the container to stop (no time limit: the caller's watchdog and
   * `signal` bound it). On Podman through its own endpoint, which polls at
   * PODMAN_WAIT_INTERVAL instead of spinning; elsewhere Docker's.
   */
  async waitExit(container: Docker.Container, signal: AbortSignal): Promise<WaitAnswer> {
    // A runtime that cannot say what it is gets Docker's endpoint, which every runtime has.
    if (!(await this.isPodman().catch(() => false))) return (await container.wait({ abortSignal: signal })) as WaitAnswer;
    const code = await new Promise<unknown>((resolve, reject) => {
      this.docker.modem.dial(
        {
          path: `/v4.0.0/libpod/containers/${encodeURIComponent(container.id)}/wait?`,
          method: 'POST',
          abortSignal: signal,
          statusCodes: { 200: true, 400: 'bad parameter', 404: 'no such container', 500: 'server error' },
          options: { condition: ['stopped', 'exited'], interval: PODMAN_WAIT_INTERVAL },
        },
        (err: unknown, data: unknown) => (err ? reject(err instanceof Error ? err : new Error(String(err))) : resolve(data)),
      );
    });
    return { StatusCode: exitCodeOf(code) };
  }

  /** True when the runtime answers its ping endpoint. */
  async ping(): Promise<boolean> {
    try {
      await this.call('ping', () => this.docker.ping(), Math.min(this.apiTimeoutMs, 5_000));
      return true;
    } catch (err) {
      this.logger.debug({ err }, 'container runtime ping failed');
      return false;
    }
  }

  /** Force-removes a container with its anonymous volumes: 'gone' when the runtime no longer had it. */
  async remove(container: Docker.Container, log: Logger): Promise<'removed' | 'gone' | 'failed'> {
    try {
      await this.call('container remove', () => container.remove({ force: true, v: true }));
      log.debug('container removed');
      return 'removed';
    } catch (err) {
      if (statusCodeOf(err) === 404) return 'gone';
      log.error({ err }, 'container remove failed; it will be removed by the orphan sweep');
      return 'failed';
    }
  }

  async kill(container: Docker.Container, log: Logger): Promise<void> {
    try {
      await this.call('container kill', () => container.kill({ signal: 'SIGKILL' }));
    } catch (err) {
      const code = statusCodeOf(err);
      // 304/409: already stopped or not running.
      if (code === 304 || code === 409) return;
      log.warn({ err }, 'container kill failed');
    }
  }
}
