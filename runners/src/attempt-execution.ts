/**
 * Runs one job attempt: a HEARTBEAT check over HTTP, or a CONTAINER job
 * (image policy, pull, leftovers of earlier runs removed, log lines capped
 * and sent to the log sink). Returns the Outcome; settling and reporting
 * it is the attempt's (attempt.ts).
 */
import { onAbort, type AbortLike, type Cancellation } from '@orloj/common/core';
import { parsePayload, reasons, type CheckResultMessage, type ContainerPayload } from '@orloj/common/domain';
import type { Logger } from '@orloj/common/logging';
import type { JobRunMessage } from '@orloj/common/messages';
import { DEFAULT_MEMORY_MB, JOB_ID_LABEL, type ContainerExecutor, type ContainerRunSpec, type EnsureImageResult } from './executors/container.executor.js';
import type { HttpCheckExecutor } from './executors/http-check.executor.js';
import type { ImagePolicy } from './executors/image-policy.js';
import type { AttemptContext, Outcome } from './attempt.js';
import { ATTEMPT_LABEL, INSTALLATION_LABEL, RUNNER_ID_LABEL, WORKFLOW_ID_LABEL } from './container-labels.js';
import type { LogSink } from './log-sink.js';
import { LogCap } from './log-cap.js';

export interface AttemptExecutionDeps {
  runnerId: string;
  installationId: string | undefined;
  log: Logger;
  http: HttpCheckExecutor;
  containers: ContainerExecutor | undefined;
  imagePolicy: ImagePolicy | undefined;
  logSink: LogSink;
  /** Raised by every captured container line. */
  counts: { logLines: number };
}

export class AttemptExecution {
  constructor(private readonly deps: AttemptExecutionDeps) {}

  installationLabel(): Record<string, string> {
    return this.deps.installationId === undefined ? {} : { [INSTALLATION_LABEL]: this.deps.installationId };
  }

  async execute(attempt: AttemptContext): Promise<Outcome> {
    const { job, log, cancel } = attempt;
    if (attempt.problem !== undefined) {
      log.error({ problem: attempt.problem }, 'the job.run message is unusable');
      return { status: 'FAILED', reason: reasons.failureUnavailable() };
    }
    const parsed = parsePayload(job.kind, job.payload);
    if (!parsed.ok) {
      log.warn({ errors: parsed.errors }, 'the workflow payload is invalid');
      return { status: 'FAILED', reason: reasons.failureUnavailable() };
    }
    if (parsed.value.kind === 'HEARTBEAT') {
      const result = await this.deps.http.run(parsed.value.payload, { signal: cancel });
      if (result.status === 'CANCELED') return { status: 'CANCELED' };
      const check: CheckResultMessage = {
        response_time_ms: Math.round(result.durationMs),
        ...(result.statusCode === undefined ? {} : { status_code: result.statusCode }),
        ...(result.status === 'FAILED' ? { failure: result.failure } : {}),
      };
      if (result.status === 'FAILED') return { status: 'FAILED', reason: result.reason, check };
      return { status: 'COMPLETED', check };
    }
    return this.runContainer(attempt, parsed.value.payload, cancel);
  }

  /** ensureImage under the image policy: a refused registry is never pulled, not even looked up. */
  async ensureImage(containers: ContainerExecutor, image: string): Promise<EnsureImageResult> {
    const { imagePolicy } = this.deps;
    if (!imagePolicy) return containers.ensureImage(image);
    const decision = imagePolicy.decide(image);
    if (!decision.ok) return decision;
    return containers.ensureImage(image, { beforePull: decision.beforePull });
  }

  private async runContainer(attempt: AttemptContext, payload: ContainerPayload, cancel: Cancellation): Promise<Outcome> {
    const { job } = attempt;
    const { containers, imagePolicy } = this.deps;
    if (!containers) return { status: 'FAILED', reason: reasons.runtimeUnavailable(), systemFailure: true };
    const refused = imagePolicy?.refuseRun(payload);
    if (refused) return { status: 'FAILED', reason: refused };
    const image = await untilAborted(this.ensureImage(containers, payload.image), cancel);
    if (image === ABORTED) return { status: 'CANCELED' };
    if (!image.ok) return { status: 'FAILED', reason: image.reason };
    const capped = imagePolicy?.resources(payload, DEFAULT_MEMORY_MB);

    const spec: ContainerRunSpec = {
      jobId: job.job_id,
      image: payload.image,
      env: payload.env,
      timeoutMs: payload.timeout,
      network: payload.network,
      labels: { ...this.installationLabel(), [RUNNER_ID_LABEL]: this.deps.runnerId, [WORKFLOW_ID_LABEL]: job.workflow_id, [ATTEMPT_LABEL]: String(job.attempt) },
      ...(payload.cmd ? { cmd: payload.cmd } : {}),
      ...(payload.memory_mb === undefined ? {} : { memoryMb: payload.memory_mb }),
      ...(payload.cpus === undefined ? {} : { cpus: payload.cpus }),
      ...capped,
    };
    await this.removeSuperseded(job);
    return this.runCapturing(attempt, containers, spec, cancel);
  }

