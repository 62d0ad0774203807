// One mocha run over every package. Tests import TypeScript sources directly:
// tsx compiles on the fly and the `orloj-src` export condition points each
// @orloj/* package at its src/ instead of its build output.
module.exports = {
  'node-option': ['import=tsx', 'conditions=orloj-src'],
  ignore: ['dashboard/**', 'node_modules/**'],
  reporter: './scripts/mocha-reporter.cjs',
  timeout: 20000,
  exit: true,
};
