import { newId } from '../core/ids.js';
import type { CheckResult } from './check.js';
import type { Workflow } from './workflow.js';

/**
 * The job: its record as the store keeps it, how a new one is made, its
 * statuses, triggers and reason codes. How a job moves between statuses (the
 * state table and one unit per transition) is in job-state.ts.
 */

export const JOB_STATUSES = ['PENDING', 'QUEUED', 'RUNNING', 'COMPLETED', 'FAILED', 'CANCELED'] as const;
export type JobStatus = (typeof JOB_STATUSES)[number];
export const TERMINAL_JOB_STATUSES: readonly JobStatus[] = ['COMPLETED', 'FAILED', 'CANCELED'];

export const JOB_TRIGGERS = ['AUTOMATIC', 'MANUAL'] as const;
export type JobTrigger = (typeof JOB_TRIGGERS)[number];

export const REASON_CODES = [
  'TIME_LIMIT_EXCEEDED',
  'NON_ZERO_EXIT',
  'IMAGE_PULL_FAILED',
  'UNEXPECTED_STATUS_CODE',
  'EXECUTION_FAILED',
  'SYSTEM_ERROR',
  'FAILURE_REASON_UNAVAILABLE',
  'WORKFLOW_TERMINATED',
  'WORKFLOW_UPDATED',
  'CANCELLATION_REASON_UNAVAILABLE',
] as const;
export type ReasonCode = (typeof REASON_CODES)[number];

export interface JobReason {
  code: ReasonCode;
  /** A fixed, user-safe sentence plus the numbers that matter; never raw library error text. */
  message: string;
}

/** A job as the store keeps it. */
export interface Job {
  id: string;
  workflowId: string;
  userId: string;
  generation: number;
  trigger: JobTrigger;
  status: JobStatus;
  /** AUTOMATIC: the due slot (unique per workflow); MANUAL: the request time. */
  slotAt: number;
  scheduledAt: number;
  attempts: number;
  queuedAt: number | null;
  runnerId: string | null;
  leaseExpiresAt: number | null;
  containerId: string | null;
  startedAt: number | null;
  completedAt: number | null;
  statusReasonCode: ReasonCode | null;
  statusReasonMessage: string | null;
  createdAt: number;
  updatedAt: number;
  /** The log reached the per-job cap (JOB_LOG_MAX_LINES / JOB_LOG_MAX_MB); read from the store, absent on new jobs. */
  logTruncated?: boolean;
  /** HEARTBEAT jobs once finished: what the request did; null (or absent) otherwise. */
  check?: CheckResult | null;
  /** MANUAL jobs: the id of the api request that created the job, carried on its job.run message; null otherwise. */
  requestId?: string | null;
}

/** A new PENDING job of the workflow's current generation, due at `slotAt`. */
export function newJob(w: Workflow, trigger: JobTrigger, slotAt: number, now: number): Job {
  return {
    id: newId(),
    workflowId: w.id,
    userId: w.userId,
    generation: w.generation,
    trigger,
    status: 'PENDING',
    slotAt,
    scheduledAt: slotAt,
    attempts: 0,
    queuedAt: null,
    runnerId: null,
    leaseExpiresAt: null,
    containerId: null,
    startedAt: null,
    completedAt: null,
    statusReasonCode: null,
    statusReasonMessage: null,
    createdAt: now,
    updatedAt: now,
    check: null,
  };
}

