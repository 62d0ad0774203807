export * from './executors/address-guard.js';
export * from './executors/http-check.executor.js';
