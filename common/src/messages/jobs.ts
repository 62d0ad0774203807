import { checkFromMessage, type CheckResult, type CheckResultMessage } from '../domain/check.js';
import { reasons, type JobReason, type JobStatus } from '../domain/job.js';
import { decoded, unusable, type Decoded } from './table.js';
import { isId, isInt, isPositiveInt, isRecord, readReason } from './read.js';

/**
 * The messages of a job's and a build's run: scheduler → runners (job.run,
 * build.run, job.stop) and runners → scheduler (job.started, job.heartbeat,
 * job.finished, build.finished), each with its decoder.
 */

export interface JobRunMessage {
  job_id: string;
  workflow_id: string;
  /** The attempt this message is for; events about other attempts are ignored. */
  attempt: number;
  kind: 'HEARTBEAT' | 'CONTAINER';
  /** The workflow payload text as stored (runners parse and validate it themselves). */
  payload: string;
  log_retention: boolean;
}

/**
 * A job.run as a runner reads it. `problem`: identifiable (job and attempt)
 * but unusable, so the attempt is reported FAILED rather than left QUEUED
 * until the queue timeout.
 */
export interface JobRunRead extends JobRunMessage {
  problem?: string;
}

export function decodeJobRun(body: unknown): Decoded<JobRunRead> {
  if (!isRecord(body)) return unusable('the body is not an object');
  const { job_id, attempt } = body;
  if (!isId(job_id)) return unusable('job_id is missing');
  if (!isPositiveInt(attempt)) return unusable('attempt must be a positive integer');
  const kind = body.kind === 'HEARTBEAT' || body.kind === 'CONTAINER' ? body.kind : undefined;
  const job: JobRunMessage = {
    job_id,
    attempt,
    workflow_id: typeof body.workflow_id === 'string' ? body.workflow_id : '',
    kind: kind ?? 'HEARTBEAT',
    payload: typeof body.payload === 'string' ? body.payload : '',
    log_retention: body.log_retention === true,
  };
  if (kind === undefined) return decoded({ ...job, problem: 'kind must be HEARTBEAT or CONTAINER' });
  if (typeof body.payload !== 'string') return decoded({ ...job, problem: 'payload must be a string' });
  return decoded(job);
}

export interface BuildRunMessage {
  workflow_id: string;
  build_token: number;
  image: string;
}

export function decodeBuildRun(body: unknown): Decoded<BuildRunMessage> {
  if (!isRecord(body)) return unusable('the body is not an object');
  const { workflow_id, build_token, image } = body;
  if (!isId(workflow_id) || !isInt(build_token) || typeof image !== 'string' || image === '') {
    return unusable('a build.run needs workflow_id, an integer build_token and an image');
  }
  return decoded({ workflow_id, build_token, image });
}

export interface JobStopMessage {
  job_id: string;
  /** Only this attempt (a stale execution); absent: whichever attempt runs. */
  attempt?: number;
  reason: JobReason;
}

export function decodeJobStop(body: unknown): Decoded<JobStopMessage> {
  if (!isRecord(body) || !isId(body.job_id)) return unusable('job_id is missing');
  // A stop for one (stale) attempt must not touch the job's current attempt.
  const attempt = isPositiveInt(body.attempt) ? body.attempt : undefined;
  const reason = readReason(body.reason) ?? reasons.cancellationUnavailable();
  return decoded({ job_id: body.job_id, ...(attempt === undefined ? {} : { attempt }), reason });
}

export interface JobStartedMessage {
  job_id: string;
  attempt: number;
  runner_id: string;
  started_at: number;
  container_id?: string;
}

/** The fields every runner event about an attempt carries. */
function attemptOf(body: unknown): Decoded<{ job_id: string; attempt: number; runner_id: string; fields: Record<string, unknown> }> {
  if (!isRecord(body)) return unusable('the body is not an object');
  const { job_id, attempt, runner_id } = body;
  if (!isId(job_id)) return unusable('job_id is missing');
  if (!isPositiveInt(attempt)) return unusable('attempt must be a positive integer');
  if (typeof runner_id !== 'string') return unusable('runner_id must be a string');
  return decoded({ job_id, attempt, runner_id, fields: body });
}

