/**
 * Images: a job's image must be present before its container is created.
 * The runner's image policy (registry allow-list, address guard) decides in
 * `beforePull` whether a missing image may be pulled at all.
 */
import { reasons, type JobReason } from '@orloj/common/domain';
import type { Logger } from '@orloj/common/logging';
import { ApiTimeoutError, isUnavailable, statusCodeOf, type RuntimeClient } from './runtime-client.js';

export type EnsureImageResult = { ok: true } | { ok: false; reason: JobReason };

export interface EnsureImageOptions {
  /** A reason here means: do not pull, fail with it. */
  beforePull?: () => Promise<JobReason | undefined> | JobReason | undefined;
}

/** Adds `:latest` when the reference names neither a tag nor a digest (a pull would fetch every tag). */
export function normalizeImageRef(image: string): string {
  if (image.includes('@')) return image;
  const lastSlash = image.lastIndexOf('/');
  return image.slice(lastSlash + 1).includes(':') ? image : `${image}:latest`;
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
    const ref = normalizeImageRef(image);
    const log = this.logger.child({ image: ref });
    try {
      await this.inspect(ref);
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
      await this.inspect(ref);
      log.info('image pulled');
      return { ok: true };
    } catch (err) {
      if (isUnavailable(err) && !(await this.client.ping())) {
        log.error({ err }, 'container runtime unavailable while pulling an image');
        return { ok: false, reason: reasons.runtimeUnavailable() };
      }
      log.warn({ err }, 'image pull failed');
      return { ok: false, reason: reasons.imagePullFailed() };
    }
  }

  private async inspect(ref: string): Promise<void> {
    await this.client.call('image inspect', () => this.client.docker.getImage(ref).inspect());
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
