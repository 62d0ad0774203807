import { useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { Link } from 'react-router';
import { api, call, type ReliabilityReport } from '../api/client';
import { formatCount, formatSeconds } from '../format';
import { Spinner } from './badges';
import { DataTable } from './data-table';
import { Facts } from './facts';
import { SelectField } from './fields';

/** Reliability over a period (issue 26, docs/api.md "Reliability reports"): uptime, response-time percentiles, incidents, downtime; with a CSV download. */

type Period = ReliabilityReport['period'];
type Row = ReliabilityReport['workflows'][number];
const PERIODS: readonly [Period, string][] = [
  ['24h', 'Last 24 hours'],
  ['7d', 'Last 7 days'],
  ['30d', 'Last 30 days'],
  ['90d', 'Last 90 days'],
  ['365d', 'Last 365 days'],
];

const uptime = (p: number | null) => (p === null ? '—' : `${p.toFixed(p === 100 ? 0 : 2)} %`);
const ms = (v: number | null) => (v === null ? '—' : v < 1000 ? `≤ ${v} ms` : `≤ ${formatSeconds(v / 1000)}`);

const CSV_HEAD = ['workflow_id', 'workflow_name', 'runs', 'failures', 'uptime_percent', 'p50_ms', 'p95_ms', 'p99_ms', 'incidents', 'downtime_ms'];
const cell = (v: string | number | null) => (v === null ? '' : typeof v === 'number' ? String(v) : `"${v.replace(/"/g, '""')}"`);

/** The report as CSV (RFC 4180), one line a workflow. */
export function reportCsv(r: ReliabilityReport): string {
  const line = (w: Row) => [w.workflow_id, w.workflow_name, w.runs, w.failures, w.uptime_percent, w.response_ms.p50, w.response_ms.p95, w.response_ms.p99, w.incidents, w.downtime_ms].map(cell).join(',');
  return [CSV_HEAD.join(','), ...r.workflows.map(line)].join('\r\n') + '\r\n';
}

export function ReliabilitySection() {
  const [period, setPeriod] = useState<Period>('24h');
  const report = useQuery({
    queryKey: ['reports', 'reliability', period],
    queryFn: () => call(api.GET('/reports/reliability', { params: { query: { period } } })),
    refetchInterval: 30_000,
  });
  const r = report.data;
  return (
    <section aria-labelledby="reliability-title">
      <h2 id="reliability-title">Reliability</h2>
      <div className="row">
        <SelectField id="reliability-period" label="Period" value={period} onChange={(v) => setPeriod(v as Period)} options={PERIODS} />
        {r ? (
          <a className="button secondary" href={`data:text/csv;charset=utf-8,${encodeURIComponent(reportCsv(r))}`} download={`orloj-reliability-${r.period}.csv`}>
            Download CSV
          </a>
        ) : null}
      </div>
      {report.isPending ? (
        <Spinner />
      ) : !r ? (
        <p className="error-text">{report.error?.message}</p>
      ) : (
        <>
          <Facts
            className="stats"
            label="Reliability totals"
            items={[
              ['Uptime', uptime(r.total.uptime_percent)],
              ['Runs', formatCount(r.total.runs)],
              ['Response p50 / p95 / p99', `${ms(r.total.response_ms.p50)} / ${ms(r.total.response_ms.p95)} / ${ms(r.total.response_ms.p99)}`],
              ['Incidents', formatCount(r.total.incidents)],
              ['Downtime', formatSeconds(r.total.downtime_ms / 1000)],
            ]}
          />
          {r.workflows.length ? (
            <DataTable
              label="Reliability per workflow"
              rows={r.workflows}
              rowKey={(w) => w.workflow_id}
              columns={[
                { header: 'Workflow', cell: (w) => <Link to={`/workflows/${w.workflow_id}`}>{w.workflow_name}</Link> },
                { header: 'Uptime', cell: (w) => uptime(w.uptime_percent) },
                { header: 'Runs', cell: (w) => formatCount(w.runs) },
                { header: 'p50', cell: (w) => ms(w.response_ms.p50) },
                { header: 'p95', cell: (w) => ms(w.response_ms.p95) },
                { header: 'p99', cell: (w) => ms(w.response_ms.p99) },
                { header: 'Incidents', cell: (w) => formatCount(w.incidents) },
                { header: 'Downtime', cell: (w) => formatSeconds(w.downtime_ms / 1000) },
              ]}
            />
          ) : (
            <p className="muted">No finished runs in this period.</p>
          )}
        </>
      )}
    </section>
  );
}
