export * from './metrics.js';
export * from './health.js';
export * from './ops.js';
export * from './instrumented-bus.js';
