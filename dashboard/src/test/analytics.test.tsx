import { screen } from '@testing-library/react';
import { describe, expect, it } from 'vitest';
import type { UserAnalytics } from '../api/client';
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

describe('AnalyticsPage', () => {
  it('shows the totals, charts per kind and the top workflows from GET /analytics', async () => {
    const asked: string[] = [];
    fakeApi.handle = async (request) => {
      asked.push(`${request.method} ${new URL(request.url).pathname}`);
      return Response.json(analytics);
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
