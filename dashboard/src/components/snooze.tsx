import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { api, call } from '../api/client';
import { messageOf } from '../api/problem';
import { formatTime } from '../format';
import { toasts } from './toasts';

/**
 * A workflow's snooze (issue 25, docs/api.md "Maintenance windows and
 * snooze"): its failures alert nobody until a time — for an hour, or until
 * 09:00 tomorrow in the viewer's zone. On the workflow page (with its state
 * and Unsnooze) and on each notification of a workflow in the bell (the
 * choices alone: the drawer asks nothing per notification).
 */

/** 09:00 tomorrow, the viewer's local time. */
export function tomorrowAtNine(now = new Date()): Date {
  return new Date(now.getFullYear(), now.getMonth(), now.getDate() + 1, 9, 0, 0, 0);
}

const CHOICES: readonly [label: string, until: () => Date][] = [
  ['for 1 hour', () => new Date(Date.now() + 3_600_000)],
  ['until tomorrow 09:00', () => tomorrowAtNine()],
];

const snoozeKey = (workflowId: string) => ['snooze', workflowId];
const pathOf = (workflowId: string) => ({ params: { path: { workflow_id: workflowId } } });

function useSnoozeActions(workflowId: string) {
  const client = useQueryClient();
  const snooze = useMutation({
    mutationFn: (until: Date) => call(api.POST('/workflows/{workflow_id}/snooze', { ...pathOf(workflowId), body: { until: until.toISOString() } })),
    onSuccess: (data) => {
      client.setQueryData(snoozeKey(workflowId), data);
      toasts.push('success', `Alerts snoozed until ${formatTime(data.snoozed_until)}.`);
    },
    onError: (err) => toasts.push('error', messageOf(err)),
  });
  const end = useMutation({
    mutationFn: () => call(api.DELETE('/workflows/{workflow_id}/snooze', pathOf(workflowId))),
    onSuccess: () => {
      client.setQueryData(snoozeKey(workflowId), { workflow_id: workflowId, snoozed: false });
      toasts.push('success', 'Alerts are on again.');
    },
    onError: (err) => toasts.push('error', messageOf(err)),
  });
  return { snooze, end, busy: snooze.isPending || end.isPending };
}

/** "Snooze alerts" and its choices, in a disclosure. `name`: whose, for a screen reader among several. */
export function SnoozeChoices({ workflowId, name }: { workflowId: string; name?: string }) {
  const { snooze, busy } = useSnoozeActions(workflowId);
  return (
    <details className="snooze-menu">
      <summary>
        Snooze alerts{name ? <span className="visually-hidden"> of {name}</span> : null}
      </summary>
      <div className="snooze-choices">
        {CHOICES.map(([label, until]) => (
          <button key={label} type="button" className="link" disabled={busy} onClick={() => snooze.mutate(until())}>
            Snooze {label}
          </button>
        ))}
      </div>
    </details>
  );
}

/** The workflow page's: "Alerts snoozed until …" and Unsnooze while snoozed, the choices otherwise. */
export function WorkflowSnooze({ workflowId }: { workflowId: string }) {
  const current = useQuery({ queryKey: snoozeKey(workflowId), queryFn: () => call(api.GET('/workflows/{workflow_id}/snooze', pathOf(workflowId))) });
  const { end, busy } = useSnoozeActions(workflowId);
  if (!current.data?.snoozed) return <SnoozeChoices workflowId={workflowId} />;
  return (
    <span className="row snooze">
      <span className="muted" role="status">
        Alerts snoozed until {formatTime(current.data.snoozed_until)}
      </span>
      <button type="button" className="link" disabled={busy} onClick={() => end.mutate()}>
        Unsnooze
      </button>
    </span>
  );
}
