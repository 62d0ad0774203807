// Mocha's spec reporter, plus the plain closing line CI reads:
// "N passed, N failed, N skipped". ORLOJ_EXTRA_COUNTS names a JSON file of
// {passed, failed, skipped} from another runner (the dashboard's Vitest
// component tests, see scripts/test.sh) to add in, so the one line counts all.
const fs = require('node:fs');
const Mocha = require('mocha');
const { Spec } = Mocha.reporters;
const { EVENT_RUN_END } = Mocha.Runner.constants;

class OrlojReporter extends Spec {
  constructor(runner, options) {
    super(runner, options);
    runner.once(EVENT_RUN_END, () => {
      const s = runner.stats;
      const extra = extraCounts();
      // registered after Spec's own listener, so this prints after its epilogue
      if (extra.note) console.log(extra.note);
      console.log(`${s.passes + extra.passed} passed, ${s.failures + extra.failed} failed, ${s.pending + extra.skipped} skipped`);
    });
  }
}

function extraCounts() {
  const file = process.env.ORLOJ_EXTRA_COUNTS;
  if (!file) return { passed: 0, failed: 0, skipped: 0 };
  try {
    const c = JSON.parse(fs.readFileSync(file, 'utf8'));
    const n = (v) => (Number.isInteger(v) && v >= 0 ? v : 0);
    const counts = { passed: n(c.passed), failed: n(c.failed), skipped: n(c.skipped) };
    return { ...counts, note: `(including the dashboard component tests: ${counts.passed} passed, ${counts.failed} failed, ${counts.skipped} skipped)` };
  } catch {
    return { passed: 0, failed: 1, skipped: 0, note: `(the dashboard component test counts in ${file} could not be read: counted as a failure)` };
  }
}

module.exports = OrlojReporter;
