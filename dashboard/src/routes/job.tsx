import { useQuery, useQueryClient } from '@tanstack/react-query';
import { useMemo } from 'react';
import { Link, useParams, useSearchParams } from 'react-router';
import { api, call, isTerminal } from '../api/client';
import { LoadFailed, Spinner, StatusBadge } from '../components/badges';
import { Elapsed } from '../components/elapsed';
import { Facts } from '../components/facts';
import { checkSummary, FAILURE_TEXT } from '../components/check';
import { targetOf } from '../components/definition';
import { apiLogSource } from '../components/log-source';
import { LogViewer } from '../components/log-viewer';
import { attemptsKey, attemptWhy, AttemptsSection, useJobAttempts } from '../components/job-attempts';
import { formatSpan, formatTime } from '../format';
import { useWorkflow } from './workflow-queries';
import { useTitle } from '../components/use-title';

export function JobPage() {
  const { workflowId = '', jobId = '' } = useParams();
  const client = useQueryClient();
  const workflow = useWorkflow(workflowId);
  const jobKey = ['jobs', workflowId, 'one', jobId];
  const job = useQuery({
    queryKey: jobKey,
    queryFn: () => call(api.GET('/workflows/{workflow_id}/jobs/{job_id}', { params: { path: { workflow_id: workflowId, job_id: jobId } } })),
    refetchInterval: (q) => (q.state.data && !isTerminal(q.state.data.status) ? 2_000 : false),
  });
  const source = useMemo(() => apiLogSource(workflowId, jobId), [workflowId, jobId]);
  const attempts = useJobAttempts(workflowId, jobId, job.data ? isTerminal(job.data.status) : false);
  // `?attempt=N`: the log of an attempt given up instead of the current one's.
  const [params] = useSearchParams();
  const asked = Number(params.get('attempt')) || undefined;
  const current = attempts.data?.attempts.at(-1)?.attempt;
  const past = asked !== undefined && current !== undefined && asked < current ? attempts.data?.attempts.find((a) => a.attempt === asked) : undefined;
  const pastSource = useMemo(() => (past ? apiLogSource(workflowId, jobId, past.attempt) : undefined), [workflowId, jobId, past]);
  useTitle(job.data ? `Job ${job.data.status.toLowerCase()}` : 'Job');

  if (job.isPending) return <Spinner />;
  if (job.isError && !job.data) return <LoadFailed title="Job" error={job.error} back={{ to: `/workflows/${workflowId}`, label: 'Back to the workflow' }} />;
  const j = job.data;
  const terminal = isTerminal(j.status);
  const w = workflow.data;
  return (
    <div>
      <p className="crumbs">
        <Link to="/workflows">Workflows</Link> / <Link to={`/workflows/${workflowId}`}>{w?.name ?? 'Workflow'}</Link> /
      </p>
      <div className="page-head">
        <h1>Job</h1>
        <StatusBadge status={j.status} />
      </div>
      <Facts
        className="details compact"
        items={[
          ['Trigger', j.trigger.toLowerCase()],
          ['Scheduled', formatTime(j.scheduled_at)],
          ['Started', formatTime(j.started_at)],
          ['Completed', formatTime(j.completed_at)],
          ['Duration', j.started_at && !j.completed_at && !terminal ? <Elapsed since={j.started_at} /> : formatSpan(j.started_at, j.completed_at)],
          w?.kind === 'HEARTBEAT' && ['Request', <code className="break">{targetOf(w)}</code>, true],
          j.check !== undefined && ['Response', checkSummary(j.check)],
          j.check?.failure !== undefined && ['Failed because', FAILURE_TEXT[j.check.failure]],
          j.status_reason_code !== undefined && [
            'Reason',
            <>
              <code>{j.status_reason_code}</code> {j.status_reason_message}
            </>,
            true,
          ],
        ]}
      />
      {!w ? null : !w.log_retention ? null : past && pastSource ? (
        <>
          <p className="note" role="note">
            The log of attempt {past.attempt} of {current}, given up: {attemptWhy(past)} <Link to="?">Show the current attempt's log</Link>
          </p>
          <LogViewer key={`${jobId}:${past.attempt}`} source={pastSource} live={false} terminal queryKey={['logs', jobId, past.attempt]} onEnded={() => {}} searchable={false} />
        </>
      ) : !terminal && attempts.isPending ? (
        <Spinner label="Opening the live log…" />
      ) : (
        <LogViewer
          key={jobId}
          source={source}
          live={!terminal}
          terminal={terminal}
          queryKey={['logs', jobId]}
          attempt={current}
          onEnded={() => void client.invalidateQueries({ queryKey: jobKey })}
          onFirstLine={() => void client.invalidateQueries({ queryKey: jobKey })}
          onAttempt={() => {
            void client.invalidateQueries({ queryKey: jobKey });
            void client.invalidateQueries({ queryKey: attemptsKey(workflowId, jobId) });
          }}
        />
      )}
      {w && !w.log_retention ? (
        <p className="note">{w.kind === 'HEARTBEAT' ? 'HTTP checks keep no logs.' : 'This workflow does not keep logs (log retention is off).'}</p>
      ) : null}
      {/* Under the log, once the workflow says what goes there: a log that came after would push its links from under the pointer. */}
      {workflow.isPending ? null : <AttemptsSection attempts={attempts.data?.attempts ?? []} shown={past?.attempt} />}
    </div>
  );
}
