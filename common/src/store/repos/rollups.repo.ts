/**
 * The `workflow_rollups` table's SQL (migration 0018, issue 26): per workflow
 * and UTC hour, its finished runs (COMPLETED or FAILED), failures and a
 * histogram of response times, added to by the lifecycle as results arrive
 * (the workflow row locked, so one workflow's hour is written by one
 * transaction at a time), read by reliability reports.
 */
import type { Kysely } from 'kysely';
import type { Database } from '../schema.js';

/** Upper bounds (ms) of the histogram's buckets; one more bucket holds the rest. */
export const ROLLUP_BOUNDS_MS = [
  5, 10, 25, 50, 75, 100, 150, 200, 300, 500, 750, 1_000, 1_500, 2_000, 3_000, 5_000, 7_500, 10_000, 15_000, 30_000, 60_000, 120_000, 300_000, 600_000, 1_800_000, 3_600_000,
] as const;
const HOUR = 3_600_000;

export interface RollupSample {
  workflowId: string;
  userId: string;
  /** When the run finished (ms). */
  at: number;
  failed: boolean;
  /** The check's response time, or the run's duration; null when neither is known. */
  responseMs: number | null;
}

export interface RollupTotals {
  runs: number;
  failures: number;
  histogram: number[];
}

function bucketOf(ms: number): number {
  const i = ROLLUP_BOUNDS_MS.findIndex((b) => ms <= b);
  return i === -1 ? ROLLUP_BOUNDS_MS.length : i;
}

const emptyHistogram = (): number[] => new Array<number>(ROLLUP_BOUNDS_MS.length + 1).fill(0);

/** The `p`-th percentile (0–100) of a histogram, as its bucket's upper bound; null when empty. */
export function histogramPercentile(histogram: readonly number[], p: number): number | null {
  const total = histogram.reduce((a, b) => a + b, 0);
  if (total === 0) return null;
  const rank = Math.max(1, Math.ceil((p / 100) * total));
  let seen = 0;
  for (const [i, n] of histogram.entries()) {
    seen += n;
    if (seen >= rank) return ROLLUP_BOUNDS_MS[i] ?? ROLLUP_BOUNDS_MS[ROLLUP_BOUNDS_MS.length - 1]!;
  }
  return null;
}

export class RollupsRepo {
  constructor(private readonly db: Kysely<Database>) {}

  /** Adds one finished run to its workflow's hour. */
  async add(s: RollupSample): Promise<void> {
    const hourAt = Math.floor(s.at / HOUR) * HOUR;
    const row = await this.db.selectFrom('workflow_rollups').select(['runs', 'failures', 'histogram']).where('workflow_id', '=', s.workflowId).where('hour_at', '=', hourAt).executeTakeFirst();
    const histogram = row ? (JSON.parse(row.histogram) as number[]) : emptyHistogram();
    if (s.responseMs !== null) histogram[bucketOf(s.responseMs)] = (histogram[bucketOf(s.responseMs)] ?? 0) + 1;
    const values = { runs: (row?.runs ?? 0) + 1, failures: (row?.failures ?? 0) + (s.failed ? 1 : 0), histogram: JSON.stringify(histogram) };
    if (row) await this.db.updateTable('workflow_rollups').set(values).where('workflow_id', '=', s.workflowId).where('hour_at', '=', hourAt).execute();
    else await this.db.insertInto('workflow_rollups').values({ workflow_id: s.workflowId, hour_at: hourAt, user_id: s.userId, ...values }).execute();
  }

  /** The user's rollups since `from` (ms), summed per workflow (only `workflowId`'s when given). */
  async totals(userId: string, from: number, workflowId?: string): Promise<Map<string, RollupTotals>> {
    let q = this.db.selectFrom('workflow_rollups').select(['workflow_id', 'runs', 'failures', 'histogram']).where('user_id', '=', userId).where('hour_at', '>=', Math.floor(from / HOUR) * HOUR);
    if (workflowId) q = q.where('workflow_id', '=', workflowId);
    const out = new Map<string, RollupTotals>();
    for (const r of await q.execute()) {
      const t = out.get(r.workflow_id) ?? { runs: 0, failures: 0, histogram: emptyHistogram() };
      t.runs += r.runs;
      t.failures += r.failures;
      for (const [i, n] of (JSON.parse(r.histogram) as number[]).entries()) t.histogram[i] = (t.histogram[i] ?? 0) + n;
      out.set(r.workflow_id, t);
    }
    return out;
  }
}
