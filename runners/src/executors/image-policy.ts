import { isIP } from 'node:net';
import { imageRegistry, isImageId, reasons, registryAllowed, type ContainerPayload, type JobReason } from '@orloj/common/domain';
import type { ContainerLimits } from '@orloj/common/config';
import { AddressGuard, systemResolver, type AddressGuardOptions, type Resolver } from './address-guard.js';

export interface ImagePolicyOptions extends AddressGuardOptions {
  /** The operator's container settings (CONTAINER_REGISTRIES, CONTAINER_NETWORK_ENABLED, the maxima). */
  limits: ContainerLimits;
  /** Resolves registry host names; the system resolver by default (tests inject one). */
  resolver?: Resolver;
}

/** What the runner does about an image before any pull: refuse it, use it only if present, or pull it when missing. */
export type ImageDecision = { ok: false; reason: JobReason } | { ok: true; beforePull: () => Promise<JobReason | undefined> | JobReason | undefined };

/**
 * The runner's side of the container rules (docs/security.md): it applies them
 * again at run time, because the api checked the payload against the settings
 * of its day, and because a registry's DNS can change after the check.
 *
 * - image ids (`sha256:…`, 64 hex digits) are refused: the runtime finds them
 *   in its local store whatever registry they came from;
 * - an image's registry must be in CONTAINER_REGISTRIES, also when the image is
 *   already present (it was pulled under other settings); the executor then
 *   asks the runtime only for the reference in full and uses what it finds only
 *   when it carries that name (container/image.ts);
 * - `localhost/…` images are never pulled: they exist locally or the job fails;
 * - before a pull, the registry host is resolved and every address must pass
 *   the HEARTBEAT address guard (RUNNER_ALLOW_TARGETS / RUNNER_DENY_TARGETS),
 *   so no pull makes the runtime connect to loopback, link-local or a denied range;
 * - network, memory, CPUs and timeout are capped by the maxima.
 */
export class ImagePolicy {
  readonly limits: ContainerLimits;
  private readonly guard: AddressGuard;
  private readonly resolver: Resolver;

  /** Throws when a CIDR is invalid, or when CONTAINER_REGISTRIES names an address the guard refuses (a misconfiguration). */
  constructor(options: ImagePolicyOptions) {
    this.limits = options.limits;
    this.guard = new AddressGuard(options);
    this.resolver = options.resolver ?? systemResolver;
    for (const host of this.limits.registries) {
      const { hostname } = imageRegistry(`${host}/x`);
      const literal = hostname === 'localhost' && host !== 'localhost' ? '127.0.0.1' : isIP(hostname) ? hostname : undefined;
      if (literal !== undefined && !this.guard.isAllowed(literal)) {
        throw new Error(
          `CONTAINER_REGISTRIES names ${host}, an address the runners' address guard refuses; re-allow it with RUNNER_ALLOW_TARGETS if this is intended`,
        );
      }
    }
  }

  /** Whether the image may be used, and how to check its registry before pulling it. */
  decide(image: string): ImageDecision {
    if (isImageId(image)) return { ok: false, reason: reasons.imageIdNotAllowed() };
    const registry = imageRegistry(image);
    if (!registryAllowed(registry, this.limits.registries)) return { ok: false, reason: reasons.registryNotAllowed() };
    if (registry.localOnly) return { ok: true, beforePull: () => reasons.localImageMissing() };
    return { ok: true, beforePull: () => this.checkAddresses(registry.hostname) };
  }

  /** The reason to refuse a payload's run settings, if any. */
  refuseRun(payload: ContainerPayload): JobReason | undefined {
    if (payload.network !== 'none' && !this.limits.networkEnabled) return reasons.networkNotAllowed();
    return undefined;
  }

  /** Resources capped by the maxima: a payload validated under larger maxima gets the current ones. */
  resources(payload: ContainerPayload, defaultMemoryMb: number): { memoryMb: number; cpus: number; timeoutMs: number } {
    return {
      memoryMb: Math.min(payload.memory_mb ?? defaultMemoryMb, this.limits.maxMemoryMb),
      cpus: Math.min(payload.cpus ?? this.limits.maxCpus, this.limits.maxCpus),
      timeoutMs: Math.min(payload.timeout, this.limits.maxTimeoutMs),
    };
  }

  private async checkAddresses(hostname: string): Promise<JobReason | undefined> {
    let addresses: string[];
    if (hostname === 'localhost') addresses = ['127.0.0.1', '::1'];
    else if (isIP(hostname)) addresses = [hostname];
    else {
      try {
        addresses = (await this.resolver(hostname)).map((a) => a.address);
      } catch {
        // Fail closed: a name we could not judge is not handed to the runtime to resolve on its own.
        return reasons.imagePullFailed();
      }
    }
    return addresses.every((a) => this.guard.isAllowed(a)) ? undefined : reasons.registryAddressNotAllowed();
  }
}
