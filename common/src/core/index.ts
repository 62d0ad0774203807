// @orloj/common/core: what every role uses and nothing else needs — errors, clock, ids,
// cancellation, cursors, durations, canonical JSON, retries. No database, no broker, no I/O;
// core imports no other concern of common (ARCHITECTURE.md, "Concerns of common").
export * from './errors.js';
export * from './cancellation.js';
export * from './clock.js';
export * from './ids.js';
export * from './cursor.js';
export * from './retry.js';
export * from './batcher.js';
export * from './duration.js';
export * from './canonical-json.js';
export * from './connection-errors.js';
export * from './option-checks.js';
