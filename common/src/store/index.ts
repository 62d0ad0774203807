export * from './schema.js';
export * from './dialect.js';
export * from './database.js';
export * from './store.js';
export type { User } from './repos/users.repo.js';
export type { Session } from './repos/sessions.repo.js';
export type { IdempotencyClaim } from './repos/idempotency.repo.js';
export type { WorkflowListFilter, WorkflowUpdate } from './repos/workflows.repo.js';
