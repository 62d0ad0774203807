import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { Link } from 'react-router';
import { api, call, type Incident } from '../api/client';
import { formatSeconds, formatTime } from '../format';
import { EmptyState, Spinner, StatusBadge } from './badges';
import { DataTable } from './data-table';

/**
 * Incidents (issue 26, docs/api.md "Incidents"): each down period of a
 * workflow by its alert policy. The inbox (the bell's drawer) lists the open
 * ones first, each with Acknowledge, Snooze and Open; the workflow page lists
 * a workflow's history.
 */

const POLL_MS = 10_000;
const SNOOZES = [
  ['1 h', 3_600_000],
  ['24 h', 86_400_000],
] as const;

const openIncidents = () => call(api.GET('/incidents', { params: { query: { status: 'open', limit: 100 } } }));

/** Open incidents, the ones that want attention (not acknowledged, not snoozed) first. */
export function useOpenIncidents() {
  return useQuery({
    queryKey: ['incidents', 'open'],
    queryFn: openIncidents,
    refetchInterval: POLL_MS,
    select: (page) => {
      const waiting = page.incidents.filter((i) => !i.acknowledged_at && !i.snoozed);
      return { waiting, quiet: page.incidents.filter((i) => !waiting.includes(i)), more: page.cursor !== '' };
    },
  });
}

function useIncidentActions() {
  const client = useQueryClient();
  const done = () => client.invalidateQueries({ queryKey: ['incidents'] });
  const acknowledge = useMutation({
    mutationFn: (id: string) => call(api.POST('/incidents/{incident_id}/acknowledge', { params: { path: { incident_id: id } } })),
    onSettled: done,
  });
  const snooze = useMutation({
    mutationFn: ({ id, ms }: { id: string; ms: number }) =>
      call(api.POST('/incidents/{incident_id}/snooze', { params: { path: { incident_id: id } }, body: { until: new Date(Date.now() + ms).toISOString() } })),
    onSettled: done,
  });
  return { acknowledge, snooze, busy: acknowledge.isPending || snooze.isPending };
}

const durationOf = (i: Incident) => formatSeconds(i.duration_ms / 1000);

function IncidentItem({ i, onNavigate }: { i: Incident; onNavigate: () => void }) {
  const { acknowledge, snooze, busy } = useIncidentActions();
  return (
    <li className={`incident${i.acknowledged_at || i.snoozed ? ' incident-quiet' : ''}`}>
      <div className="notification-head">
        <span className="notification-title">
          <span className="badge badge-bad notification-tag">incident</span>
          <strong>{i.workflow_name} is down</strong>
        </span>
        <time dateTime={i.started_at}>since {formatTime(i.started_at)}</time>
      </div>
      <p>
        {i.failed_runs} failed run{i.failed_runs === 1 ? '' : 's'}, down for {durationOf(i)}.{' '}
        {i.first_failure.reason_message ? `First failure: ${i.first_failure.reason_message}` : ''}
      </p>
      {i.acknowledged_at ? <p className="muted">Acknowledged by {i.acknowledged_by} at {formatTime(i.acknowledged_at)}.</p> : null}
      {i.snoozed ? <p className="muted">Snoozed until {formatTime(i.snoozed_until)}.</p> : null}
      <div className="row">
        <Link to={`/workflows/${i.workflow_id}`} onClick={onNavigate}>
          Open
        </Link>
        {i.acknowledged_at ? null : (
          <button type="button" className="link" disabled={busy} onClick={() => acknowledge.mutate(i.id)}>
            Acknowledge
          </button>
        )}
        {SNOOZES.map(([text, ms]) => (
          <button key={text} type="button" className="link" disabled={busy} onClick={() => snooze.mutate({ id: i.id, ms })}>
            Snooze {text}
          </button>
        ))}
      </div>
    </li>
  );
}

/** The inbox's first section: open incidents, those still waiting for someone first. */
export function OpenIncidents({ onNavigate }: { onNavigate: () => void }) {
  const open = useOpenIncidents();
  if (open.isPending) return <Spinner label="Loading incidents…" />;
  const list = [...(open.data?.waiting ?? []), ...(open.data?.quiet ?? [])];
  return (
    <section aria-labelledby="open-incidents-title" className="inbox-section">
      <h3 id="open-incidents-title">Open incidents{list.length ? ` (${list.length}${open.data?.more ? '+' : ''})` : ''}</h3>
      {list.length === 0 ? (
        <p className="muted">No workflow is down.</p>
      ) : (
        <ul className="notifications">
          {list.map((i) => (
            <IncidentItem key={i.id} i={i} onNavigate={onNavigate} />
          ))}
        </ul>
      )}
    </section>
  );
}

/** A workflow's incidents, newest first (its down periods by its alert policy). */
export function WorkflowIncidents({ workflowId }: { workflowId: string }) {
  const incidents = useQuery({
    queryKey: ['incidents', 'workflow', workflowId],
    queryFn: () => call(api.GET('/workflows/{workflow_id}/incidents', { params: { path: { workflow_id: workflowId }, query: { limit: 20 } } })),
    refetchInterval: POLL_MS,
  });
  const { acknowledge, busy } = useIncidentActions();
  return (
    <section aria-labelledby="incidents-title">
      <h2 id="incidents-title">Incidents</h2>
      {incidents.isPending ? (
        <Spinner />
      ) : !incidents.data || incidents.data.incidents.length === 0 ? (
        <EmptyState title="No incidents">
          <p>A down period (by the alert policy: down after the set number of failed runs in a row) shows up here.</p>
        </EmptyState>
      ) : (
        <DataTable
          label="Incidents"
          rows={incidents.data.incidents}
          rowKey={(i) => i.id}
          columns={[
            { header: 'Started', cell: (i) => formatTime(i.started_at) },
            { header: 'State', cell: (i) => <StatusBadge status={i.status === 'open' ? 'FAILED' : 'COMPLETED'} label={i.status === 'open' ? 'open' : (i.resolution ?? 'closed')} /> },
            { header: 'Duration', cell: durationOf },
            { header: 'Failed runs', cell: (i) => String(i.failed_runs) },
            { header: 'First failure', cell: (i) => i.first_failure.reason_message ?? '' },
            {
              header: 'Acknowledged',
              cell: (i) =>
                i.acknowledged_at ? (
                  `${i.acknowledged_by ?? ''} ${formatTime(i.acknowledged_at)}`
                ) : i.status === 'open' ? (
                  <button type="button" className="link" disabled={busy} onClick={() => acknowledge.mutate(i.id)}>
                    Acknowledge
                  </button>
                ) : (
                  '—'
                ),
            },
          ]}
        />
      )}
    </section>
  );
}
