import type { JobStatus } from './job.js';

/**
 * The job state machine, in one place. The store's only way to change a job's
 * status is a conditional UPDATE whose WHERE clause comes from this table, so
 * an illegal transition is impossible by construction, and a message applied
 * twice finds the job already moved and changes nothing.
 *
 *   PENDING → QUEUED → RUNNING → COMPLETED | FAILED | CANCELED
 *
 * plus: QUEUED/RUNNING → QUEUED (a new attempt after the runner vanished),
 * QUEUED → COMPLETED | FAILED (a result that overtook its start event, or a
 * sweep that gives up), PENDING/QUEUED → CANCELED.
 */
export const ALLOWED_FROM: Readonly<Record<JobStatus, readonly JobStatus[]>> = {
  PENDING: [],
  QUEUED: ['PENDING', 'QUEUED', 'RUNNING'],
  RUNNING: ['QUEUED'],
  COMPLETED: ['QUEUED', 'RUNNING'],
  FAILED: ['QUEUED', 'RUNNING'],
  CANCELED: ['PENDING', 'QUEUED', 'RUNNING'],
};

export function canTransition(from: JobStatus, to: JobStatus): boolean {
  return ALLOWED_FROM[to].includes(from);
}

export function isTerminal(status: JobStatus): boolean {
  return status === 'COMPLETED' || status === 'FAILED' || status === 'CANCELED';
}

/** Statuses in which a job occupies its workflow: at most one such job runs at a time. */
export const ACTIVE_JOB_STATUSES: readonly JobStatus[] = ['QUEUED', 'RUNNING'];
