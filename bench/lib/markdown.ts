import fs from 'node:fs';
import type { MachineInfo } from './machine.js';
import type { BenchSuite, SuiteReport } from './suite.js';

const DEFAULT_HEADER = `# Benchmarks

Produced by \`npm run bench\` (sources in \`bench/\`; \`npm run bench -- <suite>\` runs one suite).
Each suite rewrites only its own section below, so sections can date from different runs:
compare numbers within a section, and mind the machine each one names.
`;

const begin = (name: string) => `<!-- bench:${name} -->`;
const end = (name: string) => `<!-- /bench:${name} -->`;

export function table(columns: string[], rows: string[][]): string {
  const line = (cells: string[]) => `| ${cells.map((c) => c.replace(/\|/g, '\\|')).join(' | ')} |`;
  const align = columns.map((_, i) => (i === 0 ? '---' : '---:'));
  return [line(columns), `|${align.join('|')}|`, ...rows.map(line)].join('\n');
}

export function renderSection(suite: BenchSuite, report: SuiteReport, machine: MachineInfo, date: Date): string {
  const parts = [
    begin(suite.name),
    `## ${suite.title}`,
    '',
    `_Suite \`${suite.name}\`, run ${date.toISOString().replace(/\.\d+Z$/, 'Z')}._`,
    '',
    report.description.trim(),
    '',
    '**Machine**',
    '',
    `- CPU: ${machine.cpu}, ${machine.cores} cores`,
    `- RAM: ${machine.ramGiB} GiB`,
    `- Node: ${machine.node}`,
    `- OS: ${machine.os}`,
    `- Load average when the suite started: ${machine.loadAverage.join(', ')} (1, 5, 15 min)`,
    '',
    '**Settings**',
    '',
    ...report.settings.map(([k, v]) => `- ${k}: ${v}`),
    '',
    '**Results**',
    '',
    table(report.table.columns, report.table.rows),
    '',
    '**Verdict**',
    '',
    ...report.verdict,
    ...(report.notes?.length ? ['', '**Notes**', '', ...report.notes] : []),
    end(suite.name),
  ];
  return parts.join('\n');
}

/** Replaces the suite's section in the file (or appends it), keeping everything else. */
export function writeSection(file: string, name: string, section: string): void {
  let doc = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : DEFAULT_HEADER;
  const from = doc.indexOf(begin(name));
  const to = doc.indexOf(end(name));
  if (from >= 0 && to > from) {
    doc = doc.slice(0, from) + section + doc.slice(to + end(name).length);
  } else {
    doc = `${doc.trimEnd()}\n\n${section}\n`;
  }
  fs.writeFileSync(file, doc.endsWith('\n') ? doc : `${doc}\n`);
}
