import { decoded, messageSpec, producerPolicy, type Decoded, type ProducerPolicy } from './table.js';
import type { DomainEvent } from '../domain/events.js';
import { decodeDomainEvent } from './domain-event.js';
import {
  decodeBuildFinished,
  decodeBuildRun,
  decodeJobFinished,
  decodeJobHeartbeat,
  decodeJobRun,
  decodeJobStarted,
  decodeJobStop,
  type BuildFinishedMessage,
  type BuildRunMessage,
  type JobFinishedMessage,
  type JobFinishedRead,
  type JobHeartbeatMessage,
  type JobRunMessage,
  type JobRunRead,
  type JobStartedMessage,
  type JobStopMessage,
} from './jobs.js';
import { decodeLiveLogs, decodeLogBatch, type LiveLogsMessage, type LogBatchMessage } from './logs.js';

export * from './jobs.js';
export * from './logs.js';
export * from './domain-event.js';

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

/**
 * The queues whose messages published together are signed once (ADR 0024),
 * and how they leave. Job events and domain events in one batch envelope:
 * their consumers apply what arrives together set-wise anyway. Jobs each in
 * a broker message of its own, under one signature for a hand-out pass: one
 * message is one attempt, so a runner's prefetch stays its concurrency, and
 * a redelivered message never carries a job that already started elsewhere.
 */
export const BATCHED_QUEUES: Readonly<Record<string, 'together' | 'apart'>> = {
  [QUEUES.jobEvents]: 'together',
  [QUEUES.domainEvents]: 'together',
  [QUEUES.jobs]: 'apart',
};

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

/** scheduler.wake carries nothing: the api's nudge to take new work now. */
export type SchedulerWakeMessage = Record<string, never>;

function decodeWake(_body: unknown): Decoded<SchedulerWakeMessage> {
  return decoded({});
}

/**
 * THE table of bus messages: for each message type, the roles that may
 * produce it (a runner's key cannot sign scheduler or api commands) and the
 * decoder beside its body type (common/src/messages/*.ts). `SignedBus` is
 * typed by it: `publish` takes the body of the type it is given; a consumer's
 * handler gets the decoded body, and a body its decoder refuses never reaches
 * the handler (refused once, in SignedBus: docs/bus.md, "Typed messages").
 */
export const MESSAGES = {
  [MESSAGE_TYPES.jobRun]: messageSpec<JobRunMessage, JobRunRead>(['scheduler'], decodeJobRun),
  [MESSAGE_TYPES.buildRun]: messageSpec<BuildRunMessage>(['scheduler'], decodeBuildRun),
  [MESSAGE_TYPES.jobStop]: messageSpec<JobStopMessage>(['scheduler', 'api'], decodeJobStop),
  [MESSAGE_TYPES.jobStarted]: messageSpec<JobStartedMessage>(['runners'], decodeJobStarted),
  [MESSAGE_TYPES.jobHeartbeat]: messageSpec<JobHeartbeatMessage>(['runners'], decodeJobHeartbeat),
  [MESSAGE_TYPES.jobFinished]: messageSpec<JobFinishedMessage, JobFinishedRead>(['runners'], decodeJobFinished),
  [MESSAGE_TYPES.buildFinished]: messageSpec<BuildFinishedMessage>(['runners'], decodeBuildFinished),
  [MESSAGE_TYPES.logBatch]: messageSpec<LogBatchMessage>(['runners'], decodeLogBatch),
  [MESSAGE_TYPES.liveLogs]: messageSpec<LiveLogsMessage>(['log-ingest'], decodeLiveLogs),
  [MESSAGE_TYPES.schedulerWake]: messageSpec<SchedulerWakeMessage>(['api'], decodeWake),
  // the outbox relay runs in the notifier role (docs/notifications.md)
  [MESSAGE_TYPES.domainEvent]: messageSpec<DomainEvent>(['notifier'], decodeDomainEvent),
} as const;

export type OrlojMessages = typeof MESSAGES;

/** Who may produce what, as the verifier reads it (from MESSAGES). */
export const PRODUCER_POLICY: ProducerPolicy = producerPolicy(MESSAGES);
