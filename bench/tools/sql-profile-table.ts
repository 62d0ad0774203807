import fs from 'node:fs';

/** Prints the top statements of a BENCH_SQL_PROFILE file: `npx tsx bench/tools/sql-profile-table.ts <file> [n]`. */
const [file, n = '10'] = process.argv.slice(2);
if (!file) throw new Error('usage: sql-profile-table.ts <file.sql-profile.json> [n]');
const p = JSON.parse(fs.readFileSync(file, 'utf8')) as {
  wallMs: number;
  cpu: { user: number; system: number };
  totalMs: number;
  statements: { op: string; count: number; ms: number; rows: number; sql: string }[];
};
const cpuMs = (p.cpu.user + p.cpu.system) / 1000;
console.log(`wall ${(p.wallMs / 1000).toFixed(0)} s, CPU ${(cpuMs / 1000).toFixed(1)} s, in SQLite calls ${(p.totalMs / 1000).toFixed(1)} s`);
console.log('| # | op | calls | total ms | µs/call | rows/call | SQL |');
console.log('|---:|---|---:|---:|---:|---:|---|');
p.statements.slice(0, Number(n)).forEach((s, i) => {
  const sql = s.sql.length > 160 ? `${s.sql.slice(0, 160)}…` : s.sql;
  console.log(
    `| ${i + 1} | ${s.op} | ${s.count} | ${s.ms.toFixed(0)} | ${((s.ms * 1000) / s.count).toFixed(1)} | ${(s.rows / s.count).toFixed(1)} | \`${sql.replace(/\|/g, '\\|')}\` |`,
  );
});
