/**
 * CONTAINER job executor: runs one job as a container through the Docker Engine
 * API (Docker or Podman's compatible service) with dockerode, streams its
 * stdout/stderr as lines, enforces the time limit and always removes the
 * container afterwards.
 *
 * The parts live in `container/`, one idea each:
 * - `runtime-client.ts`: the connection, time-limited calls, reading failures;
 * - `image.ts`: images present or pulled (under the runner's image policy);
 * - `create-options.ts`: isolation and labels of every container;
 * - `runtime-isolation.ts`: what the runtime offers (a user namespace per container on Podman);
 * - `container-run.ts`: one run — attach, start, watch, exit, outcome, remove;
 * - `run-watchdog.ts`: the run's cancellation, time limit and health timers;
 * - `output-reader.ts`: the attached output, demultiplexed into lines.
 *
 * Containers are labelled `orloj.managed=true` and `orloj.job_id=<id>` so
 * leftovers can be found after a crash ({@link ContainerExecutor.removeOrphans}).
 * Reasons are always the fixed sentences of `reasons`; library error text is
 * logged, never put in a reason.
 */
import type Docker from 'dockerode';
import { systemClock, type Clock } from '@orloj/common/core';
import { reasons } from '@orloj/common/domain';
import type { Logger } from '@orloj/common/logging';
import { SETTINGS } from '@orloj/common/config';
import { ContainerRun } from './container/container-run.js';
import { createOptions, MANAGED_LABEL } from './container/create-options.js';
import { ImageStore, type EnsureImageOptions, type EnsureImageResult } from './container/image.js';
import { RuntimeIsolation, type UsernsSetting } from './container/runtime-isolation.js';
import { isUnavailable, RuntimeClient, statusCodeOf, type CallObserver } from './container/runtime-client.js';
import type { ContainerRunHooks, ContainerRunResult, ContainerRunSpec, RunOutcome } from './container/types.js';

export { DEFAULT_MEMORY_MB, DEFAULT_PIDS_LIMIT, JOB_ID_LABEL, MANAGED_LABEL } from './container/create-options.js';
export { imageCarriesName, type EnsureImageResult } from './container/image.js';
export { dockerOptionsFromHost, type CallObserver } from './container/runtime-client.js';
export type { ContainerLogLine, ContainerRunHooks, ContainerRunResult, ContainerRunSpec } from './container/types.js';

/** Each call to the container runtime's API (create, start, kill, inspect, remove). */
const API_TIMEOUT_MS = 30_000;
/** A whole image pull. */
const PULL_TIMEOUT_MS = 5 * 60_000;
/** How long a run waits for the rest of a container's output after it exits. */
const LOG_DRAIN_IDLE_MS = 10_000;
/** How often a long run pings the runtime. */
const HEALTH_CHECK_MS = 5_000;

export interface ContainerExecutorOptions {
  /** A DOCKER_HOST url: `unix:///path/to/docker.sock`, a bare socket path, or `tcp://host:port`. */
  dockerHost: string;
  logger: Logger;
  clock?: Clock;
  /** Limit for one short API call (API_TIMEOUT_MS unless set). */
  apiTimeoutMs?: number;
  /** Limit for a whole image pull (PULL_TIMEOUT_MS unless set). */
  pullTimeoutMs?: number;
  /**
   * After the container has exited, how long the log stream may stay silent
   * before it is closed (guards against a runtime that never ends the stream);
   * LOG_DRAIN_IDLE_MS unless set. Time spent inside onLine does not count.
   */
  logDrainIdleMs?: number;
  /**
   * While a container runs, the runtime is pinged this often (and at once if
   * the log stream breaks off early); a failed ping ends the run with
   * SYSTEM_ERROR instead of waiting forever on a dead connection (HEALTH_CHECK_MS unless set).
   */
  healthCheckMs?: number;
  /** Told how long each runtime call and step took, for profiles. */
  onCall?: CallObserver;
  /** Size of each writable tmpfs over the read-only root (CONTAINER_SCRATCH_MB); default 256 MiB. */
  scratchMb?: number;
  /** CONTAINER_USERNS: `auto` (default) gives each container a user namespace where the runtime can (Podman); `host` never does. */
  userns?: UsernsSetting;
}

export class ContainerExecutor {
  private readonly client: RuntimeClient;
  private readonly images: ImageStore;
  private readonly logger: Logger;
  private readonly clock: Clock;
  private readonly logDrainIdleMs: number;
  private readonly healthCheckMs: number;
  private readonly isolation: RuntimeIsolation;

