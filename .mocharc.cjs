// One mocha run over every package. Tests import TypeScript sources directly:
// tsx compiles on the fly and the `orloj-src` export condition points each
// @orloj/* package at its src/ instead of its build output.
module.exports = {
  'node-option': ['import=tsx', 'conditions=orloj-src'],
  // No `exit: true`: a leaked handle must not be hidden; the guard names it and fails the run.
  require: ['./scripts/mocha-leak-guard.cjs'],
  // dashboard/src holds the Vitest component tests; dashboard/test the browser suite.
  ignore: ['dashboard/src/**', '**/node_modules/**'],
  reporter: './scripts/mocha-reporter.cjs',
  // The gate (docs/testing.md, "A strict gate"): a committed .only fails the run, and so does
  // any skip where every service is required (CI); a failing hook fails the tests it kept
  // from running, which the reporter names.
  'forbid-only': true,
  'forbid-pending': process.env.REQUIRE_SERVICES === '1',
  'fail-hook-affected-tests': true,
  // Generous: three tiers run at once on two cores (scripts/test-tiers.mjs); tests wait on events, so a
  // passing test takes no longer for it.
  timeout: 60000,
};
