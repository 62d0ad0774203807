export { Scheduler, DEFAULT_SCHEDULER_CONFIG, type SchedulerConfig, type SchedulerDeps, type SchedulerStats } from './scheduler.js';
export { JOB_EVENT_TYPES, type JobEvent, type JobEventType } from './job-events.js';
export { LeaderLease, LEADER_LEASE, leaseHolder, replicaOfHolder } from './leader-lease.js';
export { RetentionSweeper, DEFAULT_RETENTION_CONFIG, type RetentionConfig, type RetentionDeps, type SweepResult } from './retention.js';
export { QUEUE_FLOOR } from './hand-out.js';
