// @orloj/common/config: the validated environment (config.ts) and DATA_DIR's permissions.
export * from './config.js';
export * from './data-dir.js';