  constructor(options: ContainerExecutorOptions) {
    this.logger = options.logger;
    this.client = new RuntimeClient(options.dockerHost, options.apiTimeoutMs ?? API_TIMEOUT_MS, this.logger, options.onCall);
    this.images = new ImageStore(this.client, options.pullTimeoutMs ?? PULL_TIMEOUT_MS, this.logger);
    this.clock = options.clock ?? systemClock;
    this.logDrainIdleMs = options.logDrainIdleMs ?? LOG_DRAIN_IDLE_MS;
    this.healthCheckMs = options.healthCheckMs ?? HEALTH_CHECK_MS;
    this.isolation = new RuntimeIsolation(this.client, {
      scratchMb: options.scratchMb ?? SETTINGS.CONTAINER_SCRATCH_MB.default,
      userns: options.userns ?? 'auto',
      logger: this.logger,
    });
  }

  /** True when the runtime answers its ping endpoint. */
  ping(): Promise<boolean> {
    return this.client.ping();
  }

  /**
   * Makes sure the image is present locally, pulling it when missing. When
   * `beforePull` returns a reason, the image is not pulled and that reason is
   * the result (the runner's image policy: registry allow-list, address guard).
   */
  ensureImage(image: string, options: EnsureImageOptions = {}): Promise<EnsureImageResult> {
    return this.images.ensure(image, options);
  }

  /**
   * Runs one job to its end. Resolves with the outcome once every log line has
   * been passed to onLine and the container has been removed. Rejects only when
   * onLine itself throws (the container is killed and removed first).
   */
  async run(spec: ContainerRunSpec, hooks: ContainerRunHooks): Promise<ContainerRunResult> {
    const log = this.logger.child({ jobId: spec.jobId, image: spec.image });
    if (hooks.signal?.aborted) return { status: 'CANCELED', finishedAt: this.clock.now(), lineCount: 0 };
    const created = await this.create(spec, log);
    if (!('id' in created)) return { ...created, finishedAt: this.clock.now(), lineCount: 0 };

    const run = new ContainerRun(
      { client: this.client, clock: this.clock, healthCheckMs: this.healthCheckMs, logDrainIdleMs: this.logDrainIdleMs },
      created,
      spec,
      hooks,
      log.child({ containerId: created.id }),
    );
    const outcome = await run.execute();
    return {
      ...outcome,
      containerId: created.id,
      ...(run.startedAt === undefined ? {} : { startedAt: run.startedAt }),
      finishedAt: run.finishedAt ?? this.clock.now(),
      lineCount: run.lineCount,
    };
  }

  /** Creates the job's container from the image as present (never pulled, its name checked); the outcome when it could not be created. */
  private async create(spec: ContainerRunSpec, log: Logger): Promise<Docker.Container | RunOutcome> {
    const image = await this.images.present(spec.image);
    if (!image.ok) return { status: 'FAILED', reason: image.reason };
    try {
      const isolation = await this.isolation.get();
      return await this.client.call('container create', () => this.client.docker.createContainer(createOptions(spec, isolation)));
    } catch (err) {
      if (isUnavailable(err)) {
        log.error({ err }, 'container runtime unavailable while creating a container');
        return { status: 'FAILED', reason: reasons.runtimeUnavailable() };
      }
      if (statusCodeOf(err) === 404) {
        log.warn({ err }, 'container image missing at create');
        return { status: 'FAILED', reason: reasons.imagePullFailed() };
      }
      if (this.isolation.missingIdRanges(err)) {
        log.error({ err }, RuntimeIsolation.MISSING_ID_RANGES);
        return { status: 'FAILED', reason: reasons.runtimeUnavailable() };
      }
      log.warn({ err }, 'container create failed');
      return { status: 'FAILED', reason: reasons.containerStartFailed() };
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
    const { docker } = this.client;
    const list = await this.client.call('container list', () => docker.listContainers({ all: true, filters: { label: labels } }));
    const removed: string[] = [];
    for (const info of list) {
      // Filter again client-side: a runtime that ignored the filter must not cost us foreign containers.
      if (info.Labels?.[MANAGED_LABEL] !== 'true') continue;
      if (!Object.entries(labelFilter).every(([k, v]) => info.Labels?.[k] === v)) continue;
      if (!accept(info.Labels ?? {})) continue;
      try {
        await this.client.call('container remove', () => docker.getContainer(info.Id).remove({ force: true, v: true }));
        removed.push(info.Id);
      } catch (err) {
        if (statusCodeOf(err) === 404) continue;
        this.logger.warn({ err, containerId: info.Id }, 'could not remove an orphaned container');
      }
    }
    if (removed.length > 0) this.logger.info({ count: removed.length }, 'removed orphaned containers');
    return removed;
  }
}
