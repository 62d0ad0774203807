/**
 * The `workflow_rollups` table's SQL (migrations 0018 and 0023, issue 26): per
 * workflow and UTC hour, the workflow's finished runs (COMPLETED or FAILED),
 * failures and histogram of response times from its first rollup up to the
 * end of that hour — running totals, kept by the lifecycle as results arrive
 * (the workflow row locked, so one workflow's rows are written by one
 * transaction at a time), read by reliability reports.
 *
 * Running totals, not per-hour counts, so that a report reads two rows a
 * workflow whatever its period (the latest, and the latest before the
 * period), where per-hour counts made a 365-day report of 1,000 workflows
 * read and add up 8.76 million rows (docs/benchmarks.md, "reliability-report").
 * A write costs the same: one read of the workflow's latest row, then one
 * update or insert.
 */
import type { Kysely } from 'kysely';
import type { Database } from '../schema.js';

/** Upper bounds (ms) of the histogram's buckets; one more bucket holds the rest. */
export const ROLLUP_BOUNDS_MS = [
  5, 10, 25, 50, 75, 100, 150, 200, 300, 500, 750, 1_000, 1_500, 2_000, 3_000, 5_000, 7_500, 10_000, 15_000, 30_000, 60_000, 120_000, 300_000, 600_000, 1_800_000, 3_600_000,
] as const;
export const ROLLUP_HOUR_MS = 3_600_000;

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

/** A workflow's totals over a period, with its name (read in the same query, for the report). */
export type WorkflowRollup = RollupTotals & { workflowName: string };

function rollupBucketOf(ms: number): number {
  const i = ROLLUP_BOUNDS_MS.findIndex((b) => ms <= b);
  return i === -1 ? ROLLUP_BOUNDS_MS.length : i;
}

const emptyRollupHistogram = (): number[] => new Array<number>(ROLLUP_BOUNDS_MS.length + 1).fill(0);

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

interface StoredTotals {
  runs: number;
  failures: number;
  histogram: string;
}

const parse = (r: StoredTotals): RollupTotals => ({ runs: r.runs, failures: r.failures, histogram: JSON.parse(r.histogram) as number[] });

/** `a − b`, bucket by bucket. */
function minus(a: RollupTotals, b: RollupTotals | undefined): RollupTotals {
  if (!b) return a;
  return { runs: a.runs - b.runs, failures: a.failures - b.failures, histogram: a.histogram.map((n, i) => n - (b.histogram[i] ?? 0)) };
}

/** `t` with one more run in it (a new object; the histogram is copied). */
function plus(t: RollupTotals, s: RollupSample): StoredTotals {
  const histogram = [...t.histogram];
  if (s.responseMs !== null) {
    const i = rollupBucketOf(s.responseMs);
    histogram[i] = (histogram[i] ?? 0) + 1;
  }
  return { runs: t.runs + 1, failures: t.failures + (s.failed ? 1 : 0), histogram: JSON.stringify(histogram) };
}

export class RollupsRepo {
  constructor(private readonly db: Kysely<Database>) {}

  /** Adds one finished run to its workflow's running totals from its hour on. */
  async add(s: RollupSample): Promise<void> {
    const hourAt = Math.floor(s.at / ROLLUP_HOUR_MS) * ROLLUP_HOUR_MS;
    const latest = await this.db
      .selectFrom('workflow_rollups')
      .select(['hour_at', 'runs', 'failures', 'histogram'])
      .where('workflow_id', '=', s.workflowId)
      .orderBy('hour_at', 'desc')
      .limit(1)
      .executeTakeFirst();
    if (latest && Number(latest.hour_at) > hourAt) return this.addToPast(s, hourAt);
    const values = plus(latest ? parse(latest) : { runs: 0, failures: 0, histogram: emptyRollupHistogram() }, s);
    if (latest && Number(latest.hour_at) === hourAt) {
      await this.db.updateTable('workflow_rollups').set(values).where('workflow_id', '=', s.workflowId).where('hour_at', '=', hourAt).execute();
    } else {
      await this.db.insertInto('workflow_rollups').values({ workflow_id: s.workflowId, hour_at: hourAt, user_id: s.userId, ...values }).execute();
    }
  }

  /**
   * A run that finished in an hour before the workflow's latest row (runs
   * can end out of order across an hour's end): every row from its hour on
   * counts it, and its hour gets a row if it had none. Rare, and it touches
   * only the rows after that hour (usually one).
   */
  private async addToPast(s: RollupSample, hourAt: number): Promise<void> {
    const before = await this.db
      .selectFrom('workflow_rollups')
      .select(['hour_at', 'runs', 'failures', 'histogram'])
      .where('workflow_id', '=', s.workflowId)
      .where('hour_at', '<=', hourAt)
      .orderBy('hour_at', 'desc')
      .limit(1)
      .executeTakeFirst();
    if (!before || Number(before.hour_at) < hourAt) {
      const base = before ? parse(before) : { runs: 0, failures: 0, histogram: emptyRollupHistogram() };
      await this.db.insertInto('workflow_rollups').values({ workflow_id: s.workflowId, hour_at: hourAt, user_id: s.userId, ...base, histogram: JSON.stringify(base.histogram) }).execute();
    }
    const rows = await this.db.selectFrom('workflow_rollups').select(['hour_at', 'runs', 'failures', 'histogram']).where('workflow_id', '=', s.workflowId).where('hour_at', '>=', hourAt).execute();
    for (const r of rows) {
      await this.db.updateTable('workflow_rollups').set(plus(parse(r), s)).where('workflow_id', '=', s.workflowId).where('hour_at', '=', r.hour_at).execute();
    }
  }

  /**
   * The runs of the user's workflows (only `workflowId`'s when given) in the
   * hours from `from`'s on: per workflow, its latest row minus its latest row
   * before that hour. Two index seeks a workflow (the primary key), whatever
   * the period.
   */
  async totals(userId: string, from: number, workflowId?: string): Promise<Map<string, WorkflowRollup>> {
    const fromHour = Math.floor(from / ROLLUP_HOUR_MS) * ROLLUP_HOUR_MS;
    const rowsAt = (before?: number) => {
      let q = this.db
        .selectFrom('workflows as w')
        .innerJoin('workflow_rollups as r', 'r.workflow_id', 'w.id')
        .select(['r.workflow_id', 'w.name', 'r.runs', 'r.failures', 'r.histogram'])
        .where('w.user_id', '=', userId)
        .where('r.hour_at', '=', (eb) => {
          // ORDER BY … LIMIT 1, not max(): SQLite reads a correlated max() through every index entry of the workflow.
          let latest = eb.selectFrom('workflow_rollups as x').select('x.hour_at').whereRef('x.workflow_id', '=', 'w.id');
          if (before !== undefined) latest = latest.where('x.hour_at', '<', before);
          return latest.orderBy('x.hour_at', 'desc').limit(1);
        });
      if (workflowId) q = q.where('w.id', '=', workflowId);
      return q.execute();
    };
    const [ends, starts] = [await rowsAt(), await rowsAt(fromHour)];
    const start = new Map(starts.map((r) => [r.workflow_id, parse(r)]));
    const out = new Map<string, WorkflowRollup>();
    for (const r of ends) {
      const t = minus(parse(r), start.get(r.workflow_id));
      if (t.runs > 0) out.set(r.workflow_id, { ...t, workflowName: r.name });
    }
    return out;
  }
}
