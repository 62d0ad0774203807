// @orloj/common/domain: workflows, jobs and their rules as plain types and functions (no I/O).
export * from './workflow.js';
export * from './payload.js';
export * from './well-formed.js';
export * from './schema-check.js';
export * from './container-policy.js';
export * from './job.js';
export * from './job-state.js';
export * from './check.js';
export * from './health.js';
export * from './attention.js';
export * from './events.js';
export * from './due-slots.js';
export * from './cron-slots.js';
export * from './schedule.js';
export * from './slot-fates.js';
export * from './maintenance-window.js';