  /** Runs the container, its lines numbered, capped and written to the log sink, which is closed in any case. */
  private async runCapturing(attempt: AttemptContext, containers: ContainerExecutor, spec: ContainerRunSpec, cancel: Cancellation): Promise<Outcome> {
    const { job } = attempt;
    const writer = this.deps.logSink.open({
      job_id: job.job_id,
      workflow_id: job.workflow_id,
      attempt: job.attempt,
      log_retention: job.log_retention,
    });
    let sequence = 0;
    const limits = this.deps.imagePolicy?.limits;
    const cap = limits ? new LogCap(limits.maxLogLines, limits.maxLogBytes) : undefined;
    try {
      const result = await containers.run(spec, {
        signal: cancel.signal,
        onLine: (line) => {
          this.deps.counts.logLines += 1;
          switch (cap?.admit(line.message) ?? 'keep') {
            case 'keep':
              return writer.write({ ...line, sequence_num: sequence++ });
            case 'marker':
              attempt.log.warn({ maxLines: cap!.maxLines, maxBytes: cap!.maxBytes }, "the job's log reached the cap; the rest is counted, not stored");
              return writer.write({ stream: 'stderr', message: cap!.marker(), timestamp: line.timestamp, sequence_num: sequence++ });
            default:
              return;
          }
        },
      });
      const extra = {
        ...(result.containerId === undefined ? {} : { containerId: result.containerId }),
        ...(cap?.truncated ? { logTruncated: true } : {}),
      };
      if (result.status === 'FAILED') return { status: 'FAILED', reason: result.reason, ...extra };
      return { status: result.status, ...extra };
    } finally {
      try {
        // Analytics count what was printed, stored or not.
        await writer.close(cap?.truncated ? { lineCount: cap.printed } : undefined);
      } catch (err) {
        attempt.log.error({ err, lines: sequence }, 'the log sink failed to flush the last lines of the job');
      }
    }
  }

  /**
   * Removes what a crashed runner (with a one-off default id nobody will
   * reuse) left of this workflow's earlier work in this installation: runs
   * never overlap, so a container of an older job of the workflow (job ids
   * grow with time), or of an earlier attempt of this job, is a leftover.
   * Never anything newer: a late, stale message cannot cost a live run.
   */
  private async removeSuperseded(job: JobRunMessage): Promise<void> {
    const { containers, log } = this.deps;
    if (!containers || this.deps.installationId === undefined) return;
    try {
      const removed = await containers.removeOrphans({ ...this.installationLabel(), [WORKFLOW_ID_LABEL]: job.workflow_id }, (labels) => {
        const jobId = labels[JOB_ID_LABEL];
        if (jobId === undefined) return false;
        if (jobId !== job.job_id) return jobId < job.job_id;
        const attempt = Number(labels[ATTEMPT_LABEL]);
        return Number.isInteger(attempt) && attempt < job.attempt;
      });
      if (removed.length > 0) log.warn({ jobId: job.job_id, containers: removed }, 'removed containers left behind by earlier runs of this workflow');
    } catch (err) {
      log.warn({ err, jobId: job.job_id }, 'could not look for leftover containers of this workflow');
    }
  }
}

export const ABORTED = Symbol('aborted');

/** The promise's value, or ABORTED as soon as the signal aborts (the work itself carries on unobserved). */
export async function untilAborted<T>(promise: Promise<T>, signal: AbortLike): Promise<T | typeof ABORTED> {
  if (signal.aborted) {
    promise.catch(() => undefined);
    return ABORTED;
  }
  let stopListening: () => void = () => undefined;
  const aborted = new Promise<typeof ABORTED>((resolve) => {
    stopListening = onAbort(signal, () => resolve(ABORTED));
  });
  try {
    return await Promise.race([promise, aborted]);
  } finally {
    stopListening();
    promise.catch(() => undefined);
  }
}
