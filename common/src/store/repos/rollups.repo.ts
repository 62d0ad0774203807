/**
 * The `workflow_rollups` table's SQL (migrations 0018, 0023 and 0026, issue 26): per
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
 * A write costs about the same: a run of the hour of its workflow's latest row
 * (59 runs in 60 of a one-minute check) is added to that row in place; the
 * hour's first run reads the latest row and inserts the hour's.
 *
 * The histogram is one integer column a bucket (migration 0026), so that the
 * in-place add is one UPDATE with no read and no JSON to parse and write
 * again (docs/benchmarks.md, "rollup-cost").
 */
import type { Insertable, Kysely } from 'kysely';
import type { Database, RollupBucketColumn, WorkflowRollupsTable } from '../schema.js';
import { slot, type ReadRunner } from '../compiled-read.js';

/** Upper bounds (ms) of the histogram's buckets; one more bucket holds the rest. A bucket is a column: changing them takes a migration. */
export const ROLLUP_BOUNDS_MS = [
  5, 10, 25, 50, 75, 100, 150, 200, 300, 500, 750, 1_000, 1_500, 2_000, 3_000, 5_000, 7_500, 10_000, 15_000, 30_000, 60_000, 120_000, 300_000, 600_000, 1_800_000, 3_600_000,
] as const;
export const ROLLUP_HOUR_MS = 3_600_000;

/** The histogram's columns, bucket by bucket. */
export const ROLLUP_BUCKET_COLUMNS = Array.from({ length: ROLLUP_BOUNDS_MS.length + 1 }, (_, i) => `bucket_${i}` as RollupBucketColumn);

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

const hourOf = (at: number): number => Math.floor(at / ROLLUP_HOUR_MS) * ROLLUP_HOUR_MS;

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

type StoredTotals = Pick<WorkflowRollupsTable, 'runs' | 'failures' | RollupBucketColumn>;

const parse = (r: StoredTotals): RollupTotals => ({ runs: r.runs, failures: r.failures, histogram: ROLLUP_BUCKET_COLUMNS.map((c) => r[c]) });

/** `a − b`, bucket by bucket. */
function minus(a: RollupTotals, b: RollupTotals | undefined): RollupTotals {
  if (!b) return a;
  return { runs: a.runs - b.runs, failures: a.failures - b.failures, histogram: a.histogram.map((n, i) => n - (b.histogram[i] ?? 0)) };
}

/** `a + b`, bucket by bucket (a new object). */
function plus(a: RollupTotals, b: RollupTotals): RollupTotals {
  return { runs: a.runs + b.runs, failures: a.failures + b.failures, histogram: a.histogram.map((n, i) => n + (b.histogram[i] ?? 0)) };
}

const zero = (): RollupTotals => ({ runs: 0, failures: 0, histogram: emptyRollupHistogram() });

/** One row to write: a workflow's running totals up to the end of `hourAt`. */
interface RollupRow {
  workflowId: string;
  userId: string;
  hourAt: number;
  totals: RollupTotals;
}

/** A workflow's samples of one batch, by hour (ascending): what each hour adds. */
interface WorkflowDeltas {
  workflowId: string;
  userId: string;
  hours: Array<{ hourAt: number; delta: RollupTotals }>;
}

/** The batch's samples by workflow, each workflow's hours in order. */
function deltasOf(samples: readonly RollupSample[]): WorkflowDeltas[] {
  const byWorkflow = new Map<string, WorkflowDeltas>();
  for (const s of samples) {
    let w = byWorkflow.get(s.workflowId);
    if (!w) byWorkflow.set(s.workflowId, (w = { workflowId: s.workflowId, userId: s.userId, hours: [] }));
    const hourAt = hourOf(s.at);
    let h = w.hours.find((x) => x.hourAt === hourAt);
    if (!h) w.hours.push((h = { hourAt, delta: zero() }));
    h.delta.runs++;
    if (s.failed) h.delta.failures++;
    if (s.responseMs !== null) h.delta.histogram[rollupBucketOf(s.responseMs)]!++;
  }
  for (const w of byWorkflow.values()) w.hours.sort((a, b) => a.hourAt - b.hourAt);
  return [...byWorkflow.values()];
}

/**
 * The rows that put `w`'s samples into its running totals, given its stored
 * rows from its first sample's hour on and the latest before it (`stored`,
 * ascending): every row from a sample's hour on counts the sample, and each
 * sample's hour has a row (the totals of the latest row before it, plus what
 * the batch adds up to that hour).
 */
