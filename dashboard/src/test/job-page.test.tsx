import { screen } from '@testing-library/react';
import { Route, Routes } from 'react-router';
import { describe, expect, it } from 'vitest';
import type { Job, JobAttempt, Workflow } from '../api/client';
import { useJobAttempts } from '../components/job-attempts';
import { JobPage } from '../routes/job';
import { fakeApi } from './fake-api';
import { workflow } from './factories';
import { renderWithProviders } from './render';

const job: Job = {
  id: 'job',
  workflow_id: 'wf',
  status: 'COMPLETED',
  trigger: 'MANUAL',
  scheduled_at: '2026-11-01T10:00:00.000Z',
  started_at: '2026-11-01T10:00:01.000Z',
  completed_at: '2026-11-01T10:01:30.000Z',
  created_at: '2026-11-01T10:00:00.000Z',
  updated_at: '2026-11-01T10:01:30.000Z',
};
const attempts: JobAttempt[] = [
  { attempt: 1, outcome: 'RETRIED', runner_id: 'runner-a', started_at: '2026-11-01T10:00:01.000Z', ended_at: '2026-11-01T10:00:30.000Z', reason: { code: 'lease_lost', message: 'Gone.' }, log_lines: 9 },
  { attempt: 2, outcome: 'COMPLETED', runner_id: 'runner-b', started_at: '2026-11-01T10:00:40.000Z', ended_at: '2026-11-01T10:01:30.000Z', log_lines: 160 },
];

/** Shows once the page's attempts query has its answer (the same cache as the page's). */
function AttemptsKnown() {
  return useJobAttempts('wf', 'job', true).data ? <p>attempts known</p> : null;
}

describe('JobPage', () => {
  it("lists a job's attempts only once the log above them has its place, so that their links stay where they are", async () => {
    let answerWorkflow: (w: Workflow) => void = () => {};
    const workflowAnswer = new Promise<Workflow>((resolve) => (answerWorkflow = resolve));
    fakeApi.handle = async (request) => {
      const path = new URL(request.url).pathname;
      if (path === '/api/workflows/wf') return Response.json(await workflowAnswer);
      if (path === '/api/workflows/wf/jobs/job') return Response.json(job);
      if (path === '/api/workflows/wf/jobs/job/attempts') return Response.json({ id: 'job', workflow_id: 'wf', attempts });
      if (path === '/api/workflows/wf/jobs/job/logs/lines') return Response.json({ id: 'job', workflow_id: 'wf', from: 0, total: 0, logs: [] });
      return Response.json({ title: 'Not found', status: 404 }, { status: 404 });
    };
    renderWithProviders(
      <Routes>
        <Route
          path="/workflows/:workflowId/jobs/:jobId"
          element={
            <>
              <JobPage />
              <AttemptsKnown />
            </>
          }
        />
      </Routes>,
      { at: '/workflows/wf/jobs/job' },
    );
    // The job and its attempts are known, the workflow (whether the job keeps a log) is not yet.
    await screen.findByText('attempts known');
    await screen.findByRole('heading', { name: 'Job' });
    expect(screen.queryByRole('heading', { name: 'Logs' })).toBeNull();
    expect(screen.queryByRole('table', { name: 'Attempts, oldest first' })).toBeNull();

    answerWorkflow(workflow({ id: 'wf', kind: 'CONTAINER', log_retention: true }));
    const table = await screen.findByRole('table', { name: 'Attempts, oldest first' });
    const logs = screen.getByRole('heading', { name: 'Logs' });
    expect(logs.compareDocumentPosition(table) & Node.DOCUMENT_POSITION_FOLLOWING).toBeTruthy();
    expect(screen.getByRole('link', { name: "Attempt 1's log (9 lines)" }).getAttribute('href')).toBe('/workflows/wf/jobs/job?attempt=1');
  });
});
