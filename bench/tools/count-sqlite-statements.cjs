// Preload for the embedded orloj process (BENCH_EMBEDDED_NODE_OPTIONS="--require <abs path>/bench/tools/count-sqlite-statements.cjs"):
// counts the statements the process runs through better-sqlite3 (Statement run/get/all/iterate),
// by statement text (whitespace folded), in the thread that loads it. Every 5 s it appends a line
// {"t": <ms since epoch>, "thread": <id>, "counts": {sql: n}} (cumulative) to
// $ORLOJ_SQLITE_COUNT_DIR (default the OS temp dir)/sqlite-statements-<pid>.jsonl, so that the counts
// of a window are the difference of two lines.
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { threadId } = require('node:worker_threads');

let Database;
try {
  Database = require(require.resolve('better-sqlite3', { paths: [process.cwd(), path.join(process.cwd(), 'common')] }));
} catch {
  return;
}
const counts = Object.create(null);
const probe = new Database(':memory:');
const Statement = Object.getPrototypeOf(probe.prepare('select 1'));
probe.close();
for (const method of ['run', 'get', 'all', 'iterate']) {
  const original = Statement[method];
  Statement[method] = function counted(...args) {
    const key = this.source.replace(/\s+/g, ' ').trim().slice(0, 160);
    counts[key] = (counts[key] || 0) + 1;
    return original.apply(this, args);
  };
}
const file = path.join(process.env.ORLOJ_SQLITE_COUNT_DIR || os.tmpdir(), `sqlite-statements-${process.pid}.jsonl`);
const write = () => fs.appendFileSync(file, JSON.stringify({ t: Date.now(), thread: threadId, counts }) + '\n');
setInterval(write, 5000).unref();
process.on('exit', write);
