import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { Link, useSearchParams } from 'react-router';
import { api, call, type MaintenanceWindow, type MaintenanceWindowCreate } from '../api/client';
import { messageOf } from '../api/problem';
import { EmptyState, LoadFailed, Spinner, StatusBadge } from '../components/badges';
import { DataTable } from '../components/data-table';
import { FormErrors, SelectField, TextField } from '../components/fields';
import { toasts } from '../components/toasts';
import { useFormErrors } from '../components/use-form-errors';
import { useTitle } from '../components/use-title';
import { formatTime } from '../format';

/**
 * Maintenance windows (issue 25, docs/api.md "Maintenance windows and
 * snooze"): the list, a form for a one-off or recurring window over the
 * workflows whose name contains a text (or over one workflow, when the
 * workflow page's "Plan maintenance" opened it), and Delete.
 */

const MODES: [string, string][] = [
  ['skip', 'Skip runs (and mute alerts)'],
  ['mute', 'Run without alerting'],
];
const KINDS: [string, string][] = [
  ['once', 'Once'],
  ['recurring', 'Recurring (cron)'],
];
const WINDOWS_KEY = ['maintenance-windows'];

interface FormValues {
  name: string;
  mode: 'skip' | 'mute';
  /** The one workflow it covers, or '' for those whose name contains `query`. */
  workflowId: string;
  query: string;
  kind: 'once' | 'recurring';
  startsAt: string;
  endsAt: string;
  cron: string;
  timezone: string;
  duration: string;
}

const viewerZone = () => Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC';
const EMPTY: FormValues = { name: '', mode: 'skip', workflowId: '', query: '', kind: 'once', startsAt: '', endsAt: '', cron: '', timezone: '', duration: '60' };

/** A datetime-local value (the viewer's wall clock) as RFC 3339; empty stays empty (the api names the field). */
const instantOf = (local: string) => (local && !Number.isNaN(new Date(local).getTime()) ? new Date(local).toISOString() : local);

function requestOf(v: FormValues): MaintenanceWindowCreate {
  const base = { name: v.name, mode: v.mode, ...(v.workflowId ? { workflow_id: v.workflowId } : { workflow_query: v.query }) };
  if (v.kind === 'once') return { ...base, starts_at: instantOf(v.startsAt), ends_at: instantOf(v.endsAt) };
  return { ...base, cron: v.cron, timezone: v.timezone || viewerZone(), duration_minutes: Number(v.duration) };
}

/** The form's field for each of the api's. */
const FIELD_OF: Record<string, keyof FormValues> = {
  name: 'name',
  mode: 'mode',
  workflow_query: 'query',
  workflow_id: 'query',
  starts_at: 'startsAt',
  ends_at: 'endsAt',
  cron: 'cron',
  timezone: 'timezone',
  duration_minutes: 'duration',
};

/** Who the form covers: the workflow the page was opened for (`?workflow_id=…&workflow_name=…`), or a name search. */
function useInitialValues(): [FormValues, string | undefined] {
  const [params] = useSearchParams();
  const workflowId = params.get('workflow_id') ?? '';
  return [{ ...EMPTY, workflowId }, workflowId ? (params.get('workflow_name') ?? 'this workflow') : undefined];
}

