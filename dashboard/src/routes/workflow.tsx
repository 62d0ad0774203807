import { useInfiniteQuery, useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { Link, useNavigate, useParams } from 'react-router';
import { api, call, isTerminal, JOB_STATUSES, JOB_TRIGGERS, type Job, type JobStatus, type JobTrigger, type Workflow } from '../api/client';
import { useIdempotencyKey } from '../api/idempotency';
import { ApiError } from '../api/problem';
import { EmptyState, LoadFailed, Spinner, StatusBadge } from '../components/badges';
import { ConfirmButton } from '../components/confirm';
import { DataTable } from '../components/data-table';
import { Facts } from '../components/facts';
import { checkSummary } from '../components/check';
import { DefinitionSummary, targetOf } from '../components/definition';
import { HealthBadge, MissedRuns, RelativeTime, RunStrip, Uptime } from '../components/health';
import { ResponseTimeChart } from '../components/response-chart';
import { SlotTimeline } from '../components/slot-timeline';
import { SelectField } from '../components/fields';
import { LoadMore } from '../components/load-more';
import { toasts } from '../components/toasts';
import { formatCount, formatInterval, formatSeconds, formatSpan, formatTime } from '../format';
import { useWorkflow } from './workflow-queries';
import { WorkflowIncidents } from '../components/incidents';
import { WorkflowSnooze } from '../components/snooze';
import { useTitle } from '../components/use-title';

function HealthSection({ w }: { w: Workflow }) {
  const h = w.health;
  if (!h) return null;
  return (
    <section aria-labelledby="health-title" className="health">
      <h2 id="health-title">Health</h2>
      <Facts
        label="Health"
        items={[
          ['State', <HealthBadge health={h} />],
          ['Last run', <RelativeTime iso={h.last_run ? (h.last_run.completed_at ?? h.last_run.scheduled_at) : undefined} />],
          ['Next run', h.running ? 'running now' : <RelativeTime iso={h.next_run_at} fallback={w.terminated_at ? 'none (terminated)' : '—'} />],
          [`Uptime ${h.uptime.window_hours} h`, <Uptime uptime={h.uptime} />],
          ['Missed runs', <MissedRuns health={h} />],
          ['Recent runs', <RunStrip runs={h.recent_runs} />, true],
        ]}
      />
      {w.kind === 'HEARTBEAT' ? <ResponseTimeChart runs={h.recent_runs} /> : null}
    </section>
  );
}

function prettyPayload(payload: string): string {
  try {
    return JSON.stringify(JSON.parse(payload), null, 2);
  } catch {
    return payload;
  }
}

/**
 * "Run now": one manual job per click. The Idempotency-Key of a click is kept
 * until the api answers definitely, so retrying after a lost answer cannot
 * start a second run.
 */
function useRunNow(workflowId: string) {
  const { keyFor, settled } = useIdempotencyKey();
  const navigate = useNavigate();
  const client = useQueryClient();
  return useMutation({
    mutationFn: () =>
      call(
        api.POST('/workflows/{workflow_id}/jobs/schedule', {
          params: { path: { workflow_id: workflowId }, header: { 'Idempotency-Key': keyFor('run now') } },
        }),
      ),
    onSuccess: async ({ id }) => {
      settled();
      await client.invalidateQueries({ queryKey: ['jobs', workflowId] });
      navigate(`/workflows/${workflowId}/jobs/${id}`);
    },
    onError: (err) => {
      if (!(err instanceof ApiError && err.retryable)) settled();
    },
  });
}

function Actions({ w }: { w: Workflow }) {
  const client = useQueryClient();
  const navigate = useNavigate();
  const runNow = useRunNow(w.id);
  const path = { params: { path: { workflow_id: w.id } } };
  const refresh = () => client.invalidateQueries({ queryKey: ['workflows'] });
  const terminate = useMutation({
    mutationFn: () => call(api.PATCH('/workflows/{workflow_id}', path)),
    onSuccess: async () => {
      toasts.push('success', 'Workflow terminated.');
      await refresh();
      await client.invalidateQueries({ queryKey: ['jobs', w.id] });
    },
  });
  const remove = useMutation({
    mutationFn: () => call(api.DELETE('/workflows/{workflow_id}', path)),
    onSuccess: () => {
      toasts.push('success', `Workflow "${w.name}" deleted.`);
      client.removeQueries({ queryKey: ['workflows', 'one', w.id] });
      void refresh();
      navigate('/workflows');
    },
  });
  const active = !w.terminated_at;
  const pauseOrResume = useMutation({
    mutationFn: () => call(w.paused_at ? api.POST('/workflows/{workflow_id}/resume', path) : api.POST('/workflows/{workflow_id}/pause', path)),
    onSuccess: async () => {
      toasts.push('success', w.paused_at ? 'Workflow resumed: it runs again from its next slot.' : 'Workflow paused: no automatic runs until resumed.');
      await refresh();
      await client.invalidateQueries({ queryKey: ['slots', w.id] });
    },
  });
  return (
    <div className="row actions">
      {active ? (
        <button type="button" disabled={runNow.isPending || w.build_status === 'FAILED'} onClick={() => runNow.mutate()}>
          {runNow.isPending ? 'Scheduling…' : runNow.isError ? 'Retry run now' : 'Run now'}
        </button>
      ) : null}
      {active ? (
        <button type="button" className="secondary" disabled={pauseOrResume.isPending} onClick={() => pauseOrResume.mutate()}>
          {w.paused_at ? 'Resume' : 'Pause'}
        </button>
      ) : null}
      {active ? <WorkflowSnooze workflowId={w.id} /> : null}
      {active ? (
        <Link to={`/maintenance?${new URLSearchParams({ workflow_id: w.id, workflow_name: w.name }).toString()}`} className="button secondary">
          Plan maintenance
        </Link>
      ) : null}
      <Link to={`/workflows/${w.id}/edit`} className="button secondary">
        {active ? 'Edit' : 'Edit and reactivate'}
      </Link>
      {active ? (
        <ConfirmButton
          label="Terminate"
          danger
          question="Terminate this workflow? Pending jobs are canceled and a running one is stopped."
          confirmLabel="Yes, terminate"
          disabled={terminate.isPending}
          onConfirm={() => terminate.mutate()}
        />
      ) : (
        <ConfirmButton
          label="Delete"
          danger
          question="Delete this workflow with its jobs and logs? This cannot be undone."
          confirmLabel="Yes, delete"
          disabled={remove.isPending}
          onConfirm={() => remove.mutate()}
        />
      )}
    </div>
  );
}

function WorkflowStats({ workflowId, kind }: { workflowId: string; kind: Workflow['kind'] }) {
  const stats = useQuery({
    queryKey: ['analytics', workflowId],
    queryFn: () => call(api.GET('/analytics/{workflow_id}', { params: { path: { workflow_id: workflowId } } })),
    refetchInterval: 10_000,
  });
  if (!stats.data) return null;
  return (
    <Facts
      className="stats"
      label="Workflow analytics"
      items={[
        ['Jobs run', formatCount(stats.data.total_jobs)],
        // HTTP checks keep no logs, and their run time is in the response-time chart.
        kind === 'CONTAINER' && ['Log lines', formatCount(stats.data.total_joblogs)],
        kind === 'CONTAINER' && ['Total run time', formatSeconds(stats.data.total_job_execution_duration)],
      ]}
    />
  );
}

function Jobs({ w }: { w: Workflow }) {
  const [status, setStatus] = useState('');
  const [trigger, setTrigger] = useState('');
  const query = { status: (status || undefined) as JobStatus | undefined, trigger: (trigger || undefined) as JobTrigger | undefined };
  const jobs = useInfiniteQuery({
    queryKey: ['jobs', w.id, query],
    queryFn: ({ pageParam }) =>
      call(api.GET('/workflows/{workflow_id}/jobs', { params: { path: { workflow_id: w.id }, query: { ...query, ...(pageParam ? { cursor: pageParam } : {}) } } })),
    initialPageParam: '',
    getNextPageParam: (last) => last.cursor || undefined,
    // New runs appear while the workflow is active; running ones change state.
    refetchInterval: (q) => (!w.terminated_at || q.state.data?.pages.some((p) => p.jobs.some((j) => !isTerminal(j.status))) ? 3_000 : false),
  });
  const all = jobs.data?.pages.flatMap((p) => p.jobs) ?? [];
  return (
    <section aria-labelledby="jobs-title">
      <h2 id="jobs-title">Jobs</h2>
      <form className="filters" aria-label="Filter jobs" onSubmit={(e) => e.preventDefault()}>
        <SelectField id="j-status" label="Status" value={status} onChange={setStatus} options={[['', 'Any status'], ...JOB_STATUSES]} />
        <SelectField id="j-trigger" label="Trigger" value={trigger} onChange={setTrigger} options={[['', 'Any trigger'], ...JOB_TRIGGERS]} />
      </form>
      {jobs.isPending ? (
        <Spinner />
      ) : all.length === 0 ? (
        <EmptyState title={status || trigger ? 'No job matches these filters' : 'No jobs yet'}>
          {status || trigger ? null : w.build_status === 'FAILED' ? <p>The build failed, so no run is due.</p> : <p>The first run is due one interval after the build completes, or use Run now.</p>}
        </EmptyState>
      ) : (
        <DataTable
          label="Jobs"
          rows={all}
          rowKey={(j) => j.id}
          columns={[
            { header: 'Scheduled', cell: (j) => <Link to={`/workflows/${w.id}/jobs/${j.id}`}>{formatTime(j.scheduled_at)}</Link> },
            { header: 'Status', cell: (j) => <StatusBadge status={j.status} /> },
            { header: 'Trigger', cell: (j) => j.trigger.toLowerCase() },
            { header: 'Duration', cell: (j) => formatSpan(j.started_at, j.completed_at) },
            ...(w.kind === 'HEARTBEAT' ? [{ header: 'Response', cell: (j: Job) => (j.check ? checkSummary(j.check) : '') }] : []),
            { header: 'Reason', cell: (j) => j.status_reason_message ?? '' },
          ]}
        />
      )}
      <LoadMore hasMore={jobs.hasNextPage} loading={jobs.isFetchingNextPage} onLoad={() => void jobs.fetchNextPage()} label="Load older jobs" />
    </section>
  );
}

/** Why the build failed, where "Build: failed" alone said nothing (issue 26). */
function BuildFailed({ w }: { w: Workflow }) {
  if (w.build_status !== 'FAILED' || w.terminated_at) return null;
  return (
    <section className="callout callout-bad" aria-labelledby="build-failed-title">
      <h2 id="build-failed-title">The build failed</h2>
      <p className="build-error">{w.build_error ?? 'No reason was given.'}</p>
      <p>No run is scheduled and Run now is off until the build succeeds: fix the definition and save it, which builds again.</p>
    </section>
  );
}

export function WorkflowPage() {
  const { workflowId = '' } = useParams();
  const workflow = useWorkflow(workflowId);
  useTitle(workflow.data?.name ?? 'Workflow');
  if (workflow.isPending) return <Spinner />;
  if (workflow.isError && !workflow.data) return <LoadFailed title="Workflow" error={workflow.error} back={{ to: '/workflows', label: 'Back to workflows' }} />;
  const w = workflow.data;
  return (
    <div>
      <p className="crumbs">
        <Link to="/workflows">Workflows</Link> /
      </p>
      <div className="page-head">
        <div>
          <h1>{w.name}</h1>
          <p className="target">
            <code className="break">{targetOf(w)}</code>
          </p>
        </div>
        <div className="row">
          {w.health ? <HealthBadge health={w.health} /> : null}
          <StatusBadge status={w.terminated_at ? 'TERMINATED' : w.paused_at ? 'PAUSED' : 'ACTIVE'} label={w.terminated_at ? 'terminated' : w.paused_at ? 'paused' : 'active'} />
          <span className="build-status">
            Build: <StatusBadge status={w.build_status} />
          </span>
        </div>
      </div>
      <Actions w={w} />
      <BuildFailed w={w} />
      <Facts
        items={[
          ['Kind', w.kind],
          w.cron ? ['Schedule', `${w.cron} (${w.timezone ?? 'UTC'})`] : ['Runs every', formatInterval(w.interval)],
          !!w.jitter_seconds && ['Jitter', `up to ${w.jitter_seconds} s`],
          w.overlap_policy === 'skip' && ['While a run is still going', 'its next times are skipped'],
          w.catch_up_policy === 'none' && ['After downtime', 'missed times are not run'],
          w.first_run === 'now' && ['First run', 'right after each build'],
          !!w.paused_at && ['Paused', formatTime(w.paused_at)],
          ['Consecutive failures', `${w.consecutive_job_failures_count} of ${w.max_consecutive_job_failures_allowed} allowed`],
          ['Alert policy', `down after ${w.alert_after_failures} failed run${w.alert_after_failures === 1 ? '' : 's'} in a row, up after ${w.recover_after_successes} completed`],
          ['Logs', w.log_retention ? 'kept' : 'not kept'],
          ['Created', formatTime(w.created_at)],
          ['Updated', formatTime(w.updated_at)],
          w.terminated_at !== undefined && ['Terminated', formatTime(w.terminated_at)],
        ]}
      />
      <HealthSection w={w} />
      <SlotTimeline w={w} />
      <h2>Definition</h2>
      <DefinitionSummary w={w} />
      <details className="payload">
        <summary>Definition as JSON (payload)</summary>
        <pre>{prettyPayload(w.payload)}</pre>
      </details>
      <WorkflowIncidents workflowId={w.id} />
      <WorkflowStats workflowId={w.id} kind={w.kind} />
      <Jobs w={w} />
    </div>
  );
}
