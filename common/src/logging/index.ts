// @orloj/common/logging: the pino logger and the request context its lines carry.
export * from './logger.js';