/** The canonical reason messages. Runners and the scheduler build reasons only through these. */
export const reasons = {
  timeLimitExceeded: (timeoutMs: number): JobReason => ({
    code: 'TIME_LIMIT_EXCEEDED',
    message: `The job did not finish within its time limit of ${formatSeconds(timeoutMs)}.`,
  }),
  nonZeroExit: (exitCode: number): JobReason => ({
    code: 'NON_ZERO_EXIT',
    message: `The container exited with code ${exitCode}.`,
  }),
  imagePullFailed: (): JobReason => ({
    code: 'IMAGE_PULL_FAILED',
    message: 'The container image could not be found or pulled.',
  }),
  registryNotAllowed: (): JobReason => ({
    code: 'IMAGE_PULL_FAILED',
    message: "The image's registry is not one this installation pulls from.",
  }),
  registryAddressNotAllowed: (): JobReason => ({
    code: 'IMAGE_PULL_FAILED',
    message: "The image's registry resolves to an address that runners are not allowed to contact.",
  }),
  localImageMissing: (): JobReason => ({
    code: 'IMAGE_PULL_FAILED',
    message: 'The local image is not present on the runner; local (localhost/) images are never pulled.',
  }),
  imageIdNotAllowed: (): JobReason => ({
    code: 'IMAGE_PULL_FAILED',
    message: 'Images are named by repository and tag or digest; image ids are not accepted.',
  }),
  imageNameMismatch: (): JobReason => ({
    code: 'IMAGE_PULL_FAILED',
    message: 'The image found on the runner does not carry the name the workflow gives; it is not used.',
  }),
  networkNotAllowed: (): JobReason => ({
    code: 'EXECUTION_FAILED',
    message: 'Networked containers are not enabled on this installation.',
  }),
  unexpectedStatusCode: (expected: number, received: number): JobReason => ({
    code: 'UNEXPECTED_STATUS_CODE',
    message: `The endpoint answered with status ${received}; expected ${expected}.`,
  }),
  bodyMismatch: (): JobReason => ({
    code: 'UNEXPECTED_STATUS_CODE',
    message: 'The endpoint answered with the expected status, but the response body did not contain the expected text.',
  }),
  connectionRefused: (): JobReason => ({ code: 'EXECUTION_FAILED', message: 'The connection to the endpoint was refused.' }),
  dnsFailure: (): JobReason => ({ code: 'EXECUTION_FAILED', message: "The endpoint's host name could not be resolved." }),
  tlsFailure: (): JobReason => ({ code: 'EXECUTION_FAILED', message: 'The TLS connection to the endpoint failed.' }),
  addressNotAllowed: (): JobReason => ({
    code: 'EXECUTION_FAILED',
    message: 'The endpoint resolves to an address that runners are not allowed to contact.',
  }),
  requestFailed: (): JobReason => ({ code: 'EXECUTION_FAILED', message: 'The request to the endpoint failed.' }),
  containerStartFailed: (): JobReason => ({ code: 'EXECUTION_FAILED', message: 'The container could not be started.' }),
  runtimeUnavailable: (): JobReason => ({ code: 'SYSTEM_ERROR', message: 'The container runtime is not available.' }),
  containerRemoved: (): JobReason => ({ code: 'SYSTEM_ERROR', message: 'The container was removed from outside orloj before it finished.' }),
  runnerShutdown: (): JobReason => ({
    code: 'SYSTEM_ERROR',
    message: 'The runner shut down before the job finished.',
  }),
  leaseLost: (attempts: number): JobReason => ({
    code: 'SYSTEM_ERROR',
    message: `The job's runner stopped responding; gave up after ${attempts} attempts.`,
  }),
  workflowTerminated: (): JobReason => ({ code: 'WORKFLOW_TERMINATED', message: 'The workflow was terminated.' }),
  workflowUpdated: (): JobReason => ({
    code: 'WORKFLOW_UPDATED',
    message: 'The workflow was updated before this job ran.',
  }),
  failureUnavailable: (): JobReason => ({ code: 'FAILURE_REASON_UNAVAILABLE', message: 'The job failed.' }),
  cancellationUnavailable: (): JobReason => ({ code: 'CANCELLATION_REASON_UNAVAILABLE', message: 'The job was canceled.' }),
} as const;

function formatSeconds(ms: number): string {
  const s = ms / 1000;
  return Number.isInteger(s) ? `${s}s` : `${s.toFixed(1)}s`;
}
