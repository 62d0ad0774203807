/**
 * Isolation: how every container is created (docs/container-runtime.md). No
 * privileged mode, all capabilities dropped, no-new-privileges, no network
 * unless `bridge` is asked for (never the host network), memory and pids
 * limits, an optional CPU limit, no host mounts. Nothing a container does
 * reaches the host's disk: its root file system is read-only, the places
 * programs expect to write (/tmp, /var/tmp, /run) are size-limited tmpfs
 * (memory, counted against the container's memory limit), and the runtime
 * keeps no log file of the output (the runner reads it through attach). Where
 * the runtime offers it, the container's root is an unprivileged host user
 * (a user namespace of its own). The labels let a crashed runner's leftovers
 * be found and swept by their owner only.
 */
import { randomBytes } from 'node:crypto';
import type Docker from 'dockerode';
import { qualifiedImageRef } from '@orloj/common/domain';
import type { ContainerRunSpec } from './types.js';

export const MANAGED_LABEL = 'orloj.managed';
export const JOB_ID_LABEL = 'orloj.job_id';

/** A container's memory limit when its payload names none (capped by CONTAINER_MAX_MEMORY_MB), and its process limit. */
export const DEFAULT_MEMORY_MB = 512;
export const DEFAULT_PIDS_LIMIT = 256;

/** How a container is kept off the host's disk and out of host root: the runner's settings, and what the runtime offers. */
export interface Isolation {
  /** Size of each writable tmpfs (CONTAINER_SCRATCH_MB). */
  scratchMb: number;
  /**
   * Podman's `auto`: a user namespace per container, its root an unused
   * subordinate host uid. undefined: the runtime's default (Docker's daemon-wide
   * `userns-remap` when it is on; host root otherwise).
   */
  usernsMode?: 'auto';
}

/** Where images expect to write; each gets a tmpfs of its own. */
const SCRATCH_PATHS: Readonly<Record<string, string>> = { '/tmp': '1777', '/var/tmp': '1777', '/run': '755' };

/**
 * Size-limited tmpfs mounts for the scratch paths. `exec` because programs
 * unpack and run helpers there (the image could ship any binary anyway);
 * nosuid and nodev as everywhere.
 */
function scratchMounts(scratchMb: number): Record<string, string> {
  return Object.fromEntries(Object.entries(SCRATCH_PATHS).map(([path, mode]) => [path, `rw,exec,nosuid,nodev,size=${scratchMb}m,mode=${mode}`]));
}

/** Container names allow [a-zA-Z0-9][a-zA-Z0-9_.-]*. */
function containerName(jobId: string): string {
  const safe = jobId.replace(/[^a-zA-Z0-9_.-]/g, '-').slice(0, 100);
  return `orloj-${safe}-${randomBytes(4).toString('hex')}`;
}

export function createOptions(spec: ContainerRunSpec, isolation: Isolation): Docker.ContainerCreateOptions {
  const memoryBytes = Math.round((spec.memoryMb ?? DEFAULT_MEMORY_MB) * 1024 * 1024);
  const env = Object.entries(spec.env)
    .filter(([k]) => k.length > 0 && !k.includes('=') && !k.includes('\0'))
    .map(([k, v]) => `${k}=${v}`);
  return {
    name: containerName(spec.jobId),
    Image: qualifiedImageRef(spec.image),
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
      ReadonlyRootfs: true,
      Tmpfs: scratchMounts(isolation.scratchMb),
      // The runner reads the output through attach; a runtime log file would
      // grow on the host's disk at the container's pace (488 MiB in 39 s).
      LogConfig: { Type: 'none', Config: {} },
      ...(isolation.usernsMode ? { UsernsMode: isolation.usernsMode } : {}),
      // The executor removes the container itself, after reading its exit
      // state: with AutoRemove a container removed behind our back could not
      // be told from one that exited.
      AutoRemove: false,
      PublishAllPorts: false,
    },
  };
}