function rowsFor(w: WorkflowDeltas, stored: ReadonlyArray<{ hourAt: number; totals: RollupTotals }>): RollupRow[] {
  const hours = [...new Set([...stored.map((r) => r.hourAt).filter((h) => h >= w.hours[0]!.hourAt), ...w.hours.map((h) => h.hourAt)])].sort((a, b) => a - b);
  const out: RollupRow[] = [];
  let base = zero();
  let added = zero();
  let [i, j] = [0, 0];
  for (const hourAt of hours) {
    for (; i < stored.length && stored[i]!.hourAt <= hourAt; i++) base = stored[i]!.totals;
    for (; j < w.hours.length && w.hours[j]!.hourAt <= hourAt; j++) added = plus(added, w.hours[j]!.delta);
    out.push({ workflowId: w.workflowId, userId: w.userId, hourAt, totals: plus(base, added) });
  }
  return out;
}

/** Rows a statement of the set-wise reads and writes (32 parameters a row: 16,000, under either engine's limit). */
const CHUNK = 500;

export class RollupsRepo {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly runner: ReadRunner,
  ) {}

  /** Adds one finished run to its workflow's running totals from its hour on. */
  add(s: RollupSample): Promise<void> {
    return this.addMany([s]);
  }

  /**
   * Adds finished runs to their workflows' running totals. On SQLite inside
   * a transaction, a run of the hour of its workflow's latest row is one
   * UPDATE (addInPlace). The others — and all of them elsewhere — take the
   * long way, a workflow at a time whatever its number of runs in the
   * batch: its latest row read, then one upsert a sample hour of the running
   * totals computed here. On SQLite these run statements compiled once
   * (ADR 0017); elsewhere the batch's reads and writes go as one statement
   * each. A run that ended in an hour before its workflow's latest row (runs
   * end out of order across an hour's end) reads the rows from its hour on as
   * well, and adds to each (rare: usually one).
   */
  async addMany(samples: readonly RollupSample[]): Promise<void> {
    const rest = samples.length === 0 ? samples : (this.addInPlace(samples) ?? samples);
    if (rest.length === 0) return;
    const workflows = deltasOf(rest);
    const latest = await this.latest(workflows.map((w) => w.workflowId));
    const rows: RollupRow[] = [];
    for (const w of workflows) {
      const last = latest.get(w.workflowId);
      const stored = last && last.hourAt > w.hours[0]!.hourAt ? await this.from(w.workflowId, w.hours[0]!.hourAt) : last ? [last] : [];
      rows.push(...rowsFor(w, stored));
    }
    await this.write(rows);
  }

  /** Each workflow's latest row, if it has one. */
  private async latest(ids: readonly string[]): Promise<Map<string, { hourAt: number; totals: RollupTotals }>> {
    const one = this.runner.reads.get('rollups.latest', (db) =>
      db
        .selectFrom('workflow_rollups')
        .select(['workflow_id', 'hour_at', 'runs', 'failures', ...ROLLUP_BUCKET_COLUMNS])
        .where('workflow_id', '=', slot<string>('id'))
        .orderBy('hour_at', 'desc')
        .limit(1),
    );
    type Row = StoredTotals & { workflow_id: string; hour_at: number | string };
    const rows = (this.runner.eachRow(one, ids, (id) => ({ id }))?.flat() as Row[] | undefined) ?? (await this.latestSetWise(ids));
    return new Map(rows.map((r) => [r.workflow_id, { hourAt: Number(r.hour_at), totals: parse(r) }]));
  }

  private async latestSetWise(ids: readonly string[]) {
    const rows = [];
    for (let i = 0; i < ids.length; i += CHUNK) {
      rows.push(
        ...(await this.db
          .selectFrom('workflows as w')
          .innerJoin('workflow_rollups as r', 'r.workflow_id', 'w.id')
          .select(['r.workflow_id', 'r.hour_at', 'r.runs', 'r.failures', ...ROLLUP_BUCKET_COLUMNS.map((c) => `r.${c}` as const)])
          .where('w.id', 'in', ids.slice(i, i + CHUNK))
          // As in totals(): the latest hour found once a workflow (correlated with w, not r), then its row by the primary key.
          .where('r.hour_at', '=', (eb) => eb.selectFrom('workflow_rollups as x').select('x.hour_at').whereRef('x.workflow_id', '=', 'w.id').orderBy('x.hour_at', 'desc').limit(1))
          .execute()),
      );
    }
    return rows;
  }

  /** The workflow's rows from `hourAt` on, and the latest before it, ascending. */
  private async from(workflowId: string, hourAt: number): Promise<Array<{ hourAt: number; totals: RollupTotals }>> {
    const q = this.db.selectFrom('workflow_rollups').select(['hour_at', 'runs', 'failures', ...ROLLUP_BUCKET_COLUMNS]).where('workflow_id', '=', workflowId);
    const before = await q.where('hour_at', '<', hourAt).orderBy('hour_at', 'desc').limit(1).execute();
    const after = await q.where('hour_at', '>=', hourAt).orderBy('hour_at').execute();
    return [...before, ...after].map((r) => ({ hourAt: Number(r.hour_at), totals: parse(r) }));
  }

  /** Inserts the rows, or updates those that exist (the same workflow and hour). */
  private async write(rows: readonly RollupRow[]): Promise<void> {
    type Values = Insertable<WorkflowRollupsTable>;
    const upsert = (values: Values | Values[], db: Kysely<Database>) =>
      db
        .insertInto('workflow_rollups')
        .values(values)
        .onConflict((oc) =>
          oc.columns(['workflow_id', 'hour_at']).doUpdateSet((eb) => ({
            runs: eb.ref('excluded.runs'),
            failures: eb.ref('excluded.failures'),
            ...Object.fromEntries(ROLLUP_BUCKET_COLUMNS.map((c) => [c, eb.ref(`excluded.${c}`)])),
          })),
        );
    const valuesOf = (r: RollupRow) =>
      ({
        workflow_id: r.workflowId,
        hour_at: r.hourAt,
        user_id: r.userId,
        runs: r.totals.runs,
        failures: r.totals.failures,
        ...Object.fromEntries(ROLLUP_BUCKET_COLUMNS.map((c, i) => [c, r.totals.histogram[i]!])),
      }) as Values;
    const slots = Object.fromEntries(['workflow_id', 'hour_at', 'user_id', 'runs', 'failures', ...ROLLUP_BUCKET_COLUMNS].map((c) => [c, slot(c)])) as unknown as Values;
    if (rows.length === 0 || this.runner.eachRow(this.runner.reads.get('rollups.upsert', (db) => upsert(slots, db)), rows, valuesOf)) return;
    for (let i = 0; i < rows.length; i += CHUNK) await upsert(rows.slice(i, i + CHUNK).map(valuesOf), this.db).execute();
  }

  /**
   * On SQLite inside a transaction, adds each run that ended in the hour of
   * its workflow's latest row to that row, in place: one UPDATE a run, which
   * adds to its bucket's column and finds no later row. Answers the runs
   * that found no such row (the hour's first run of a workflow, or one out of
   * order), for addMany to add the long way; undefined, adding nothing,
   * elsewhere.
   */
  private addInPlace(samples: readonly RollupSample[]): RollupSample[] | undefined {
    const byBucket = new Map<number | null, RollupSample[]>();
    for (const s of samples) {
      const bucket = s.responseMs === null ? null : rollupBucketOf(s.responseMs);
      const group = byBucket.get(bucket);
      if (group) group.push(s);
      else byBucket.set(bucket, [s]);
    }
    const rest: RollupSample[] = [];
    for (const [bucket, group] of byBucket) {
      const added = this.runner.eachRow(this.inPlaceStatement(bucket), group, (s) => ({ id: s.workflowId, hourAt: hourOf(s.at), failed: s.failed ? 1 : 0 }));
      if (!added) return undefined;
      group.forEach((s, i) => {
        if (added[i]!.length === 0) rest.push(s);
      });
    }
    return rest;
  }

  /** addInPlace's UPDATE for a run in `bucket` (null: a run without a response time). */
  private inPlaceStatement(bucket: number | null) {
    const column = bucket === null ? undefined : ROLLUP_BUCKET_COLUMNS[bucket]!;
    return this.runner.reads.get(`rollups.addInPlace:${column ?? 'none'}`, (db) =>
      db
        .updateTable('workflow_rollups')
        .set((eb) => ({
          runs: eb('runs', '+', 1),
          failures: eb('failures', '+', slot<number>('failed')),
          ...(column ? { [column]: eb(column, '+', 1) } : {}),
        }))
        .where('workflow_id', '=', slot<string>('id'))
        .where('hour_at', '=', slot<number>('hourAt'))
        .where(({ not, exists, selectFrom }) =>
          not(exists(selectFrom('workflow_rollups as later').select('later.hour_at').where('later.workflow_id', '=', slot<string>('id')).where('later.hour_at', '>', slot<number>('hourAt')))),
        )
        .returning('workflow_id'),
    );
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
        .select(['r.workflow_id', 'w.name', 'r.runs', 'r.failures', ...ROLLUP_BUCKET_COLUMNS.map((c) => `r.${c}` as const)])
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
