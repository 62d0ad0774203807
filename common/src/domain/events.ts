import type { Job, JobStatus, JobTrigger, ReasonCode } from './job.js';
import type { Workflow, WorkflowKind } from './workflow.js';
import { isRequestId } from '../core/ids.js';

/**
 * Domain events: what happened to a workflow or a job, written to the outbox
 * in the transaction of the change itself (common/src/store/lifecycle.ts),
 * relayed on the bus and applied by the notifier (docs/notifications.md).
 */
export const DOMAIN_EVENT_KINDS = [
  'workflow.created',
  'build.completed',
  'build.failed',
  'job.completed',
  'job.failed',
  'job.canceled',
  'workflow.terminated',
  'workflow.deleted',
  'workflow.recovered',
] as const;
export type DomainEventKind = (typeof DOMAIN_EVENT_KINDS)[number];

export interface WorkflowEventData {
  workflow_name: string;
  workflow_kind: WorkflowKind;
  /**
   * The api request that caused the event, when a request did: the request
   * that created the manual job whose end (or recovery, or failure that
   * terminated the workflow) the event records. The outbox relay publishes
   * the event with it as the envelope's `req_id`, so the notifier's lines for
   * the event carry that `reqId`. Absent otherwise, and in events of older
   * versions.
   */
  request_id?: string;
}

export interface JobEventData extends WorkflowEventData {
  job_id: string;
  trigger: JobTrigger;
  status: Extract<JobStatus, 'COMPLETED' | 'FAILED' | 'CANCELED'>;
  /** ms since the epoch: the slot an automatic job ran for, a manual job's request time (absent in events of older versions) */
  scheduled_at?: number;
  /** ms since the epoch; absent when the job never started */
  started_at?: number;
  completed_at?: number;
  reason_code?: ReasonCode;
  reason_message?: string;
}

/** Why a workflow was terminated. */
export interface TerminationCause {
  /** By the service after too many consecutive failed jobs, not by the user. */
  automatic: boolean;
  /** With `automatic`: the request id of the job whose failure terminated it (its `request_id`), if any. */
  requestId?: string | null;
}

/**
 * A failed job. `down`: this failure turned the workflow down — the run
 * before it (CANCELED ones passed over) did not fail, the same reading as the
 * health state's `down` (common/src/domain/health.ts). Absent when the
 * workflow was down already, and in events of older versions.
 */
export interface FailedJobEventData extends JobEventData {
  status: 'FAILED';
  down?: true;
  /** A maintenance window or a snooze muted the workflow's alerts: nobody is notified (docs/adr/0019-maintenance-windows.md). */
  muted?: true;
}

export interface TerminationEventData extends WorkflowEventData {
  /** Terminated by the service after too many consecutive failed jobs, not by the user. */
  automatic: boolean;
  consecutive_failures: number;
  max_consecutive_failures: number;
}

/** A job completed and the run before it had failed: the workflow is up again (docs/notifications.md). */
export interface RecoveryEventData extends WorkflowEventData {
  /** The job that completed. */
  job_id: string;
  /** The workflow's count of consecutive failed jobs just before this one (0 when an update reset it). */
  consecutive_failures: number;
  /** It recovered while muted (maintenance window or snooze): nobody is notified. */
  muted?: true;
}

/** What each kind of event carries. */
export interface DomainEventDataByKind {
  'workflow.created': WorkflowEventData;
  'build.completed': WorkflowEventData;
  'build.failed': WorkflowEventData;
  'job.completed': JobEventData;
  'job.failed': FailedJobEventData;
  'job.canceled': JobEventData;
  'workflow.terminated': TerminationEventData;
  'workflow.deleted': WorkflowEventData;
  'workflow.recovered': RecoveryEventData;
}

export type DomainEventData = DomainEventDataByKind[DomainEventKind];

/** An event of one kind, as the outbox holds it and the bus carries it (message type MESSAGE_TYPES.domainEvent). */
export interface DomainEventOf<K extends DomainEventKind> {
  /** Deterministic identity: kind, entity and occurrence. The same change always yields the same id. */
  id: string;
  kind: K;
  user_id: string;
  workflow_id: string;
  /** ms since the epoch */
  occurred_at: number;
  data: DomainEventDataByKind[K];
}

/** Any event: a union discriminated by `kind`, so a switch on it types `data`. */
export type DomainEvent = { [K in DomainEventKind]: DomainEventOf<K> }[DomainEventKind];

