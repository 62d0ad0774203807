import type { Notification } from './client';

/*
 * What a notification's `payload` text holds (docs/api.md, "Notifications"):
 * the document publishes it as a string, so its fields are read here.
 */

/** A notification that says a workflow's state changed carries one of these in its payload (docs/api.md, "Notifications"). */
export type StateChange = 'down' | 'recovered' | 'terminated' | 'build_failed';

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
