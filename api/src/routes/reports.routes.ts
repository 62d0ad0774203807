import type { Context } from 'koa';
import { isUuid, notFound } from '@orloj/common/core';
import { histogramPercentile, ROLLUP_BOUNDS_MS, type Incident, type RollupTotals } from '@orloj/common/store';
import type { ApiDeps } from '../deps.js';
import { json, named, type Wire } from '../contract/components.js';
import type { Operation } from '../contract/operation.js';
import { dateTime, uuid } from '../contract/responses.js';
import { QueryReader } from '../http/validate.js';
import { problem } from '../contract/shared.js';

/**
 * Reliability reports (issue 26): uptime and response-time percentiles per
 * workflow and for all, over a period, from the hourly rollups the lifecycle
 * keeps as results arrive (common/src/store/repos/rollups.repo.ts), and the
 * period's incidents. Additions to the contract.
 */

const HOUR = 3_600_000;
const PERIODS = { '24h': 24 * HOUR, '7d': 7 * 24 * HOUR, '30d': 30 * 24 * HOUR, '90d': 90 * 24 * HOUR, '365d': 365 * 24 * HOUR } as const;
type Period = keyof typeof PERIODS;
const PERIOD_NAMES = Object.keys(PERIODS) as Period[];
/** The period a report covers when none is asked for. */
const DEFAULT_PERIOD: Period = '24h';

const percentiles = {
  type: 'object',
  required: ['p50', 'p95', 'p99'],
  properties: { p50: { type: ['integer', 'null'] }, p95: { type: ['integer', 'null'] }, p99: { type: ['integer', 'null'] } },
  additionalProperties: false,
  description: `Response time (ms): a HEARTBEAT check's, else how long the run took; each the upper bound of its histogram bucket (bounds: ${ROLLUP_BOUNDS_MS.join(', ')} ms); null without runs.`,
} as const;
const figures = {
  runs: { type: 'integer', minimum: 0, description: 'Finished runs (COMPLETED or FAILED) in the period.' },
  failures: { type: 'integer', minimum: 0 },
  uptime_percent: { type: ['number', 'null'], description: 'Completed runs ÷ finished runs × 100; null without runs.' },
  response_ms: percentiles,
  incidents: { type: 'integer', minimum: 0, description: 'Incidents open during the period.' },
  downtime_ms: { type: 'integer', minimum: 0, description: "The incidents' time within the period." },
} as const;
const FIGURES = ['runs', 'failures', 'uptime_percent', 'response_ms', 'incidents', 'downtime_ms'] as const;

export const reliabilityReportSchema = named('ReliabilityReport', {
  type: 'object',
  required: ['period', 'from', 'to', 'total', 'workflows'],
  properties: {
    period: { enum: PERIOD_NAMES },
    from: { ...dateTime, description: 'The start of the period, rounded down to the hour (rollups are hourly).' },
    to: dateTime,
    total: { type: 'object', required: [...FIGURES], properties: figures, additionalProperties: false },
    workflows: {
      type: 'array',
      items: {
        type: 'object',
        required: ['workflow_id', 'workflow_name', ...FIGURES],
        properties: { workflow_id: uuid, workflow_name: { type: 'string' }, ...figures },
        additionalProperties: false,
      },
    },
  },
  additionalProperties: false,
} as const);

type Figures = Omit<Wire<typeof reliabilityReportSchema>['total'], never>;

function figuresOf(t: RollupTotals | undefined, incidents: readonly Incident[], from: number, to: number): Figures {
  const histogram = t?.histogram ?? [];
  const down = incidents.reduce((sum, i) => sum + Math.max(0, Math.min(i.closedAt ?? to, to) - Math.max(i.startedAt, from)), 0);
  return {
    runs: t?.runs ?? 0,
    failures: t?.failures ?? 0,
    uptime_percent: t && t.runs > 0 ? Math.round(((t.runs - t.failures) / t.runs) * 100_000) / 1000 : null,
    response_ms: { p50: histogramPercentile(histogram, 50), p95: histogramPercentile(histogram, 95), p99: histogramPercentile(histogram, 99) },
    incidents: incidents.length,
    downtime_ms: down,
  };
}

function sum(all: Iterable<RollupTotals>): RollupTotals | undefined {
  let out: RollupTotals | undefined;
  for (const t of all) {
    out ??= { runs: 0, failures: 0, histogram: new Array<number>(t.histogram.length).fill(0) };
    out.runs += t.runs;
    out.failures += t.failures;
    t.histogram.forEach((n, i) => (out!.histogram[i] = (out!.histogram[i] ?? 0) + n));
  }
  return out;
}

async function report({ store, clock }: ApiDeps, ctx: Context): Promise<void> {
  const q = new QueryReader(ctx.query);
  const period = q.enumOf('period', PERIOD_NAMES) ?? DEFAULT_PERIOD;
  const workflowId = q.string('workflow_id', 64);
  if (workflowId !== undefined && !isUuid(workflowId)) q.fail('workflow_id', 'must be a UUID');
  q.done();
  const userId = ctx.state.session.userId as string;
  if (workflowId !== undefined && !(await store.workflows.findForUser(userId, workflowId))) throw notFound('The workflow');
  const to = clock.now();
  const from = Math.floor((to - PERIODS[period]) / HOUR) * HOUR;
  const [totals, incidents] = [await store.rollups.totals(userId, from, workflowId), await store.incidents.overlapping(userId, from, workflowId)];
  // Rollups and incidents both come with their workflow's name (a deleted workflow takes both with it).
  const names = new Map([...incidents.map((i) => [i.workflowId, i.workflowName] as const), ...[...totals].map(([id, t]) => [id, t.workflowName] as const)]);
  const ids = [...names.keys()];
  const byWorkflow = new Map<string, Incident[]>();
  for (const i of incidents) byWorkflow.set(i.workflowId, [...(byWorkflow.get(i.workflowId) ?? []), i]);
  const of = (id: string) => byWorkflow.get(id) ?? [];
  const toIso = (ms: number) => new Date(ms).toISOString();
  ctx.body = {
    period,
    from: toIso(from),
    to: toIso(to),
    total: figuresOf(sum(totals.values()), incidents, from, to),
    workflows: ids
      .map((id) => ({ workflow_id: id, workflow_name: names.get(id)!, ...figuresOf(totals.get(id), of(id), from, to) }))
      .sort((a, b) => (a.uptime_percent ?? 101) - (b.uptime_percent ?? 101) || a.workflow_name.localeCompare(b.workflow_name)),
  } satisfies Wire<typeof reliabilityReportSchema>;
}

export const reportsOperations: readonly Operation[] = [
  {
    method: 'get',
    path: '/reports/reliability',
    summary: 'Reliability over a period: uptime, response-time percentiles, incidents and downtime, per workflow and in total',
    description:
      'An addition to the contract (issue 26). From hourly rollups kept as results arrive, so the retention of raw jobs does not erase them. Workflows least up first. A deleted workflow leaves the report with its rollups.',
    access: 'session',
    parameters: [
      { name: 'period', in: 'query', schema: { enum: PERIOD_NAMES, default: DEFAULT_PERIOD } },
      { name: 'workflow_id', in: 'query', description: 'Only this workflow (404 when it is not yours).', schema: { type: 'string', format: 'uuid' } },
    ],
    responses: { '200': { description: 'The report.', content: json(reliabilityReportSchema) }, '404': problem('No such workflow of yours.') },
    handler: report,
  },
];
