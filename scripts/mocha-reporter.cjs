// Mocha's spec reporter, plus the plain closing line CI reads:
// "N passed, N failed, N skipped". ORLOJ_EXTRA_COUNTS names JSON files of
// {name?, passed, failed, skipped} from other runs (the dashboard's Vitest
// component tests, see scripts/test.sh; the reference client suite, see
// scripts/reference-client.sh and .ci/run), separated by ":", to add in, so
// the one line counts all. ORLOJ_COUNTS_OUT names a file this run writes its
// own counts to, in that form, for another run's closing line.
const fs = require('node:fs');
const path = require('node:path');
const Mocha = require('mocha');
const { Spec } = Mocha.reporters;
const { EVENT_RUN_END } = Mocha.Runner.constants;

class OrlojReporter extends Spec {
  constructor(runner, options) {
    super(runner, options);
    runner.once(EVENT_RUN_END, () => {
      const s = runner.stats;
      const out = process.env.ORLOJ_COUNTS_OUT;
      if (out) fs.writeFileSync(out, JSON.stringify({ name: process.env.ORLOJ_COUNTS_NAME || undefined, passed: s.passes, failed: s.failures, skipped: s.pending }));
      const extras = extraCounts();
      const sum = (k) => extras.reduce((n, e) => n + e[k], 0);
      // registered after Spec's own listener, so this prints after its epilogue
      for (const e of extras) console.log(e.note);
      console.log(`${s.passes + sum('passed')} passed, ${s.failures + sum('failed')} failed, ${s.pending + sum('skipped')} skipped`);
    });
  }
}

function extraCounts() {
  const files = (process.env.ORLOJ_EXTRA_COUNTS || '').split(path.delimiter).filter(Boolean);
  return files.map((file) => {
    try {
      const c = JSON.parse(fs.readFileSync(file, 'utf8'));
      const n = (v) => (Number.isInteger(v) && v >= 0 ? v : 0);
      const counts = { passed: n(c.passed), failed: n(c.failed), skipped: n(c.skipped) };
      const name = typeof c.name === 'string' && c.name ? c.name : 'the dashboard component tests';
      return { ...counts, note: `(including ${name}: ${counts.passed} passed, ${counts.failed} failed, ${counts.skipped} skipped)` };
    } catch {
      return { passed: 0, failed: 1, skipped: 0, note: `(the counts in ${file} could not be read: counted as a failure)` };
    }
  });
}

module.exports = OrlojReporter;
