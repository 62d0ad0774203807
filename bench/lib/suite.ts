import type { LoadSettings } from './load.js';

/**
 * A benchmark suite. To add one: write bench/<name>.bench.ts exporting a
 * BenchSuite and list it in SUITES in bench/run.ts. run.ts renders the report
 * into its own section of docs/benchmarks.md (see lib/markdown.ts).
 */
export interface BenchSuite {
  /** kebab-case; the argv filter of `npm run bench -- <name>` and the section key in the doc. */
  name: string;
  /** Section heading. */
  title: string;
  run(ctx: SuiteContext): Promise<SuiteReport>;
}

export interface SuiteContext {
  load: LoadSettings;
  log(message: string): void;
}

export interface SuiteReport {
  /** Markdown: what is measured and how. */
  description: string;
  /** Rendered as a list after the machine. */
  settings: Array<[label: string, value: string]>;
  table: { columns: string[]; rows: string[][] };
  /** Markdown lines: the targets and whether they were met. */
  verdict: string[];
  /** Markdown lines after the verdict (observations, caveats). */
  notes?: string[];
  /** False when a run had errors or non-2xx answers (or a target could not run): the numbers are not trustworthy. */
  valid: boolean;
}
