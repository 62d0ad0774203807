export { Scheduler, DEFAULT_SCHEDULER_CONFIG, newJob, type SchedulerConfig, type SchedulerDeps } from './scheduler.js';
export { LeaderLease, LEADER_LEASE } from './leader-lease.js';
