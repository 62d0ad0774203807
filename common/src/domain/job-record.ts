import { newId } from '../ids.js';
import type { CheckResult } from './check.js';
import type { JobStatus, JobTrigger, ReasonCode } from './job.js';
import type { Workflow } from './workflow.js';

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

/**
 * The job handed out as it is created: QUEUED on its first attempt, as the
 * PENDING → QUEUED transition would leave it. The leader creates a due slot's
 * job this way when the workflow is free, so the job needs no second pass.
 */
export function queuedAtCreation(job: Job, now: number): Job {
  return { ...job, status: 'QUEUED', attempts: 1, queuedAt: now, updatedAt: now };
}
