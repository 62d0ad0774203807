'use strict';
/**
 * BENCH_SQL_PROFILE=<dir> preload (`--require`, see child.ts): times every
 * better-sqlite3 statement the process runs — prepare, run, all, get, iterate —
 * per SQL text (IN lists and multi-row VALUES folded so that one query shape
 * is one row), and writes <dir>/<script>-<pid>.sql-profile.json when the
 * process exits, sorted by total time. Measurement only: it adds two clock
 * reads a call.
 */
const fs = require('node:fs');
const path = require('node:path');

const dir = process.env.BENCH_SQL_PROFILE;
if (dir) {
  const Database = require('better-sqlite3');
  const stats = new Map();
  const shapes = new Map();
  const shape = (sql) => {
    let s = shapes.get(sql);
    if (s === undefined) {
      s = sql
        .replace(/\s+/g, ' ')
        .replace(/\?(\s*,\s*\?)+/g, '?…')
        .replace(/(\([^()]*\))(\s*,\s*\([^()]*\))+/g, '$1, …')
        .trim();
      if (shapes.size < 100_000) shapes.set(sql, s);
    }
    return s;
  };
  const add = (sql, op, ns, rows) => {
    const key = `${op}\u0000${shape(sql)}`;
    let e = stats.get(key);
    if (!e) stats.set(key, (e = { op, sql: shape(sql), count: 0, ns: 0n, rows: 0 }));
    e.count += 1;
    e.ns += ns;
    e.rows += rows;
  };
  const now = process.hrtime.bigint;
  let patched = false;
  const patchStatement = (proto) => {
    for (const op of ['run', 'all', 'get']) {
      const orig = proto[op];
      proto[op] = function (...args) {
        const t = now();
        const r = orig.apply(this, args);
        add(this.source, op, now() - t, op === 'all' ? r.length : op === 'get' ? (r === undefined ? 0 : 1) : r.changes);
        return r;
      };
    }
    const iterate = proto.iterate;
    proto.iterate = function (...args) {
      const sql = this.source;
      let t = now();
      const it = iterate.apply(this, args);
      let ns = now() - t;
      let rows = 0;
      let done = false;
      const finish = () => {
        if (!done) { done = true; add(sql, 'iterate', ns, rows); }
      };
      return {
        [Symbol.iterator]() { return this; },
        next() {
          t = now();
          const r = it.next();
          ns += now() - t;
          if (r.done) finish(); else rows += 1;
          return r;
        },
        return(v) { finish(); return it.return ? it.return(v) : { done: true, value: v }; },
      };
    };
  };
  const prepare = Database.prototype.prepare;
  Database.prototype.prepare = function (sql, ...rest) {
    const t = now();
    const stmt = prepare.call(this, sql, ...rest);
    add(sql, 'prepare', now() - t, 0);
    if (!patched) { patched = true; patchStatement(Object.getPrototypeOf(stmt)); }
    return stmt;
  };
  const exec = Database.prototype.exec;
  Database.prototype.exec = function (sql, ...rest) {
    const t = now();
    const r = exec.call(this, sql, ...rest);
    add(sql, 'exec', now() - t, 0);
    return r;
  };
  const started = Date.now();
  process.on('exit', () => {
    const rows = [...stats.values()]
      .map((e) => ({ op: e.op, count: e.count, ms: Number(e.ns) / 1e6, rows: e.rows, sql: e.sql }))
      .sort((a, b) => b.ms - a.ms);
    const total = rows.reduce((s, r) => s + r.ms, 0);
    const name = path.basename(process.argv[1] ?? 'node').replace(/\.[^.]+$/, '');
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(
      path.join(dir, `${name}-${process.pid}.sql-profile.json`),
      JSON.stringify({ pid: process.pid, wallMs: Date.now() - started, cpu: process.cpuUsage(), totalMs: total, statements: rows }, null, 1),
    );
  });
}
