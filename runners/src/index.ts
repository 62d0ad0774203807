export * from './executors/address-guard.js';
export * from './executors/http-check.executor.js';
export * from './executors/container.executor.js';
export * from './executors/image-policy.js';
export * from './runner.js';
export * from './log-sink.js';
export * from './bus-log-sink.js';
export { Semaphore, type Release } from './semaphore.js';
