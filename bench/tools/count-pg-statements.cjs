// Preload for a role process (BENCH_ROLE_NODE_OPTIONS="--require ./bench/tools/count-pg-statements.cjs"):
// counts the SQL statements the process sends through pg, by statement text
// (parameters folded), and writes them, most frequent first, to
// $ORLOJ_PG_COUNT_DIR (default the OS temp dir)/pg-statements-<role>-<pid>.json
// every 5 s and at exit. How docs/benchmarks.md counted statements per job.
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const pg = require(require.resolve('pg', { paths: [process.cwd()] }));

const counts = new Map();
const query = pg.Client.prototype.query;
pg.Client.prototype.query = function countedQuery(config, values, callback) {
  const text = typeof config === 'string' ? config : config && config.text;
  if (text) {
    const key = text.replace(/\$\d+/g, '?').replace(/\s+/g, ' ').replace(/(\?, )+\?/g, '?…').slice(0, 200);
    counts.set(key, (counts.get(key) || 0) + 1);
  }
  return query.call(this, config, values, callback);
};

const role = (process.argv.join(' ').match(/--roles\s+(\S+)/) || [])[1] || 'process';
const dir = process.env.ORLOJ_PG_COUNT_DIR || os.tmpdir();
const write = () => {
  const sorted = [...counts].sort((a, b) => b[1] - a[1]);
  fs.writeFileSync(path.join(dir, `pg-statements-${role}-${process.pid}.json`), JSON.stringify(sorted, null, 1));
};
process.on('exit', write);
setInterval(write, 5000).unref();
