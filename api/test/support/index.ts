// @orloj/api/test-support: what other packages' suites share of the api's test
// support (an HTTP client with a session, SSE, an api under test, log and
// notification fixtures). Exported under the orloj-src condition only: tests
// run from sources, and nothing in dist depends on it. The OpenAPI conformance
// checks (conformance.ts) are the api suite's own.
export * from './client.js';
export * from './harness.js';
export * from './logs.js';
export * from './notifications.js';
export * from './sse.js';
