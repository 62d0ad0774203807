import type { JobStatus, ReasonCode } from './domain/job.js';
import type { CheckResultMessage } from './domain/check.js';
import type { ProducerPolicy } from './envelope/envelope.js';

/**
 * Every queue, topic and message type on the bus, in one place. Operators
 * watch the queue depths under these names (prefixed `orloj.` on RabbitMQ);
 * docs/operations.md lists them.
 */
export const QUEUES = {
  /** scheduler → runners: run one attempt of a job */
  jobs: 'jobs',
  /** scheduler → runners: make sure a CONTAINER workflow's image is present */
  builds: 'builds',
  /** runners → every scheduler replica (competing): job and build progress */
  jobEvents: 'job-events',
  /** runners → log-ingest: captured log lines in batches */
  logs: 'logs',
  /** notifier's outbox relay → notifier consumers (competing): domain events, at least once */
  domainEvents: 'domain-events',
} as const;

export const TOPICS = {
  /** scheduler → all runners: stop a running job */
  jobControl: 'job-control',
  /** log-ingest → all api replicas: lines for live tails */
  liveLogs: 'live-logs',
  /** api → all scheduler replicas: new work (a build or a manual job) to take now rather than at the next tick */
  schedulerWake: 'scheduler-wake',
} as const;

export const MESSAGE_TYPES = {
  jobRun: 'job.run',
  buildRun: 'build.run',
  jobStarted: 'job.started',
  jobHeartbeat: 'job.heartbeat',
  jobFinished: 'job.finished',
  buildFinished: 'build.finished',
  logBatch: 'log.batch',
  liveLogs: 'log.live',
  jobStop: 'job.stop',
  schedulerWake: 'scheduler.wake',
  domainEvent: 'domain.event',
} as const;

/** Who may produce what: a runner's key cannot sign scheduler or api commands. */
export const PRODUCER_POLICY: ProducerPolicy = {
  [MESSAGE_TYPES.jobRun]: ['scheduler'],
  [MESSAGE_TYPES.buildRun]: ['scheduler'],
  [MESSAGE_TYPES.jobStop]: ['scheduler', 'api'],
  [MESSAGE_TYPES.jobStarted]: ['runners'],
  [MESSAGE_TYPES.jobHeartbeat]: ['runners'],
  [MESSAGE_TYPES.jobFinished]: ['runners'],
  [MESSAGE_TYPES.buildFinished]: ['runners'],
  [MESSAGE_TYPES.logBatch]: ['runners'],
  [MESSAGE_TYPES.liveLogs]: ['log-ingest'],
  [MESSAGE_TYPES.schedulerWake]: ['api'],
  // the outbox relay runs in the notifier role (docs/notifications.md)
  [MESSAGE_TYPES.domainEvent]: ['notifier'],
};

/**
 * Validity of a domain.event envelope: the longest a verifier accepts (1 h).
 * The relay publishes an event again once its envelope expired unapplied.
 */
export const DOMAIN_EVENT_TTL_MS = 60 * 60_000;

export interface LogLineMessage {
  sequence_num: number;
  stream: 'stdout' | 'stderr';
  message: string;
  /** ms since the epoch */
  timestamp: number;
}

/**
 * runners → log-ingest: consecutive lines of one job attempt. A line's
 * event_id is `<job_id>:<attempt>:<sequence_num>`, so a redelivered batch is
 * recognised line by line.
 */
export interface LogBatchMessage {
  job_id: string;
  workflow_id: string;
  attempt: number;
  /** Whether the workflow keeps its lines (they are counted either way). */
  retain: boolean;
  /** Consecutive lines in sequence_num order; empty in a count-only batch and when `columns` carries them. */
  lines: LogLineMessage[];
  /**
   * The lines packed by column, as runners send them: far cheaper to sign,
   * verify and encode than one object per line (a third of the CPU of a
   * batch). When present, `lines` is empty.
   */
  columns?: LogColumns;
  /**
   * Lines the attempt has produced so far (its last sequence_num + 1). Runners
   * send a job without retention as count-only batches: `retain: false`,
   * `lines: []` and this count. log-ingest counts the larger of this and the
   * last line's sequence_num + 1.
   */
  line_count?: number;
}

/** Consecutive lines of one attempt, by column. */
export interface LogColumns {
  /** sequence_num of the first line; the others follow one by one */
  first: number;
  /** One character per line: `o` stdout, `e` stderr. */
  streams: string;
  messages: string[];
  /** ms since the epoch, one per line */
  timestamps: number[];
}

/**
 * Validity of a log.batch envelope: the longest a verifier accepts (1 h), so
 * batches survive a log-ingest outage of up to an hour on a durable queue.
 */
export const LOG_BATCH_TTL_MS = 60 * 60_000;

/**
 * log-ingest → every api replica: lines just stored, for live tails (retained
 * lines only). Best effort and at least once: a subscriber may miss a message
 * (not connected, broker restart) or see lines again (a redelivered batch is
 * broadcast again), so it drops sequence_nums it has already sent and fills a
 * gap from the store. One log-ingest process broadcasts the batches of one
 * attempt in sequence order.
 */
export interface LiveLogsMessage {
  job_id: string;
  workflow_id: string;
  attempt: number;
  lines: LogLineMessage[];
}

export function logEventId(jobId: string, attempt: number, sequenceNum: number): string {
  return `${jobId}:${attempt}:${sequenceNum}`;
}

export interface JobRunMessage {
  job_id: string;
  workflow_id: string;
  /** The attempt this message is for; events about other attempts are ignored. */
  attempt: number;
  kind: 'HEARTBEAT' | 'CONTAINER';
  /** The workflow payload text as stored (runners parse and validate it themselves). */
  payload: string;
  log_retention: boolean;
}

export interface BuildRunMessage {
  workflow_id: string;
  build_token: number;
  image: string;
}

export interface JobStartedMessage {
  job_id: string;
  attempt: number;
  runner_id: string;
  started_at: number;
  container_id?: string;
}

export interface JobHeartbeatMessage {
  job_id: string;
  attempt: number;
  runner_id: string;
}

export interface JobFinishedMessage {
  job_id: string;
  attempt: number;
  runner_id: string;
  status: Extract<JobStatus, 'COMPLETED' | 'FAILED' | 'CANCELED'>;
  reason?: { code: ReasonCode; message: string };
  /** Whether the failure was the system's (runtime unavailable…) and may be retried on another runner. */
  system_failure?: boolean;
  started_at: number;
  finished_at: number;
  container_id?: string;
  /** The attempt's log reached the per-job cap (JOB_LOG_MAX_LINES / JOB_LOG_MAX_MB); absent: it did not. */
  log_truncated?: boolean;
  /** HEARTBEAT jobs: what the request did (absent from older runners; the result stands without it). */
  check?: CheckResultMessage;
}

export interface BuildFinishedMessage {
  workflow_id: string;
  build_token: number;
  ok: boolean;
  reason?: { code: ReasonCode; message: string };
}

export interface JobStopMessage {
  job_id: string;
  /** Only this attempt (a stale execution); absent: whichever attempt runs. */
  attempt?: number;
  reason: { code: ReasonCode; message: string };
}
