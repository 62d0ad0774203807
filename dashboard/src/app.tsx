import { QueryClientProvider, useQueryClient } from '@tanstack/react-query';
import { useEffect, useState, type ReactNode } from 'react';
import { BrowserRouter, Navigate, Route, Routes, useLocation } from 'react-router';
import { Layout } from './components/layout';
import { Spinner } from './components/badges';
import { Toasts } from './components/toasts';
import { createQueryClient } from './query-client';
import { probablySignedIn, useSession } from './session';
import { AuthPage } from './routes/auth';
import { attentionSummaryQuery, WorkflowsPage, workflowListQuery } from './routes/workflows';
import { EditWorkflowPage, NewWorkflowPage } from './routes/workflow-editor';
import { WorkflowPage } from './routes/workflow';
import { JobPage } from './routes/job';
import { ProfilePage } from './routes/profile';
import { AnalyticsPage } from './routes/analytics';
import { MaintenancePage } from './routes/maintenance';

/** Pages behind sign-in: unknown or dead sessions go to /login, and come back after. */
function RequireSession({ children }: { children: ReactNode }) {
  const session = useSession();
  const location = useLocation();
  const client = useQueryClient();
  // The list (and its counts) are asked for at once with the session check, not after it: the
  // first screen waits for the slower of the two, not for their sum (issue 26).
  // Only when this browser was signed in when last seen (no 401 for a visitor).
  useEffect(() => {
    if ((location.pathname !== '/' && location.pathname !== '/workflows') || !probablySignedIn()) return;
    void client.prefetchInfiniteQuery(workflowListQuery(new URLSearchParams(location.search)));
    void client.prefetchQuery(attentionSummaryQuery);
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, []);
  if (session.isPending) return <Spinner label="Checking your session…" />;
  // Only when there is no session known yet: a check that fails while the server is away (the disconnected
  // banner retries every query on screen, this one included) must not take the page down with it.
  if (session.isError && session.data === undefined) {
    return (
      <main className="page narrow">
        <h1>orloj is not reachable</h1>
        <p>{session.error.message}</p>
        <button type="button" onClick={() => void session.refetch()}>
          Try again
        </button>
      </main>
    );
  }
  if (!session.data) return <Navigate to="/login" replace state={{ from: location.pathname + location.search }} />;
  return children;
}

export function App() {
  const [client] = useState(createQueryClient);
  return (
    <QueryClientProvider client={client}>
      <BrowserRouter>
        <Routes>
          <Route path="/login" element={<AuthPage mode="login" />} />
          <Route path="/signup" element={<AuthPage mode="signup" />} />
          <Route
            element={
              <RequireSession>
                <Layout />
              </RequireSession>
            }
          >
            <Route index element={<Navigate to="/workflows" replace />} />
            <Route path="workflows" element={<WorkflowsPage />} />
            <Route path="workflows/new" element={<NewWorkflowPage />} />
            <Route path="workflows/:workflowId" element={<WorkflowPage />} />
            <Route path="workflows/:workflowId/edit" element={<EditWorkflowPage />} />
            <Route path="workflows/:workflowId/jobs/:jobId" element={<JobPage />} />
            <Route path="profile" element={<ProfilePage />} />
            <Route path="analytics" element={<AnalyticsPage />} />
            <Route path="maintenance" element={<MaintenancePage />} />
            <Route path="*" element={<NotFound />} />
          </Route>
        </Routes>
      </BrowserRouter>
      <Toasts />
    </QueryClientProvider>
  );
}

function NotFound() {
  return (
    <div className="page">
      <h1>Not found</h1>
      <p>There is no page here.</p>
    </div>
  );
}
