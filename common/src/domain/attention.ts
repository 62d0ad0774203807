import type { WorkflowSummary } from './workflow.js';

/**
 * How much a workflow needs its owner's eyes (issue 26, "attention at any
 * size"; docs/api.md, "Attention"), in the order `GET /workflows?sort=attention`
 * lists them. It follows the alert policy, as the bell does:
 *
 * - `down`: its build failed or was canceled, or it is down by its alert
 *   policy (`alert_after_failures` failed runs in a row; up again after
 *   `recover_after_successes` completed ones), the state the bell announced;
 *   or the failure limit terminated it (until its owner updates or deletes it);
 * - `degraded`: its latest run failed, but not (yet) enough runs for the policy to call it down;
 * - `building`: its build is queued or running;
 * - `healthy`: every other active workflow (up, pending, or late: lateness moves
 *   with time and is read by `include=health`);
 * - `paused`: paused by its owner (`paused_at`, ADR 0015): it runs nothing on its
 *   own until resumed, whatever its last runs said, so it waits below the active ones;
 * - `terminated`: terminated by its owner.
 *
 * The store keeps the same rule as a generated, indexed column
 * (migrations 0019 and 0024, `workflows.attention` = the index in this list), so the list
 * sorts, filters and counts over all of a user's workflows without reading runs.
 */
export const ATTENTION_STATES = ['down', 'degraded', 'building', 'healthy', 'paused', 'terminated'] as const;
export type AttentionState = (typeof ATTENTION_STATES)[number];

type AttentionInput = Pick<WorkflowSummary, 'terminatedAt' | 'pausedAt' | 'buildStatus' | 'alertDown' | 'consecutiveJobFailuresCount' | 'maxConsecutiveJobFailuresAllowed'>;

export function attentionOf(w: AttentionInput): AttentionState {
  if (w.terminatedAt !== null) return w.consecutiveJobFailuresCount >= w.maxConsecutiveJobFailuresAllowed ? 'down' : 'terminated';
  if (w.pausedAt !== null) return 'paused';
  if (w.buildStatus === 'FAILED' || w.buildStatus === 'CANCELED' || w.alertDown) return 'down';
  if (w.consecutiveJobFailuresCount > 0) return 'degraded';
  if (w.buildStatus === 'QUEUED' || w.buildStatus === 'STARTED') return 'building';
  return 'healthy';
}

/** The rank the store keeps (`workflows.attention`): the state's index in {@link ATTENTION_STATES}. */
export const attentionRank = (state: AttentionState): number => ATTENTION_STATES.indexOf(state);

/** Workflows per attention state, over all of a user's workflows. */
export type AttentionCounts = Record<AttentionState, number>;
