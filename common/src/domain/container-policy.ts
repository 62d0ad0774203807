import type { FieldError } from '../core/errors.js';
import type { ContainerPayload } from './workflow.js';

/**
 * Where a CONTAINER image comes from, and whether the operator's limits allow a
 * payload (docs/security.md, "Containers, registries, resources and fairness").
 * Checked by the api at create/update time and again by the runner before it
 * pulls or runs anything, because the settings or DNS may have changed since.
 */

/** Operator maxima and switches for CONTAINER workflows; checked at validation and again by the runner. */
export interface ContainerLimits {
  /**
   * Registries images may come from (`docker.io`, `ghcr.io`, `registry.example.com:5000`).
   * `localhost` means locally present images (e.g. built with `podman build`), never pulled.
   */
  readonly registries: readonly string[];
  /** Whether a payload may ask for `"network": "bridge"`. */
  readonly networkEnabled: boolean;
  readonly maxMemoryMb: number;
  readonly maxCpus: number;
  readonly maxTimeoutMs: number;
  /** Log lines kept per job; the rest are counted, not stored. */
  readonly maxLogLines: number;
  /** Log bytes (UTF-8 message text) kept per job. */
  readonly maxLogBytes: number;
}

/** The registry an image reference names, the way Docker and Podman read it. */
export interface ImageRegistry {
  /** `docker.io`, `ghcr.io`, `localhost`, `127.0.0.1:5000`: lower case, with the port when one is given. */
  readonly host: string;
  /** The host without port or IPv6 brackets: what a pull resolves and connects to. */
  readonly hostname: string;
  /** `localhost` without a port: locally present images only, which orloj never pulls. */
  readonly localOnly: boolean;
}

/** The reference split at its registry: the host as written (or Docker Hub's) and the rest. */
function splitRegistry(image: string): { host: string; path: string } {
  const slash = image.indexOf('/');
  const first = slash === -1 ? '' : image.slice(0, slash);
  const isRegistry = first !== '' && (first.includes('.') || first.includes(':') || first.toLowerCase() === 'localhost');
  if (!isRegistry) return { host: 'docker.io', path: image };
  const host = first.toLowerCase();
  return { host: host === 'index.docker.io' || host === 'registry-1.docker.io' ? 'docker.io' : host, path: image.slice(slash + 1) };
}

/**
 * The first path component is a registry when it holds a `.` or a `:` or is
 * `localhost`; otherwise the image is on Docker Hub (`alpine:3` is
 * `docker.io/library/alpine:3`).
 */
export function imageRegistry(image: string): ImageRegistry {
  const { host } = splitRegistry(image);
  const hostname = host.startsWith('[') ? host.slice(1, host.indexOf(']')) : host.replace(/:\d+$/, '');
  return { host, hostname, localOnly: host === 'localhost' };
}

/**
 * The reference spelled out in full, as Docker reads it: registry, repository
 * (`library/` for Docker Hub's own images) and a tag (`latest` when neither a
 * tag nor a digest is given): `alpine` is `docker.io/library/alpine:latest`.
 * The runner only ever hands this form to the runtime, so no runtime-specific
 * reading of a short name (Podman's search of its local store, which finds
 * `localhost/team/app:1` for `team/app:1`) can pick another image.
 */
export function qualifiedImageRef(image: string): string {
  const { host, path } = splitRegistry(image);
  const repoPath = host === 'docker.io' && !path.includes('/') ? `library/${path}` : path;
  if (repoPath.includes('@')) return `${host}/${repoPath}`;
  const tagged = repoPath.slice(repoPath.lastIndexOf('/') + 1).includes(':');
  return `${host}/${tagged ? repoPath : `${repoPath}:latest`}`;
}

/**
 * An image id rather than a name: `sha256:<hex>` or the 64 hex digits alone.
 * A runtime looks ids up in its local store whatever registry they came from,
 * so they would bypass CONTAINER_REGISTRIES. (Docker also refuses 64 hex
 * digits as a repository name.) A short id prefix is a valid name and is read
 * as one (`docker.io/library/9578d416:latest`), never as an id.
 */
export function isImageId(image: string): boolean {
  return /^sha256:/i.test(image) || /^[0-9a-f]{64}$/i.test(image);
}

/** Whether the operator's CONTAINER_REGISTRIES lets images come from this registry. */
export function registryAllowed(registry: ImageRegistry, allowed: readonly string[]): boolean {
  return allowed.includes(registry.host);
}

/** What the operator's limits refuse in a (valid) CONTAINER payload, each naming its field. */
export function containerLimitErrors(payload: ContainerPayload, limits: ContainerLimits): FieldError[] {
  const errors: FieldError[] = [];
  const registry = imageRegistry(payload.image);
  if (isImageId(payload.image)) {
    errors.push({ field: 'payload.image', message: 'is an image id; name the image by repository and tag or digest (e.g. docker.io/library/alpine:3)' });
  } else if (!registryAllowed(registry, limits.registries)) {
    errors.push({
      field: 'payload.image',
      message: `names the registry "${registry.host}", which this installation does not pull from (allowed: ${limits.registries.join(', ')})`,
    });
  }
  if (payload.network !== 'none' && !limits.networkEnabled) {
    errors.push({ field: 'payload.network', message: 'must be "none": networked containers are not enabled on this installation' });
  }
  if (payload.memory_mb !== undefined && payload.memory_mb > limits.maxMemoryMb) {
    errors.push({ field: 'payload.memory_mb', message: `must be at most ${limits.maxMemoryMb} on this installation` });
  }
  if (payload.cpus !== undefined && payload.cpus > limits.maxCpus) {
    errors.push({ field: 'payload.cpus', message: `must be at most ${limits.maxCpus} on this installation` });
  }
  if (payload.timeout > limits.maxTimeoutMs) {
    errors.push({ field: 'payload.timeout', message: `must be at most ${limits.maxTimeoutMs / 1000}s on this installation` });
  }
  return errors;
}
