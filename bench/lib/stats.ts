/** Small numeric helpers shared by the scheduling and container suites. */

/** The p-th percentile (0-100) of ascending `sorted`, nearest rank; NaN when empty. */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1]!;
}

export interface Summary {
  count: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  mean: number;
}

/** p50/p90/p99/max/mean of the values (any order); NaN fields when empty. */
export function summarize(values: readonly number[]): Summary {
  const sorted = [...values].sort((a, b) => a - b);
  const mean = sorted.length ? sorted.reduce((a, b) => a + b, 0) / sorted.length : Number.NaN;
  return {
    count: sorted.length,
    p50: percentile(sorted, 50),
    p90: percentile(sorted, 90),
    p99: percentile(sorted, 99),
    max: sorted.length ? sorted[sorted.length - 1]! : Number.NaN,
    mean,
  };
}

/** A lag; a lower bound when `censored` (the job had not started when orloj stopped). */
export interface Lag {
  v: number;
  censored: boolean;
}

export interface LagSummary {
  count: number;
  /** How many values are lower bounds. */
  censored: number;
  p50: Lag;
  p90: Lag;
  p99: Lag;
  max: Lag;
}

export function lagSummary(values: readonly Lag[]): LagSummary {
  const sorted = [...values].sort((a, b) => a.v - b.v);
  const at = (p: number): Lag =>
    sorted.length ? sorted[Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length))) - 1]! : { v: Number.NaN, censored: false };
  return { count: sorted.length, censored: sorted.filter((l) => l.censored).length, p50: at(50), p90: at(90), p99: at(99), max: at(100) };
}

export const fmt = (n: number, digits = 0): string =>
  Number.isFinite(n) ? n.toLocaleString('en', { minimumFractionDigits: digits, maximumFractionDigits: digits }) : 'n/a';

/** Milliseconds for tables: whole ms from 10 ms up, one decimal below. */
export const ms = (n: number): string => (Number.isFinite(n) ? fmt(n, Math.abs(n) < 10 ? 1 : 0) : 'n/a');

export const mib = (bytes: number): string => `${fmt(bytes / 2 ** 20)} MiB`;

/** An integer setting from the environment (seconds, counts…), with a lower bound. */
export function envInt(name: string, fallback: number, min: number, env: NodeJS.ProcessEnv = process.env): number {
  const raw = env[name]?.trim();
  if (!raw) return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min) throw new Error(`${name} must be an integer ≥ ${min} (got "${raw}")`);
  return n;
}

export const sleep = (msToWait: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, Math.max(0, msToWait)));
