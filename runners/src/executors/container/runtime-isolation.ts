/**
 * What the runtime offers to keep a container's root from being the host's
 * root, asked once per executor (docs/container-runtime.md, "User namespaces"):
 *
 * - Podman (rootful or rootless) gives each container a user namespace of its
 *   own with `UsernsMode: auto`: container uid 0 is an unused subordinate host
 *   uid from the `containers` ranges in /etc/subuid and /etc/subgid.
 * - Docker has no per-container user namespace in its API (`UsernsMode` takes
 *   only `host`); its daemon-wide `userns-remap` does the same for every
 *   container. Without it, container root is host root (capabilities dropped,
 *   read-only root): said once in the log, at the first container.
 *
 * CONTAINER_USERNS=host turns the Podman user namespace off (hosts that cannot
 * give subordinate ids).
 */
import type { Logger } from '@orloj/common/logging';
import type { Isolation } from './create-options.js';
import { statusCodeOf, type RuntimeClient } from './runtime-client.js';

export type UsernsSetting = 'auto' | 'host';

export interface RuntimeIsolationOptions {
  scratchMb: number;
  userns: UsernsSetting;
  logger: Logger;
}

export class RuntimeIsolation {
  static readonly MISSING_ID_RANGES =
    'Podman has no subordinate ids for per-container user namespaces: add "containers:2147483647:2147483648" to /etc/subuid and /etc/subgid, or set CONTAINER_USERNS=host';

  private known: Isolation | undefined;

  constructor(
    private readonly client: RuntimeClient,
    private readonly options: RuntimeIsolationOptions,
  ) {}

  /** The isolation of every container on this runtime; asks the runtime the first time (a failed ask is asked again). */
  async get(): Promise<Isolation> {
    if (this.known) return this.known;
    const { scratchMb, userns, logger } = this.options;
    if (userns === 'host') {
      this.known = { scratchMb };
      return this.known;
    }
    if (await this.client.isPodman()) {
      this.known = { scratchMb, usernsMode: 'auto' };
    } else {
      const info = (await this.client.call('info', () => this.client.docker.info())) as { SecurityOptions?: unknown };
      const options = Array.isArray(info.SecurityOptions) ? info.SecurityOptions.map(String) : [];
      if (!options.some((o) => o.includes('name=userns'))) {
        logger.warn(
          "the Docker daemon runs containers without user namespaces: a container's root is the host's root (capabilities dropped, read-only root file system); enable the daemon's userns-remap (docs/container-runtime.md)",
        );
      }
      this.known = { scratchMb };
    }
    return this.known;
  }

  /** Whether a failed create says Podman has no subordinate ids to give a user namespace (a host setup problem, not the job's). */
  missingIdRanges(err: unknown): boolean {
    const said = (err as { json?: { message?: unknown } } | null)?.json?.message;
    const text = typeof said === 'string' ? said : err instanceof Error ? err.message : '';
    return statusCodeOf(err) === 500 && this.known?.usernsMode === 'auto' && /not find enough available IDs|no subordinate|subuid/i.test(text);
  }
}
