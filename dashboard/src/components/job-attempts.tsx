import { useQuery } from '@tanstack/react-query';
import { Link } from 'react-router';
import { api, call, type JobAttempt } from '../api/client';
import { formatCount, formatTime } from '../format';
import { StatusBadge } from './badges';
import { DataTable } from './data-table';

/** Why an attempt was given up, in words (the api's codes, docs/api.md "Attempts"). */
const END_TEXT: Record<string, string> = {
  lease_lost: 'its runner stopped responding',
  not_started: 'no runner started it in time',
  orloj_restart: 'orloj restarted while it ran',
  runner_failure: 'its runner failed',
};

export const attemptsKey = (workflowId: string, jobId: string) => ['jobs', workflowId, 'attempts', jobId];

/** A job's attempts (GET …/attempts), polled with the job while it is not finished. */
export function useJobAttempts(workflowId: string, jobId: string, finished: boolean) {
  return useQuery({
    queryKey: attemptsKey(workflowId, jobId),
    queryFn: () => call(api.GET('/workflows/{workflow_id}/jobs/{job_id}/attempts', { params: { path: { workflow_id: workflowId, job_id: jobId } } })),
    refetchInterval: finished ? false : 2_000,
  });
}

/** "Retried: its runner stopped responding (…)", or the job's own reason on its current attempt. */
export function attemptWhy(a: JobAttempt): string {
  if (!a.reason) return '';
  return a.outcome === 'RETRIED' ? `${END_TEXT[a.reason.code] ?? a.reason.code}: ${a.reason.message}` : a.reason.message;
}

/**
 * The job's attempts when it had more than one: each with its runner, times,
 * outcome and why it was retried, and a link to its own log (`?attempt=`;
 * the current attempt's log is the page's own).
 */
export function AttemptsSection({ attempts, shown }: { attempts: readonly JobAttempt[]; shown: number | undefined }) {
  if (attempts.length < 2) return null;
  const current = attempts[attempts.length - 1]!.attempt;
  return (
    <section className="attempts" aria-labelledby="attempts-title">
      <h2 id="attempts-title">Attempts</h2>
      <DataTable
        label="Attempts, oldest first"
        rows={attempts}
        rowKey={(a) => String(a.attempt)}
        columns={[
          { header: 'Attempt', cell: (a) => (a.attempt === current ? `${a.attempt} (current)` : String(a.attempt)) },
          { header: 'Runner', cell: (a) => (a.runner_id ? <code className="break">{a.runner_id}</code> : '—') },
          { header: 'Started', cell: (a) => formatTime(a.started_at) },
          { header: 'Ended', cell: (a) => formatTime(a.ended_at) },
          { header: 'Outcome', cell: (a) => <StatusBadge status={a.outcome} label={a.outcome === 'RETRIED' ? 'retried' : undefined} /> },
          { header: 'Why', cell: (a) => attemptWhy(a) || '—' },
          {
            header: 'Log',
            cell: (a) => {
              const lines = a.log_lines === undefined ? '' : ` (${formatCount(a.log_lines)} lines)`;
              const here = (a.attempt === current && shown === undefined) || a.attempt === shown;
              if (here) return <span aria-current="true">Shown{lines}</span>;
              return <Link to={a.attempt === current ? '?' : `?attempt=${a.attempt}`}>Attempt {a.attempt}'s log{lines}</Link>;
            },
          },
        ]}
      />
    </section>
  );
}
