import { newId } from '../core/ids.js';
import { jitterOffsetMs } from './jitter.js';
import { DEFAULT_RUN_POLICY, type RunPolicy } from './run-policy.js';

export const WORKFLOW_KINDS = ['HEARTBEAT', 'CONTAINER'] as const;
export type WorkflowKind = (typeof WORKFLOW_KINDS)[number];

export const BUILD_STATUSES = ['QUEUED', 'STARTED', 'COMPLETED', 'FAILED', 'CANCELED'] as const;
export type BuildStatus = (typeof BUILD_STATUSES)[number];

export const INTERVAL_MIN = 1;
export const INTERVAL_MAX = 10_080;
export const FAILURE_LIMIT_MIN = 3;
export const FAILURE_LIMIT_MAX = 100;
export const NAME_MAX_LENGTH = 200;
/** Bounds of the alert policy (issue 26): down after N failed runs, up after M completed ones. */
export const ALERT_POLICY_MIN = 1;
export const ALERT_POLICY_MAX = 100;
/** A new workflow's alert policy: down at the first failed run, up at the first completed one. */
export const ALERT_POLICY_DEFAULT = 1;

/** A workflow; its run policy (overlap, catch-up, first run: run-policy.ts) included. */
export interface Workflow extends RunPolicy {
  id: string;
  userId: string;
  name: string;
  /** The payload text exactly as the user sent it. */
  payload: string;
  kind: WorkflowKind;
  buildStatus: BuildStatus;
  intervalMinutes: number;
  consecutiveJobFailuresCount: number;
  maxConsecutiveJobFailuresAllowed: number;
  logRetention: boolean;
  generation: number;
  createdAt: number;
  updatedAt: number;
  terminatedAt: number | null;
  buildCompletedAt: number | null;
  /** The next automatic run's due slot (build completion + k × interval); null until built. */
  nextDueAt: number | null;
  /** Due slots not run at their time (docs/heartbeat.md), and when the last one was skipped. */
  skippedSlots: number;
  lastSlotSkippedAt: number | null;
  /** Changes whenever a build starts, so a stale build result is recognised. */
  buildToken: number;
  /** A cron expression read in `timeZone` (ADR 0015), or null: every `intervalMinutes` from the build. */
  cron: string | null;
  /** IANA time zone of `cron`; 'UTC' by default. */
  timeZone: string;
  /** Slots move later by a fixed offset in [0, jitterSeconds] seconds: jitterOffsetMs. */
  jitterSeconds: number;
  /** The offset every slot moves by, in ms, fixed when jitterSeconds is chosen (jitter.ts). */
  jitterOffsetMs: number;
  /** When its owner paused it (no automatic slots until resumed), or null. */
  pausedAt: number | null;
  // ---- issue 26: build errors, alert policy ----
  /** Why the current generation's build failed (a fixed, user-safe sentence); null unless it did. */
  buildError: BuildError | null;
  /** Down after this many consecutive failed runs (default 1). */
  alertAfterFailures: number;
  /** Up again after this many consecutive completed runs (default 1). */
  recoverAfterSuccesses: number;
  /** Down by that policy. */
  alertDown: boolean;
}

/** A failed build's reason: a JobReason's code and message. */
export interface BuildError {
  code: string;
  message: string;
}

/** What its owner chooses of a new workflow; the rest starts as {@link newWorkflow} sets it. */
export interface NewWorkflow {
  userId: string;
  name: string;
  kind: WorkflowKind;
  /** The payload text exactly as the user sent it (already checked against the kind). */
  payload: string;
  intervalMinutes: number;
  maxConsecutiveJobFailuresAllowed: number;
  /** CONTAINER only, default true; a HEARTBEAT workflow never keeps logs. */
  logRetention?: boolean;
  // ---- issue 26: alert policy (default 1 each) ----
  alertAfterFailures?: number;
  recoverAfterSuccesses?: number;
  /** A cron workflow (ADR 0015); `intervalMinutes` then holds its longest gap (contractInterval). */
  cron?: string | null;
  timeZone?: string;
  jitterSeconds?: number;
  /** Overlap, catch-up and first-run choices (run-policy.ts); each defaults to the behaviour before them. */
  runPolicy?: Partial<RunPolicy>;
}

/** A new workflow, its build QUEUED, no failures counted, not yet scheduled. */
export function newWorkflow(w: NewWorkflow, now: number): Workflow {
  const id = newId();
  return {
    id,
    userId: w.userId,
    name: w.name,
    payload: w.payload,
    kind: w.kind,
    buildStatus: 'QUEUED',
    intervalMinutes: w.intervalMinutes,
    consecutiveJobFailuresCount: 0,
    maxConsecutiveJobFailuresAllowed: w.maxConsecutiveJobFailuresAllowed,
    logRetention: w.kind === 'CONTAINER' ? (w.logRetention ?? true) : false,
    generation: 0,
    createdAt: now,
    updatedAt: now,
    terminatedAt: null,
    buildCompletedAt: null,
    nextDueAt: null,
    skippedSlots: 0,
    lastSlotSkippedAt: null,
    buildToken: 0,
    buildError: null,
    alertAfterFailures: w.alertAfterFailures ?? ALERT_POLICY_DEFAULT,
    recoverAfterSuccesses: w.recoverAfterSuccesses ?? ALERT_POLICY_DEFAULT,
    alertDown: false,
    cron: w.cron ?? null,
    timeZone: w.timeZone ?? 'UTC',
    jitterSeconds: w.jitterSeconds ?? 0,
    jitterOffsetMs: jitterOffsetMs(id, w.jitterSeconds ?? 0),
    pausedAt: null,
    overlapPolicy: w.runPolicy?.overlapPolicy ?? DEFAULT_RUN_POLICY.overlapPolicy,
    catchUpPolicy: w.runPolicy?.catchUpPolicy ?? DEFAULT_RUN_POLICY.catchUpPolicy,
    firstRun: w.runPolicy?.firstRun ?? DEFAULT_RUN_POLICY.firstRun,
  };
}

/** A workflow as its owner's list shows it: without the scheduler's bookkeeping. */
export type WorkflowSummary = Pick<
  Workflow,
  | 'id'
  | 'name'
  | 'payload'
  | 'kind'
  | 'buildStatus'
  | 'intervalMinutes'
  | 'consecutiveJobFailuresCount'
  | 'maxConsecutiveJobFailuresAllowed'
  | 'logRetention'
  | 'createdAt'
  | 'updatedAt'
  | 'terminatedAt'
  // issue 26
  | 'buildError'
  | 'alertAfterFailures'
  | 'recoverAfterSuccesses'
  | 'cron'
  | 'timeZone'
  | 'jitterSeconds'
  | 'pausedAt'
  | 'alertDown'
  | keyof RunPolicy
>;

export interface HeartbeatPayload {
  endpoint: string;
  method: 'GET' | 'HEAD' | 'POST';
  expected_status_code: number;
  headers: Record<string, string>;
  /** milliseconds */
  timeout: number;
  body?: string;
  body_contains?: string;
}

export interface ContainerPayload {
  image: string;
  cmd?: string[];
  env: Record<string, string>;
  /** milliseconds */
  timeout: number;
  memory_mb?: number;
  cpus?: number;
  network: 'none' | 'bridge';
}
