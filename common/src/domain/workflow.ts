export const WORKFLOW_KINDS = ['HEARTBEAT', 'CONTAINER'] as const;
export type WorkflowKind = (typeof WORKFLOW_KINDS)[number];

export const BUILD_STATUSES = ['QUEUED', 'STARTED', 'COMPLETED', 'FAILED', 'CANCELED'] as const;
export type BuildStatus = (typeof BUILD_STATUSES)[number];

export const INTERVAL_MIN = 1;
export const INTERVAL_MAX = 10_080;
export const FAILURE_LIMIT_MIN = 3;
export const FAILURE_LIMIT_MAX = 100;
export const NAME_MAX_LENGTH = 200;

export interface Workflow {
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
  /** Changes whenever a build starts, so a stale build result is recognised. */
  buildToken: number;
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
