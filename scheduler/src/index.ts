export { Scheduler, DEFAULT_SCHEDULER_CONFIG, type SchedulerConfig, type SchedulerDeps } from './scheduler.js';
export { LeaderLease, LEADER_LEASE } from './leader-lease.js';
