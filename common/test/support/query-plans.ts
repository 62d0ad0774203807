import { CompiledQuery, createQueryId, type Kysely, type KyselyPlugin, type PluginTransformQueryArgs, type PluginTransformResultArgs, type QueryResult, type RootOperationNode, type UnknownRow } from 'kysely';
import { CompiledReads, Store, type Database, type RowReader } from '@orloj/common/store';

/** Records every statement a store runs, for EXPLAIN afterwards. */
class Statements implements KyselyPlugin {
  /** Kysely's query nodes, or a compiled read as it ran. */
  readonly nodes: ({ node: RootOperationNode } | { compiled: CompiledQuery })[] = [];
  transformQuery(args: PluginTransformQueryArgs): RootOperationNode {
    this.nodes.push({ node: args.node });
    return args.node;
  }
  transformResult(args: PluginTransformResultArgs): Promise<QueryResult<UnknownRow>> {
    return Promise.resolve(args.result);
  }
}

/**
 * A store over `store`'s database that records the statements it runs, in
 * order: those Kysely builds (compiled when `statements()` is called) and the
 * compiled reads (through a reader that records them; they are compiled once,
 * on the untraced database, so their slots are never recorded).
 */
export function tracedStore(store: Store): { store: Store; statements: () => CompiledQuery[] } {
  const recorded = new Statements();
  const executor = store.db.getExecutor();
  const reader: RowReader = {
    async rows(sql, parameters) {
      const query = CompiledQuery.raw(sql, [...parameters]);
      recorded.nodes.push({ compiled: query });
      return (await store.db.executeQuery<Record<string, unknown>>(query)).rows.map((row) => Object.values(row));
    },
    close: () => Promise.resolve(),
  };
  return {
    store: new Store(store.db.withPlugin(recorded), store.dialect, new CompiledReads(store.db, reader)),
    statements: () => recorded.nodes.map((r) => ('compiled' in r ? r.compiled : executor.compileQuery(r.node, createQueryId()))),
  };
}

/**
 * What a statement's plan reads of `jobs`, for tests that a query does not
 * scan a backlog (deterministic: plans, not timings). PostgreSQL: the plan run
 * (EXPLAIN ANALYZE), its rows of `jobs` read over all loops (returned or
 * filtered out) and its scans of `jobs`. SQLite: EXPLAIN QUERY PLAN's steps,
 * which name each table (or alias) searched through an index or scanned.
 */
export async function planOf(db: Kysely<Database>, engine: 'sqlite' | 'postgres', q: CompiledQuery): Promise<{ rows?: number; steps: string[] }> {
  if (engine === 'postgres') {
    const [row] = (await db.executeQuery<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>(CompiledQuery.raw(`explain (analyze, format json) ${q.sql}`, [...q.parameters]))).rows;
    return jobsRowsRead(row!['QUERY PLAN'][0].Plan);
  }
  const plan = await db.executeQuery<{ detail: string }>(CompiledQuery.raw(`explain query plan ${q.sql}`, [...q.parameters]));
  return { steps: plan.rows.map((r) => r.detail) };
}

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  'Actual Rows': number;
  'Actual Loops': number;
  'Rows Removed by Filter'?: number;
  'Rows Removed by Index Recheck'?: number;
  Plans?: PlanNode[];
}

function jobsRowsRead(node: PlanNode): { rows: number; steps: string[] } {
  let rows = 0;
  const steps: string[] = [];
  if (node['Relation Name'] === 'jobs') {
    rows += (node['Actual Rows'] + (node['Rows Removed by Filter'] ?? 0) + (node['Rows Removed by Index Recheck'] ?? 0)) * node['Actual Loops'];
    steps.push(`${node['Node Type']} ${node['Index Name'] ?? ''}`.trim());
  }
  for (const child of node.Plans ?? []) {
    const sub = jobsRowsRead(child);
    rows += sub.rows;
    steps.push(...sub.steps);
  }
  return { rows, steps };
}

/**
 * Names a SQLite plan may scan in the statements checked: the users' lists, the ids given
 * (dialect.idIn), small derived tables, and of `jobs` only jobs_queued_idx, which holds the
 * QUEUED jobs alone (never the PENDING backlog).
 */
const SCANNED_OK = /^SCAN (CONSTANT ROW|u|given|pending_users|queued|jobs USING COVERING INDEX jobs_queued_idx)\b/;

/**
 * Fails unless `q` reads at most `maxRows` rows of `jobs` through its indexes
 * (PostgreSQL: measured on the plan run) or, on SQLite, scans no table and,
 * where it reads PENDING jobs, neither sorts them nor reads them by status
 * alone (every PENDING job: the backlog).
 */
export async function assertNoBacklogRead(db: Kysely<Database>, engine: 'sqlite' | 'postgres', q: CompiledQuery, maxRows: number): Promise<void> {
  const plan = await planOf(db, engine, q);
  const text = `${q.sql}\n${plan.steps.join('\n')}`;
  if (engine === 'postgres') {
    if (plan.steps.some((s) => s.startsWith('Seq Scan'))) throw new Error(`a scan of jobs:\n${text}`);
    if (plan.rows! > maxRows) throw new Error(`${plan.rows} rows of jobs read (at most ${maxRows}):\n${text}`);
    return;
  }
  if (plan.steps.some((s) => s.startsWith('SCAN ') && !SCANNED_OK.test(s))) throw new Error(`a scan:\n${text}`);
  if (q.sql.includes("'PENDING'") && plan.steps.some((s) => /TEMP B-TREE|jobs_pending_idx|jobs_status_idx \(status=\?\)/.test(s))) {
    throw new Error(`PENDING jobs read by status or sorted:\n${text}`);
  }
}

/** Fresh planner statistics of the job tables, as a running installation has them (PostgreSQL's autovacuum, SQLite's PRAGMA optimize). */
export async function analyzeJobs(db: Kysely<Database>, engine: 'sqlite' | 'postgres'): Promise<void> {
  await db.executeQuery(CompiledQuery.raw(engine === 'postgres' ? 'analyze jobs; analyze workflows' : 'analyze'));
}
