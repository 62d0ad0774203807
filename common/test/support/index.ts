// @orloj/common/test-support: what the suites of every package share (service URLs, test
// databases, fixtures, role processes, async helpers). Exported under the orloj-src
// condition only: tests run from sources, and nothing in dist depends on it.
export * from './amqp.js';
export * from './async.js';
export * from './canary.js';
export * from './fixtures.js';
export * from './forwarding-bus.js';
export * from './json-lines.js';
export * from './keys.js';
export * from './logger.js';
export * from './orloj-command.js';
export * from './role-process.js';
export * from './services.js';
export * from './stores.js';
export * from './temp-dir.js';
export * from './query-plans.js';
