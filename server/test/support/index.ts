// @orloj/server/test-support: what other packages' suites share of the server's
// test support (the `orloj` command and an orloj process started from sources,
// role fleets and their probes, a slow HTTP target, a TCP proxy, the harness
// scripts). Exported under the orloj-src condition only: tests run from
// sources, and nothing in dist depends on it. The TLS, nginx and Prometheus
// set-ups are the server suite's own.
export * from './cli.js';
export * from './harness-script.js';
export * from './in-process-orloj.js';
export * from './orloj-process.js';
export * from './role-fleet.js';
export * from './slow-target.js';
export * from './tcp-proxy.js';
