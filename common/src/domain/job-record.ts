import type { JobStatus, JobTrigger, ReasonCode } from './job.js';

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
}
