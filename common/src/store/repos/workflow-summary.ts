/** A workflow as the list shows it (WorkflowSummary): its columns, in the order of the row the list's compiled reads return. */
import type { BuildError, BuildStatus, WorkflowKind, WorkflowSummary } from '../../domain/workflow.js';
import type { CatchUpPolicy, FirstRun, OverlapPolicy } from '../../domain/run-policy.js';
import type { WorkflowsTable } from '../schema.js';

/** The columns of a WorkflowSummary, in the order of SummaryRow. */
export const SUMMARY_COLUMNS = [
  'id',
  'name',
  'payload',
  'kind',
  'build_status',
  'interval_minutes',
  'consecutive_job_failures_count',
  'max_consecutive_job_failures_allowed',
  'log_retention',
  'created_at',
  'updated_at',
  'terminated_at',
  'cron',
  'timezone',
  'jitter_seconds',
  'paused_at',
  // issue 26
  'build_error_code',
  'build_error_message',
  'alert_after_failures',
  'recover_after_successes',
  'alert_down',
  // issue 25, migration 0021: the run policy
  'overlap_policy',
  'catch_up_policy',
  'first_run',
] as const;

export type SummaryRow = [
  id: string,
  name: string,
  payload: string,
  kind: WorkflowKind,
  buildStatus: BuildStatus,
  intervalMinutes: number,
  consecutiveJobFailuresCount: number,
  maxConsecutiveJobFailuresAllowed: number,
  logRetention: number,
  createdAt: number,
  updatedAt: number,
  terminatedAt: number | null,
  cron: string | null,
  timeZone: string,
  jitterSeconds: number,
  pausedAt: number | null,
  buildErrorCode: string | null,
  buildErrorMessage: string | null,
  alertAfterFailures: number,
  recoverAfterSuccesses: number,
  alertDown: number,
  overlapPolicy: OverlapPolicy,
  catchUpPolicy: CatchUpPolicy,
  firstRun: FirstRun,
];

export function toSummary(r: SummaryRow): WorkflowSummary {
  return {
    id: r[0],
    name: r[1],
    payload: r[2],
    kind: r[3],
    buildStatus: r[4],
    intervalMinutes: r[5],
    consecutiveJobFailuresCount: r[6],
    maxConsecutiveJobFailuresAllowed: r[7],
    logRetention: r[8] === 1,
    createdAt: r[9],
    updatedAt: r[10],
    terminatedAt: r[11],
    cron: r[12],
    timeZone: r[13],
    jitterSeconds: r[14],
    pausedAt: r[15] === null ? null : Number(r[15]),
    buildError: buildErrorOf(r[16], r[17]),
    alertAfterFailures: r[18],
    recoverAfterSuccesses: r[19],
    alertDown: r[20] === 1,
    overlapPolicy: r[21],
    catchUpPolicy: r[22],
    firstRun: r[23],
  };
}


/** A failed build's reason from its two columns; null unless both are set. */
export const buildErrorOf = (code: string | null, message: string | null): BuildError | null => (code === null || message === null ? null : { code, message });

/** The columns toWorkflow reads (not the list's name_folded and attention), in the order a compiled read returns them. */
export const WORKFLOW_COLUMNS = [
  'id', 'user_id', 'name', 'payload', 'kind', 'build_status',
  'interval_minutes', 'consecutive_job_failures_count', 'max_consecutive_job_failures_allowed', 'log_retention', 'generation', 'created_at',
  'updated_at', 'terminated_at', 'build_completed_at', 'next_due_at', 'build_token', 'skipped_slots',
  'last_slot_skipped_at', 'build_error_code', 'build_error_message', 'alert_after_failures', 'recover_after_successes', 'alert_down',
  'cron', 'timezone', 'jitter_seconds', 'paused_at', 'overlap_policy', 'catch_up_policy',
  'first_run', 'jitter_offset_ms',
] as const satisfies readonly (keyof WorkflowsTable)[];
