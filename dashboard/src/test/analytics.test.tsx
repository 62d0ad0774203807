import { screen } from '@testing-library/react';
import { describe, expect, it } from 'vitest';
import type { ReliabilityReport, UserAnalytics } from '../api/client';
import { reportCsv } from '../components/reliability';
import { AnalyticsPage } from '../routes/analytics';
import { fakeApi } from './fake-api';
import { renderWithProviders } from './render';

const analytics: UserAnalytics = {
  total_workflows: 3,
  total_jobs: 42,
  total_joblogs: 1234,
  total_job_execution_duration: 3725,
  workflow_kinds: [
    { kind: 'HEARTBEAT', total_workflows: 2, total_jobs: 40, total_joblogs: 0, total_job_execution_duration: 20 },
    { kind: 'CONTAINER', total_workflows: 1, total_jobs: 2, total_joblogs: 1234, total_job_execution_duration: 3705 },
  ],
  top_workflows: [
    { workflow_id: 'w1', workflow_name: 'Homepage', kind: 'HEARTBEAT', total_jobs: 30, total_joblogs: 0, total_job_execution_duration: 15 },
    { workflow_id: 'w2', workflow_name: 'Deleted workflow', kind: 'CONTAINER', total_jobs: 2, total_joblogs: 1234, total_job_execution_duration: 3705 },
  ],
};

const figures = { runs: 4, failures: 1, uptime_percent: 75, response_ms: { p50: 25, p95: 3000, p99: 3000 }, incidents: 1, downtime_ms: 60_000 };
const report: ReliabilityReport = {
  period: '24h',
  from: '2026-11-01T10:00:00.000Z',
  to: '2026-11-02T10:30:00.000Z',
  total: figures,
  workflows: [{ workflow_id: 'w1', workflow_name: 'Home, "page"', ...figures }],
};

describe('reliability report', () => {
  it('shows uptime and percentiles per workflow, and offers them as CSV', async () => {
    fakeApi.handle = async (request) => Response.json(new URL(request.url).pathname === '/api/reports/reliability' ? report : analytics);
    renderWithProviders(<AnalyticsPage />);
    const table = await screen.findByRole('table', { name: 'Reliability per workflow' });
    expect(table.textContent).toContain('75.00 %');
    expect(table.textContent).toContain('≤ 25 ms');
    expect(reportCsv(report)).toBe(
      'workflow_id,workflow_name,runs,failures,uptime_percent,p50_ms,p95_ms,p99_ms,incidents,downtime_ms\r\n"w1","Home, ""page""",4,1,75,25,3000,3000,1,60000\r\n',
    );
    expect(screen.getByRole('link', { name: 'Download CSV' }).getAttribute('download')).toBe('orloj-reliability-24h.csv');
  });
});

describe('AnalyticsPage', () => {
  it('shows the totals, charts per kind and the top workflows from GET /analytics', async () => {
    const asked: string[] = [];
    fakeApi.handle = async (request) => {
      asked.push(`${request.method} ${new URL(request.url).pathname}`);
      return Response.json(new URL(request.url).pathname === '/api/reports/reliability' ? report : analytics);
    };
    renderWithProviders(<AnalyticsPage />);
    const totals = await screen.findByLabelText('Totals');
    expect(totals.textContent).toContain('42');
    expect(totals.textContent).toContain('1h 2m');
    expect(asked).toContain('GET /api/analytics');
    expect(screen.getByRole('img', { name: 'Jobs per kind: HEARTBEAT 40, CONTAINER 2' })).toBeTruthy();
    const table = screen.getByRole('table', { name: 'Top workflows' });
    expect(table.querySelectorAll('tbody tr')).toHaveLength(2);
    // a deleted workflow has nothing to link to
    expect(screen.getByRole('link', { name: 'Homepage' }).getAttribute('href')).toBe('/workflows/w1');
    expect(screen.queryByRole('link', { name: 'Deleted workflow' })).toBeNull();
  });
});
