export { Scheduler, DEFAULT_SCHEDULER_CONFIG, type SchedulerConfig, type SchedulerDeps, type SchedulerStats } from './scheduler.js';
export { LeaderLease, LEADER_LEASE, leaseHolder, replicaOfHolder } from './leader-lease.js';