function WindowForm() {
  const client = useQueryClient();
  const [initial, workflowName] = useInitialValues();
  const [v, setV] = useState<FormValues>(initial);
  const errors = useFormErrors((f) => FIELD_OF[f]);
  const set = (k: keyof FormValues) => (value: string) => setV((old) => ({ ...old, [k]: value }));
  const create = useMutation({
    mutationFn: (body: MaintenanceWindowCreate) => call(api.POST('/maintenance-windows', { body })),
    onSuccess: async (w) => {
      toasts.push('success', `Maintenance window "${w.name}" created.`);
      setV(initial);
      errors.clear();
      await client.invalidateQueries({ queryKey: WINDOWS_KEY });
    },
    onError: (err) => errors.show(err),
  });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    create.mutate(requestOf(v));
  };
  const f = errors.fields;
  return (
    <form className="card form" onSubmit={submit} noValidate aria-label="New maintenance window">
      <h2>New window</h2>
      <FormErrors errors={errors.general} />
      <TextField id="mw-name" label="Name" value={v.name} onChange={set('name')} error={f.name} required maxLength={200} />
      {workflowName !== undefined ? (
        <SelectField
          id="mw-covers"
          label="Covers"
          value={v.workflowId}
          onChange={set('workflowId')}
          options={[
            [initial.workflowId, `Only ${workflowName}`],
            ['', 'Workflows whose name contains…'],
          ]}
          error={v.workflowId ? f.query : undefined}
        />
      ) : null}
      {v.workflowId ? null : (
        <TextField
          id="mw-query"
          label="Workflows whose name contains"
          value={v.query}
          onChange={set('query')}
          error={f.query}
          required
          hint="Case-insensitive, read whenever the window applies: workflows created or renamed later are covered by their name then."
        />
      )}
      <SelectField id="mw-mode" label="During the window" value={v.mode} onChange={set('mode')} options={MODES} error={f.mode} />
      <SelectField id="mw-kind" label="When" value={v.kind} onChange={set('kind')} options={KINDS} />
      {v.kind === 'once' ? (
        <>
          <TextField id="mw-starts" label="Starts" type="datetime-local" value={v.startsAt} onChange={set('startsAt')} error={f.startsAt} hint="Your local time." />
          <TextField id="mw-ends" label="Ends" type="datetime-local" value={v.endsAt} onChange={set('endsAt')} error={f.endsAt} />
        </>
      ) : (
        <>
          <TextField id="mw-cron" label="Starts at (cron)" value={v.cron} onChange={set('cron')} error={f.cron} hint="Five fields or @daily, @weekly…; for example 0 22 * * 6 is Saturdays at 22:00." />
          <TextField id="mw-zone" label="Time zone" value={v.timezone} onChange={set('timezone')} error={f.timezone} placeholder={viewerZone()} hint={`An IANA name; empty is yours (${viewerZone()}).`} />
          <TextField id="mw-duration" label="Lasts (minutes)" type="number" min={1} max={10080} value={v.duration} onChange={set('duration')} error={f.duration} />
        </>
      )}
      <div className="row">
        <button type="submit" disabled={create.isPending}>
          {create.isPending ? 'Creating…' : 'Create window'}
        </button>
      </div>
    </form>
  );
}

function when(w: MaintenanceWindow): string {
  if (w.cron) return `${w.cron} (${w.timezone ?? 'UTC'}), ${w.duration_minutes ?? 0} min each`;
  return `${formatTime(w.starts_at)} – ${formatTime(w.ends_at)}`;
}

function stateOf(w: MaintenanceWindow) {
  if (w.active) return <StatusBadge status="RUNNING" label={`active until ${formatTime(w.next_ends_at)}`} />;
  if (w.next_starts_at) return <span>next {formatTime(w.next_starts_at)}</span>;
  return <span className="muted">over</span>;
}

function WindowList() {
  const client = useQueryClient();
  const windows = useQuery({ queryKey: WINDOWS_KEY, queryFn: () => call(api.GET('/maintenance-windows', { params: { query: { limit: 100 } } })) });
  const remove = useMutation({
    mutationFn: (id: string) => call(api.DELETE('/maintenance-windows/{window_id}', { params: { path: { window_id: id } } })),
    onSuccess: () => toasts.push('success', 'Maintenance window deleted.'),
    onError: (err) => toasts.push('error', messageOf(err)),
    onSettled: () => client.invalidateQueries({ queryKey: WINDOWS_KEY }),
  });
  if (windows.isPending) return <Spinner label="Loading maintenance windows…" />;
  if (windows.isError) return <LoadFailed title="Maintenance windows" error={windows.error} back={{ to: '/workflows', label: 'Back to workflows' }} />;
  if (windows.data.windows.length === 0) {
    return (
      <EmptyState title="No maintenance windows">
        <p>During a window the workflows it covers skip their runs or run without alerting, as you choose.</p>
      </EmptyState>
    );
  }
  return (
    <DataTable
      label="Maintenance windows"
      rows={windows.data.windows}
      rowKey={(w) => w.id}
      columns={[
        { header: 'Name', cell: (w) => w.name },
        {
          header: 'Covers',
          cell: (w) => (w.workflow_id !== undefined ? <Link to={`/workflows/${w.workflow_id}`}>one workflow</Link> : `names containing "${w.workflow_query ?? ''}"`),
        },
        { header: 'When', cell: when },
        { header: 'During it', cell: (w) => (w.mode === 'skip' ? 'runs skipped' : 'runs, no alerts') },
        { header: 'State', cell: stateOf },
        {
          header: 'Actions',
          cell: (w) => (
            <button type="button" className="link" disabled={remove.isPending} onClick={() => remove.mutate(w.id)} aria-label={`Delete ${w.name}`}>
              Delete
            </button>
          ),
        },
      ]}
    />
  );
}

export function MaintenancePage() {
  useTitle('Maintenance');
  return (
    <div>
      <h1>Maintenance</h1>
      <p>Windows during which workflows skip their runs or run without alerting. To quiet one workflow for a while, snooze it from its page or from the bell.</p>
      <WindowList />
      <WindowForm />
    </div>
  );
}