export type JobEvent = DomainEventOf<'job.completed'> | DomainEventOf<'job.failed'> | DomainEventOf<'job.canceled'>;

/** A job's terminal outcome (job.completed, job.failed, job.canceled). */
export function isJobEvent(e: DomainEvent): e is JobEvent {
  return e.kind === 'job.completed' || e.kind === 'job.failed' || e.kind === 'job.canceled';
}

function workflowData(w: Workflow, requestId?: string | null): WorkflowEventData {
  return { workflow_name: w.name, workflow_kind: w.kind, ...(requestId ? { request_id: requestId } : {}) };
}

/** The request id an event carries (WorkflowEventData.request_id), if it is one. */
export function eventRequestId(event: DomainEvent): string | undefined {
  return isRequestId(event.data.request_id) ? event.data.request_id : undefined;
}

function event<K extends DomainEventKind>(kind: K, occurrence: string, w: Workflow, now: number, data: DomainEventDataByKind[K]): DomainEventOf<K> {
  return { id: `${kind}:${occurrence}`, kind, user_id: w.userId, workflow_id: w.id, occurred_at: now, data };
}

export const domainEvents = {
  workflowCreated: (w: Workflow): DomainEventOf<'workflow.created'> => event('workflow.created', w.id, w, w.createdAt, workflowData(w)),
  /** A workflow builds once per generation: only a PUT (which bumps it) starts another build. */
  buildFinished: (w: Workflow, ok: boolean, now: number): DomainEventOf<'build.completed' | 'build.failed'> =>
    event(ok ? 'build.completed' : 'build.failed', `${w.id}:${w.generation}`, w, now, workflowData(w)),
  /**
   * A job reaches a terminal state once. `down`: a FAILED job that turned the
   * workflow down; `muted`: one that failed while its alerts were muted (see FailedJobEventData).
   */
  jobEnded(w: Workflow, job: Job, now: number, down = false, muted = false): JobEvent {
    const data: JobEventData = {
      ...workflowData(w, job.requestId),
      job_id: job.id,
      trigger: job.trigger,
      status: job.status as JobEventData['status'],
      scheduled_at: job.scheduledAt,
      ...(job.startedAt !== null ? { started_at: job.startedAt } : {}),
      ...(job.completedAt !== null ? { completed_at: job.completedAt } : {}),
      ...(job.statusReasonCode !== null ? { reason_code: job.statusReasonCode } : {}),
      ...(job.statusReasonMessage !== null ? { reason_message: job.statusReasonMessage } : {}),
    };
    if (data.status === 'FAILED') return event('job.failed', job.id, w, now, { ...data, status: 'FAILED', ...(down ? { down: true as const } : {}), ...(muted ? { muted: true as const } : {}) });
    return event(data.status === 'COMPLETED' ? 'job.completed' : 'job.canceled', job.id, w, now, data);
  },
  /** Terminated once per generation: only a PUT (which bumps it) reactivates a workflow. */
  workflowTerminated: (w: Workflow, now: number, cause: TerminationCause): DomainEventOf<'workflow.terminated'> =>
    event('workflow.terminated', `${w.id}:${w.generation}`, w, now, {
      ...workflowData(w, cause.automatic ? cause.requestId : undefined),
      automatic: cause.automatic,
      consecutive_failures: w.consecutiveJobFailuresCount,
      max_consecutive_failures: w.maxConsecutiveJobFailuresAllowed,
    }),
  workflowDeleted: (w: Workflow, now: number): DomainEventOf<'workflow.deleted'> => event('workflow.deleted', w.id, w, now, workflowData(w)),
  /**
   * The down→up transition, once: its occurrence is the job that completed,
   * and a job ends once. `w` as read before the failure count was reset.
   */
  workflowRecovered: (w: Workflow, job: Job, now: number, muted = false): DomainEventOf<'workflow.recovered'> =>
    event('workflow.recovered', `${w.id}:${job.id}`, w, now, {
      ...workflowData(w, job.requestId),
      job_id: job.id,
      consecutive_failures: w.consecutiveJobFailuresCount,
      ...(muted ? { muted: true as const } : {}),
    }),
};

/** Whole seconds (rounded down) a terminal job ran; 0 when it never started. */
export function jobDurationSeconds(data: Pick<JobEventData, 'started_at' | 'completed_at'>): number {
  if (data.started_at === undefined || data.completed_at === undefined || data.completed_at <= data.started_at) return 0;
  return Math.floor((data.completed_at - data.started_at) / 1000);
}
