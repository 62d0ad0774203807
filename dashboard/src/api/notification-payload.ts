/**
 * Shapes of the contract's notifications and analytics routes, written by
 * hand from the contract and docs/api decisions: the api of this build may
 * not serve them yet (features.gen.ts says whether it does).
 */
/** The contract's kinds (api-decisions.md); a kind this build does not know is shown as a plain notification. */
export type NotificationKind = 'WEB_INFO' | 'WEB_SUCCESS' | 'WEB_ALERT' | 'WEB_ERROR';

/** A notification that says a workflow's state changed carries one of these in its payload (docs/api.md, "Notifications"). */
export type StateChange = 'down' | 'recovered' | 'terminated' | 'build_failed';

export interface Notification {
  id: string;
  kind: NotificationKind | string;
  /** A JSON object as a string: title, message, entity_type, entity_id, workflow_id, action_url. */
  payload: string;
  read_at?: string;
  created_at: string;
  updated_at: string;
}

export interface NotificationPage {
  notifications: Notification[];
  cursor: string;
}

export interface NotificationPayload {
  title?: string;
  message?: string;
  entity_type?: 'WORKFLOW' | 'JOB';
  entity_id?: string;
  workflow_id?: string;
  action_url?: string;
  /** Present only on a state change; the api lists them apart with `state_change=true`. */
  state_change?: StateChange | string;
}

export interface Totals {
  total_jobs: number;
  total_joblogs: number;
  total_job_execution_duration: number;
}

export interface UserAnalytics extends Totals {
  total_workflows: number;
  workflow_kinds: (Totals & { kind: string; total_workflows: number })[];
  top_workflows: (Totals & { workflow_id: string; workflow_name: string; kind: string })[];
}

export interface WorkflowAnalytics extends Totals {
  workflow_id: string;
}

/** The payload of a notification, or an empty one when it is not a JSON object. */
export function notificationPayload(n: Notification): NotificationPayload {
  try {
    const value: unknown = JSON.parse(n.payload);
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as NotificationPayload) : {};
  } catch {
    return {};
  }
}

/** Only same-origin app paths are followed from a notification (never a full URL). */
export function safeActionPath(url: string | undefined): string | undefined {
  return url && /^\/[A-Za-z0-9/_-]*$/.test(url) && !url.startsWith('//') ? url : undefined;
}
