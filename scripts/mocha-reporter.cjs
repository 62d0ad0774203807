// Mocha's spec reporter, plus the plain closing line CI reads:
// "N passed, N failed, N skipped".
const Mocha = require('mocha');
const { Spec } = Mocha.reporters;
const { EVENT_RUN_END } = Mocha.Runner.constants;

class OrlojReporter extends Spec {
  constructor(runner, options) {
    super(runner, options);
    runner.once(EVENT_RUN_END, () => {
      const s = runner.stats;
      // registered after Spec's own listener, so this prints after its epilogue
      console.log(`${s.passes} passed, ${s.failures} failed, ${s.pending} skipped`);
    });
  }
}
module.exports = OrlojReporter;
