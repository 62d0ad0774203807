// @orloj/common/core: what every role uses and nothing else needs — errors, clock, ids,
// cancellation, cursors. No database, no broker, no I/O.
export * from './errors.js';
export * from './cancellation.js';
export * from './clock.js';
export * from './ids.js';
export * from './cursor.js';
export * from './retry.js';
export * from './batcher.js';
