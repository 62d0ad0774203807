// Preload for a role process (BENCH_ROLE_NODE_OPTIONS="--require ./bench/tools/count-pg-statements.cjs"):
// counts the SQL statements the process sends through pg, by statement text
// (parameters folded), with the time the process waited for each kind (from
// the call to its answer: PostgreSQL's work, lock waits and the queue of the
// connection), and writes them, most frequent first, as [text, { count, ms }]
// to $ORLOJ_PG_COUNT_DIR (default the OS temp dir)/pg-statements-<role>-<pid>.json
// every 5 s and at exit. How docs/benchmarks.md counted statements per job,
// and found where the leader's pass waits.
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const pg = require(require.resolve('pg', { paths: [process.cwd()] }));

const counts = new Map();
const query = pg.Client.prototype.query;
pg.Client.prototype.query = function countedQuery(config, values, callback) {
  const text = typeof config === 'string' ? config : config && config.text;
  if (!text) return query.call(this, config, values, callback);
  const key = text.replace(/\$\d+/g, '?').replace(/\s+/g, ' ').replace(/(\?, )+\?/g, '?…').slice(0, 200);
  const entry = counts.get(key) || { count: 0, ms: 0 };
  counts.set(key, entry);
  entry.count += 1;
  const sent = performance.now();
  const answered = () => void (entry.ms += performance.now() - sent);
  const result = query.call(this, config, values, callback);
  if (result && typeof result.then === 'function') result.then(answered, answered);
  return result;
};

const role = (process.argv.join(' ').match(/--roles\s+(\S+)/) || [])[1] || 'process';
const dir = process.env.ORLOJ_PG_COUNT_DIR || os.tmpdir();
const write = () => {
  const sorted = [...counts].sort((a, b) => b[1].count - a[1].count).map(([k, v]) => [k, { count: v.count, ms: Math.round(v.ms) }]);
  fs.writeFileSync(path.join(dir, `pg-statements-${role}-${process.pid}.json`), JSON.stringify(sorted, null, 1));
};
process.on('exit', write);
setInterval(write, 5000).unref();
