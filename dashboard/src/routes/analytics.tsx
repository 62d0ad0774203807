import { useQuery } from '@tanstack/react-query';
import { Link } from 'react-router';
import { api, call, type UserAnalytics } from '../api/client';
import { Spinner } from '../components/badges';
import { BarChart } from '../components/bar-chart';
import { DataTable } from '../components/data-table';
import { Facts } from '../components/facts';
import { formatCount, formatSeconds } from '../format';
import { useTitle } from '../components/use-title';
import { ReliabilitySection } from '../components/reliability';

function Totals({ a }: { a: UserAnalytics }) {
  return (
    <Facts
      className="stats"
      label="Totals"
      items={[
        ['Workflows', formatCount(a.total_workflows)],
        ['Jobs run', formatCount(a.total_jobs)],
        ['Log lines', formatCount(a.total_joblogs)],
        ['Total run time', formatSeconds(a.total_job_execution_duration)],
      ]}
    />
  );
}

export function AnalyticsPage() {
  useTitle('Analytics');
  const analytics = useQuery({
    queryKey: ['analytics', 'user'],
    queryFn: () => call(api.GET('/analytics')),
    refetchInterval: 15_000,
  });
  if (analytics.isPending) return <Spinner />;
  if (analytics.isError && !analytics.data) return <p className="error-text">{analytics.error.message}</p>;
  const a = analytics.data;
  return (
    <div>
      <h1>Analytics</h1>
      <Totals a={a} />
      <ReliabilitySection />
      <h2>Volume</h2>
      <div className="charts">
        <BarChart title="Jobs per kind" items={a.workflow_kinds.map((k) => ({ label: k.kind, value: k.total_jobs }))} format={formatCount} />
        <BarChart
          title="Run time per kind"
          items={a.workflow_kinds.map((k) => ({ label: k.kind, value: k.total_job_execution_duration }))}
          format={formatSeconds}
        />
        <BarChart title="Top workflows by jobs" items={a.top_workflows.map((w) => ({ label: w.workflow_name, value: w.total_jobs }))} format={formatCount} />
      </div>
      {a.top_workflows.length ? (
        <DataTable
          label="Top workflows"
          rows={a.top_workflows}
          rowKey={(w) => w.workflow_id}
          columns={[
            { header: 'Workflow', cell: (w) => (w.workflow_name === 'Deleted workflow' ? w.workflow_name : <Link to={`/workflows/${w.workflow_id}`}>{w.workflow_name}</Link>) },
            { header: 'Kind', cell: (w) => w.kind },
            { header: 'Jobs', cell: (w) => formatCount(w.total_jobs) },
            { header: 'Log lines', cell: (w) => formatCount(w.total_joblogs) },
            { header: 'Run time', cell: (w) => formatSeconds(w.total_job_execution_duration) },
          ]}
        />
      ) : null}
    </div>
  );
}
