/**
 * Images: a job's image must be present before its container is created.
 * The runner's image policy (registry allow-list, address guard) decides in
 * `beforePull` whether a missing image may be pulled at all.
 *
 * Every spelling of "which image" goes through one name: the reference in
 * full (`qualifiedImageRef`: `alpine` is `docker.io/library/alpine:latest`).
 * Image ids are refused, and the image the runtime finds must carry that
 * name among its tags or digests: Podman reads a short name by searching its
 * local store (`team/app:1` finds `localhost/team/app:1`) and finds a digest
 * under any repository name, so an allowed name alone does not prove the
 * image came from an allowed registry (issue 29).
 */
import type Docker from 'dockerode';
import { isImageId, qualifiedImageRef, reasons, type JobReason } from '@orloj/common/domain';
import type { Logger } from '@orloj/common/logging';
import { ApiTimeoutError, isUnavailable, statusCodeOf, type RuntimeClient } from './runtime-client.js';

export type EnsureImageResult = { ok: true } | { ok: false; reason: JobReason };

export interface EnsureImageOptions {
  /** A reason here means: do not pull, fail with it. */
  beforePull?: () => Promise<JobReason | undefined> | JobReason | undefined;
}

/**
 * Whether an inspected image carries the asked reference (in full) among its
 * tags, or, for a reference with a digest, among its digests (the tag of a
 * `name:tag@digest` reference is ignored, as the runtimes do). Docker lists
 * Docker Hub names in their short form (`alpine:3`), Podman in full: both are
 * read in full before comparing.
 */
export function imageCarriesName(info: Pick<Docker.ImageInspectInfo, 'RepoTags' | 'RepoDigests'>, ref: string): boolean {
  const at = ref.indexOf('@');
  if (at === -1) return (info.RepoTags ?? []).some((tag) => qualifiedImageRef(tag) === ref);
  const withoutTag = ref.slice(0, at).replace(/:[^/:]*$/, '') + ref.slice(at);
  return (info.RepoDigests ?? []).some((digest) => qualifiedImageRef(digest) === withoutTag);
}

export class ImageStore {
  constructor(
    private readonly client: RuntimeClient,
    /** Limit for a whole image pull. */
    private readonly pullTimeoutMs: number,
    private readonly logger: Logger,
  ) {}

  /**
   * Makes sure the image is present locally, pulling it when missing. When
   * `beforePull` returns a reason, the image is not pulled and that reason is
   * the result.
   */
  async ensure(image: string, options: EnsureImageOptions = {}): Promise<EnsureImageResult> {
    const found = await this.find(image);
    if (found !== 'missing') return found;
    const ref = qualifiedImageRef(image);
    const log = this.logger.child({ image: ref });
    const refused = await options.beforePull?.();
    if (refused) {
      log.warn({ reason: refused.message }, 'image missing and not pulled');
      return { ok: false, reason: refused };
    }
    log.info('pulling image');
    try {
      await this.pull(ref);
      const result = this.named(await this.inspect(ref), ref, log);
      if (result.ok) log.info('image pulled');
      return result;
    } catch (err) {
      if (isUnavailable(err) && !(await this.client.ping())) {
        log.error({ err }, 'container runtime unavailable while pulling an image');
        return { ok: false, reason: reasons.runtimeUnavailable() };
      }
      log.warn({ err }, 'image pull failed');
      return { ok: false, reason: reasons.imagePullFailed() };
    }
  }

  /**
   * The image as it is present, never pulled: what a container is created
   * from. Checked again at each run, so that no path to the runtime skips the
   * name check (5 ms on Podman).
   */
  async present(image: string): Promise<EnsureImageResult> {
    const found = await this.find(image);
    return found === 'missing' ? { ok: false, reason: reasons.imagePullFailed() } : found;
  }

  /** Refuses ids; inspects the reference in full and checks the name; 'missing' when the runtime has no such image. */
  private async find(image: string): Promise<EnsureImageResult | 'missing'> {
    if (isImageId(image)) return { ok: false, reason: reasons.imageIdNotAllowed() };
    const ref = qualifiedImageRef(image);
    const log = this.logger.child({ image: ref });
    try {
      return this.named(await this.inspect(ref), ref, log);
    } catch (err) {
      if (isUnavailable(err)) {
        log.error({ err }, 'container runtime unavailable while inspecting an image');
        return { ok: false, reason: reasons.runtimeUnavailable() };
      }
      if (statusCodeOf(err) === 404) return 'missing';
      log.error({ err }, 'image inspect failed');
      return { ok: false, reason: reasons.imagePullFailed() };
    }
  }

  private named(info: Docker.ImageInspectInfo, ref: string, log: Logger): EnsureImageResult {
    if (imageCarriesName(info, ref)) return { ok: true };
    log.warn({ repoTags: info.RepoTags, repoDigests: info.RepoDigests }, 'the image the runtime found does not carry the asked name; not used');
    return { ok: false, reason: reasons.imageNameMismatch() };
  }

  private inspect(ref: string): Promise<Docker.ImageInspectInfo> {
    return this.client.call('image inspect', () => this.client.docker.getImage(ref).inspect());
  }

  /** Reads the pull progress stream to its end; rejects on an error message or a timeout. */
  private async pull(ref: string): Promise<void> {
    const stream = (await this.client.call('image pull', () => this.client.docker.pull(ref))) as NodeJS.ReadableStream &
      AsyncIterable<Buffer> & { destroy?: (err?: Error) => void };
    const timer = setTimeout(() => stream.destroy?.(new ApiTimeoutError('image pull', this.pullTimeoutMs)), this.pullTimeoutMs);
    try {
      let text = '';
      let lastError: string | undefined;
      const handle = (line: string): void => {
        const error = pullError(line);
        if (error !== undefined) lastError = error;
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
}

/** The error one line of pull progress reports, if any. */
function pullError(line: string): string | undefined {
  if (!line.trim()) return undefined;
  try {
    const msg = JSON.parse(line) as { error?: unknown; errorDetail?: { message?: unknown } };
    if (msg.error !== undefined || msg.errorDetail !== undefined) {
      return String(msg.error ?? msg.errorDetail?.message ?? 'unknown pull error');
    }
  } catch {
    // not JSON: progress text from some runtimes; ignore
  }
  return undefined;
}
