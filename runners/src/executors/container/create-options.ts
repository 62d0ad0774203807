/**
 * Isolation: how every container is created (docs/container-runtime.md). No
 * privileged mode, all capabilities dropped, no-new-privileges, no network
 * unless `bridge` is asked for (never the host network), memory and pids
 * limits, an optional CPU limit, no host mounts. The labels let a crashed
 * runner's leftovers be found and swept by their owner only.
 */
import { randomBytes } from 'node:crypto';
import type Docker from 'dockerode';
import { CONFIG_DEFAULTS } from '@orloj/common/config';
import { normalizeImageRef } from './image.js';
import type { ContainerRunSpec } from './types.js';

export const MANAGED_LABEL = 'orloj.managed';
export const JOB_ID_LABEL = 'orloj.job_id';

/** Configuration's defaults (CONFIG_DEFAULTS in common's config.ts), under the names the executor exports. */
export const DEFAULT_MEMORY_MB = CONFIG_DEFAULTS.containers.memoryMb;
export const DEFAULT_PIDS_LIMIT = CONFIG_DEFAULTS.containers.pidsLimit;

/** Container names allow [a-zA-Z0-9][a-zA-Z0-9_.-]*. */
function containerName(jobId: string): string {
  const safe = jobId.replace(/[^a-zA-Z0-9_.-]/g, '-').slice(0, 100);
  return `orloj-${safe}-${randomBytes(4).toString('hex')}`;
}

export function createOptions(spec: ContainerRunSpec): Docker.ContainerCreateOptions {
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
      // The executor removes the container itself, after reading its exit
      // state: with AutoRemove a container removed behind our back could not
      // be told from one that exited.
      AutoRemove: false,
      PublishAllPorts: false,
    },
  };
}
