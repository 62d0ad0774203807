import { REASON_CODES, reasons, type JobReason, type ReasonCode } from '@orloj/common/domain';
import type { BuildRunMessage, JobRunMessage } from '@orloj/common/messages';

/**
 * Shape checks for message bodies. The envelope proved who sent a message,
 * not that its producer (perhaps another version) sent the shape we expect.
 */

export type JobRunRead =
  | { ok: true; job: JobRunMessage; problem?: undefined }
  /** Identifiable, but unusable: the attempt is reported FAILED rather than left QUEUED forever. */
  | { ok: true; job: JobRunMessage; problem: string }
  | { ok: false; problem: string };

export function readJobRun(body: unknown): JobRunRead {
  if (!isRecord(body)) return { ok: false, problem: 'the body is not an object' };
  const { job_id, attempt } = body;
  if (!isId(job_id)) return { ok: false, problem: 'job_id is missing' };
  if (!Number.isSafeInteger(attempt) || (attempt as number) < 1) return { ok: false, problem: 'attempt must be a positive integer' };
  const kind = body.kind === 'HEARTBEAT' || body.kind === 'CONTAINER' ? body.kind : undefined;
  const job: JobRunMessage = {
    job_id,
    attempt: attempt as number,
    workflow_id: typeof body.workflow_id === 'string' ? body.workflow_id : '',
    kind: kind ?? 'HEARTBEAT',
    payload: typeof body.payload === 'string' ? body.payload : '',
    log_retention: body.log_retention === true,
  };
  if (kind === undefined) return { ok: true, job, problem: 'kind must be HEARTBEAT or CONTAINER' };
  if (typeof body.payload !== 'string') return { ok: true, job, problem: 'payload must be a string' };
  return { ok: true, job };
}

export function readBuildRun(body: unknown): BuildRunMessage | undefined {
  if (!isRecord(body)) return undefined;
  const { workflow_id, build_token, image } = body;
  if (!isId(workflow_id) || !Number.isSafeInteger(build_token) || typeof image !== 'string' || image === '') return undefined;
  return { workflow_id, build_token: build_token as number, image };
}

export function readJobStop(body: unknown): { job_id: string; attempt?: number; reason: JobReason } | undefined {
  if (!isRecord(body) || !isId(body.job_id)) return undefined;
  // A stop for one (stale) attempt must not touch the job's current attempt.
  const attempt = typeof body.attempt === 'number' && Number.isSafeInteger(body.attempt) && body.attempt > 0 ? body.attempt : undefined;
  const r = body.reason;
  const reason =
    isRecord(r) && isReasonCode(r.code) && typeof r.message === 'string' && r.message !== ''
      ? { code: r.code, message: r.message }
      : reasons.cancellationUnavailable();
  return { job_id: body.job_id, ...(attempt === undefined ? {} : { attempt }), reason };
}

function isReasonCode(value: unknown): value is ReasonCode {
  return typeof value === 'string' && (REASON_CODES as readonly string[]).includes(value);
}

function isId(value: unknown): value is string {
  return typeof value === 'string' && value !== '' && value.length <= 200;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
