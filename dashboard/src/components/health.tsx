import { useEffect, useState } from 'react';
import type { Workflow } from '../api/client';
import { formatCount } from '../format';
import { formatAbsolute, formatRelative } from '../relative-time';

export type Health = NonNullable<Workflow['health']>;
export type HealthState = Health['state'];
type Run = Health['recent_runs'][number];

/** What each state means (dashboard/README.md, "Workflow states"). */
export const STATE_TEXT: Record<HealthState, { label: string; tone: string; hint: string }> = {
  down: { label: 'Down', tone: 'bad', hint: 'Down by its alert policy (its latest runs failed), or the build failed.' },
  degraded: { label: 'Degraded', tone: 'wait', hint: 'The latest run failed, but not yet enough runs in a row for its alert policy to call it down.' },
  late: { label: 'Late', tone: 'wait', hint: 'A run is more than a minute overdue and has not started.' },
  building: { label: 'Building', tone: 'busy', hint: 'The workflow is being prepared; no run can start yet.' },
  up: { label: 'Up', tone: 'ok', hint: 'The latest run completed.' },
  pending: { label: 'Pending', tone: 'muted', hint: 'Ready, waiting for its first run.' },
  paused: { label: 'Paused', tone: 'muted', hint: 'Paused (until resumed) or terminated (until updated): no automatic run starts.' },
};

export function HealthBadge({ health }: { health: Health }) {
  const s = STATE_TEXT[health.state];
  return (
    <span className={`state state-${s.tone}`} title={s.hint}>
      <span className="state-dot" aria-hidden="true" />
      {s.label}
    </span>
  );
}

/** A time relative to now ("3 min ago"), the absolute time with its zone on hover; re-rendered every 30 s. */
export function RelativeTime({ iso, fallback = '—' }: { iso: string | undefined; fallback?: string }) {
  const now = useNow(30_000);
  if (!iso) return <>{fallback}</>;
  const absolute = formatAbsolute(iso);
  return (
    <time dateTime={iso} title={absolute} className="nowrap">
      {formatRelative(iso, now)}
    </time>
  );
}

function useNow(everyMs: number): number {
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    const t = setInterval(() => setNow(Date.now()), everyMs);
    return () => clearInterval(t);
  }, [everyMs]);
  return now;
}

const RUN_TONE: Record<Run['status'], string> = { COMPLETED: 'ok', FAILED: 'bad', CANCELED: 'muted' };

function runLabel(r: Run): string {
  const when = formatAbsolute(r.completed_at ?? r.scheduled_at);
  const check = r.check
    ? `, ${r.check.status_code !== undefined ? `HTTP ${r.check.status_code}, ` : ''}${r.check.response_time_ms} ms${r.check.failure ? `, ${r.check.failure}` : ''}`
    : '';
  return `${r.status.toLowerCase()} ${when}${check}`;
}

/** The latest runs, oldest on the left; each says what happened on hover, the whole strip in words to screen readers. */
export function RunStrip({ runs }: { runs: readonly Run[] }) {
  if (runs.length === 0) return <span className="muted">No runs yet</span>;
  const failed = runs.filter((r) => r.status === 'FAILED').length;
  const latest = runs[0];
  const summary = `Last ${runs.length} run${runs.length === 1 ? '' : 's'}: ${failed} failed${latest ? `; latest ${latest.status.toLowerCase()}` : ''}`;
  return (
    <span className="strip" role="img" aria-label={summary} title={summary}>
      {[...runs].reverse().map((r) => (
        <span key={r.job_id} className={`strip-run strip-${RUN_TONE[r.status]}`} title={runLabel(r)} />
      ))}
    </span>
  );
}

/** "99.5 %" over the window, with the counts on hover; "—" before any run counted. */
export function Uptime({ uptime }: { uptime: Health['uptime'] }) {
  if (uptime.ratio === undefined) return <span className="muted">—</span>;
  const pct = uptime.ratio * 100;
  const text = `${pct === 100 || pct === 0 ? pct.toFixed(0) : pct.toFixed(1)} %`;
  return (
    <span className="nowrap" title={`${uptime.completed} completed, ${uptime.failed} failed in the last ${uptime.window_hours} h`}>
      {text}
    </span>
  );
}

/** Whether the last missed run is within the uptime window (24 h): the list marks such rows. */
export function missedRecently(health: Health, now: number = Date.now()): boolean {
  const last = health.last_slot_skipped_at ? Date.parse(health.last_slot_skipped_at) : NaN;
  return health.skipped_slots > 0 && now - last < health.uptime.window_hours * 3_600_000;
}

const MISSED_HINT =
  "Due runs that never started: the previous run was still going, or the runners were behind. Only the most recent missed run is made up. Runs missed while orloj itself was down are not counted: they are orloj's, shown as gaps in the workflow's slots.";

/** The workflow page's missed runs: how many since it was created, and when the last one was (relative, absolute on hover). */
export function MissedRuns({ health }: { health: Health }) {
  if (health.skipped_slots === 0) return <span className="muted">None</span>;
  const n = health.skipped_slots;
  return (
    <span className={missedRecently(health) ? 'missed missed-recent' : 'missed'} title={MISSED_HINT}>
      {formatCount(n)} missed{health.last_slot_skipped_at ? <>, the last <RelativeTime iso={health.last_slot_skipped_at} /></> : null}
    </span>
  );
}

/** The list row's compact mark while the last missed run is recent: "missed 5 min ago", the absolute time on hover. */
export function MissedMark({ health }: { health: Health }) {
  if (!missedRecently(health)) return null;
  return (
    <span className="badge badge-wait missed-mark" title={`${formatCount(health.skipped_slots)} missed run${health.skipped_slots === 1 ? '' : 's'}. ${MISSED_HINT}`}>
      missed <RelativeTime iso={health.last_slot_skipped_at} />
    </span>
  );
}
