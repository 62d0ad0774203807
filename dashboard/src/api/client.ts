import createClient from 'openapi-fetch';
import type { components, paths } from './schema.gen';
import { networkError, toApiError } from './problem';

/** The api below /api on this origin: the same cookies, no CORS. */
export const API_BASE = '/api';

/** The typed client, generated from the api's OpenAPI document at build time. */
export const api = createClient<paths>({ baseUrl: API_BASE, credentials: 'same-origin' });

type Schemas = components['schemas'];
export type User = Schemas['User'];
export type Workflow = Schemas['Workflow'];
export type WorkflowKind = Workflow['kind'];
export type BuildStatus = Workflow['build_status'];
export type Job = Schemas['Job'];
export type JobStatus = Job['status'];
export type JobTrigger = Job['trigger'];
export type LogEntry = Schemas['LogEntry'];
export type LogPage = Schemas['LogPage'];
export type LogRange = Schemas['LogRange'];
export type CreateWorkflow = Schemas['CreateWorkflow'];
export type UpdateWorkflow = Schemas['UpdateWorkflow'];
export type Notification = Schemas['Notification'];
export type NotificationKind = Notification['kind'];
export type NotificationPage = Schemas['NotificationPage'];
export type UserAnalytics = Schemas['UserAnalytics'];
export type WorkflowAnalytics = Schemas['WorkflowAnalytics'];
export type Incident = Schemas['Incident'];
export type ReliabilityReport = Schemas['ReliabilityReport'];
export type JobAttempt = Schemas['JobAttemptList']['attempts'][number];
export type MaintenanceWindow = Schemas['MaintenanceWindow'];
export type MaintenanceWindowCreate = Schemas['MaintenanceWindowCreate'];

export type AttentionState = NonNullable<Workflow['attention']>;
/** In the order `sort=attention` lists them (docs/api.md, "Attention"). */
export const ATTENTION_STATES: readonly AttentionState[] = ['down', 'degraded', 'building', 'healthy', 'paused', 'terminated'];
export const WORKFLOW_KINDS: readonly WorkflowKind[] = ['HEARTBEAT', 'CONTAINER'];
export const BUILD_STATUSES: readonly BuildStatus[] = ['QUEUED', 'STARTED', 'COMPLETED', 'FAILED', 'CANCELED'];
export const JOB_STATUSES: readonly JobStatus[] = ['PENDING', 'QUEUED', 'RUNNING', 'COMPLETED', 'FAILED', 'CANCELED'];
export const JOB_TRIGGERS: readonly JobTrigger[] = ['AUTOMATIC', 'MANUAL'];
export const isTerminal = (status: JobStatus): boolean => status === 'COMPLETED' || status === 'FAILED' || status === 'CANCELED';
export const isBuilding = (status: BuildStatus): boolean => status === 'QUEUED' || status === 'STARTED';

/**
 * Awaits an openapi-fetch call: its data, or an ApiError carrying the
 * problem document (status 0 when the request never got an answer).
 */
export async function call<T>(request: Promise<{ data?: T; error?: unknown; response: Response }>): Promise<T> {
  let result: { data?: T; error?: unknown; response: Response };
  try {
    result = await request;
  } catch {
    throw networkError();
  }
  if (!result.response.ok) throw toApiError(result.response, result.error);
  return result.data as T;
}

/** The raw log download of a finished job, as a link the browser saves. */
export function rawLogUrl(workflowId: string, jobId: string, format: 'txt' | 'json' | 'jsonl', filters: { q?: string; stream?: string }, attempt?: number): string {
  const qs = new URLSearchParams({ format });
  if (filters.stream) qs.set('stream', filters.stream);
  if (filters.q) qs.set('q', filters.q);
  if (attempt !== undefined) qs.set('attempt', String(attempt));
  return `${API_BASE}/workflows/${encodeURIComponent(workflowId)}/jobs/${encodeURIComponent(jobId)}/logs/raw?${qs}`;
}

/**
 * A job's live tail. `attempt`: the attempt `since` (and the Last-Event-ID the
 * browser sends when it reconnects) belongs to, so a reconnect after the job
 * moved on to a new attempt starts that attempt at line 0 instead of splicing.
 */
export function eventsUrl(workflowId: string, jobId: string, since?: number, attempt?: number): string {
  const base = `${API_BASE}/workflows/${encodeURIComponent(workflowId)}/jobs/${encodeURIComponent(jobId)}/events`;
  const qs = new URLSearchParams();
  if (since !== undefined) qs.set('since', String(since));
  if (attempt !== undefined) qs.set('attempt', String(attempt));
  return qs.size ? `${base}?${qs}` : base;
}

/** The attempt a log entry belongs to, from its event_id (`<job_id>:<attempt>:<sequence_num>`). */
export function attemptOfEntry(entry: LogEntry): number {
  return Number(entry.event_id.split(':')[1]);
}