export function decodeJobStarted(body: unknown): Decoded<JobStartedMessage> {
  const head = attemptOf(body);
  if (!head.ok) return head;
  const { job_id, attempt, runner_id, fields } = head.value;
  if (!isInt(fields.started_at)) return unusable('started_at must be an integer');
  const container = typeof fields.container_id === 'string' && fields.container_id !== '' ? { container_id: fields.container_id } : {};
  return decoded({ job_id, attempt, runner_id, started_at: fields.started_at, ...container });
}

export interface JobHeartbeatMessage {
  job_id: string;
  attempt: number;
  runner_id: string;
}

export function decodeJobHeartbeat(body: unknown): Decoded<JobHeartbeatMessage> {
  const head = attemptOf(body);
  if (!head.ok) return head;
  const { job_id, attempt, runner_id } = head.value;
  return decoded({ job_id, attempt, runner_id });
}

export type FinishedStatus = Extract<JobStatus, 'COMPLETED' | 'FAILED' | 'CANCELED'>;

export interface JobFinishedMessage {
  job_id: string;
  attempt: number;
  runner_id: string;
  status: FinishedStatus;
  reason?: JobReason;
  /** Whether the failure was the system's (runtime unavailable…) and may be retried on another runner. */
  system_failure?: boolean;
  started_at: number;
  finished_at: number;
  container_id?: string;
  /** The attempt's log reached the per-job cap (JOB_LOG_MAX_LINES / JOB_LOG_MAX_MB); absent: it did not. */
  log_truncated?: boolean;
  /** HEARTBEAT jobs: what the request did (absent from older runners; the result stands without it). */
  check?: CheckResultMessage;
}

/**
 * A job.finished as the scheduler reads it. `check`: null when the message
 * carried one that is malformed (the result stands without it), absent when
 * it carried none. An unusable `reason` reads as absent (the default applies).
 */
export interface JobFinishedRead extends Omit<JobFinishedMessage, 'check'> {
  check?: CheckResult | null;
}

const FINISHED: readonly unknown[] = ['COMPLETED', 'FAILED', 'CANCELED'] satisfies FinishedStatus[];

function isFinishedStatus(value: unknown): value is FinishedStatus {
  return FINISHED.includes(value);
}

export function decodeJobFinished(body: unknown): Decoded<JobFinishedRead> {
  const head = attemptOf(body);
  if (!head.ok) return head;
  const { job_id, attempt, runner_id, fields: m } = head.value;
  if (!isFinishedStatus(m.status)) return unusable('status must be COMPLETED, FAILED or CANCELED');
  if (!isInt(m.started_at) || !isInt(m.finished_at)) return unusable('started_at and finished_at must be integers');
  const reason = readReason(m.reason);
  return decoded({
    job_id,
    attempt,
    runner_id,
    status: m.status,
    started_at: m.started_at,
    finished_at: m.finished_at,
    ...(reason === undefined ? {} : { reason }),
    ...(m.system_failure === true ? { system_failure: true } : {}),
    ...(typeof m.container_id === 'string' && m.container_id !== '' ? { container_id: m.container_id } : {}),
    ...(m.log_truncated === true ? { log_truncated: true } : {}),
    ...(m.check === undefined ? {} : { check: checkFromMessage(m.check) ?? null }),
  });
}

export interface BuildFinishedMessage {
  workflow_id: string;
  build_token: number;
  ok: boolean;
  reason?: JobReason;
}

export function decodeBuildFinished(body: unknown): Decoded<BuildFinishedMessage> {
  if (!isRecord(body)) return unusable('the body is not an object');
  const { workflow_id, build_token, ok } = body;
  if (!isId(workflow_id) || !isInt(build_token) || typeof ok !== 'boolean') return unusable('a build.finished needs workflow_id, an integer build_token and ok');
  const reason = readReason(body.reason);
  return decoded({ workflow_id, build_token, ok, ...(reason === undefined ? {} : { reason }) });
}
