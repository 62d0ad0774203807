import { useQuery } from '@tanstack/react-query';
import { api, call, type Workflow } from '../api/client';
import { ApiError } from '../api/problem';
import { formatPeriod, formatTime } from '../format';

const HOUR = 3_600_000;
const FATE_TEXT: Record<string, string> = {
  ran: 'ran',
  running: 'running',
  pending: 'due',
  canceled: 'canceled',
  skipped: 'skipped',
  paused: 'paused',
  upcoming: 'upcoming',
  orloj_down: 'missed while orloj was down',
};
const REASON_TEXT: Record<string, string> = {
  still_running: 'the previous run was still going',
  orloj_down: 'orloj was down',
  not_run: 'the runners were behind',
  catch_up_none: 'not caught up: catch-up policy none',
  maintenance: 'a maintenance window',
};

/** The window the timeline shows: about 30 slots back (6 hours to 30 days), and the next hour. */
function windowOf(w: Workflow, narrow: boolean): { from: string; to: string } {
  const now = Date.now();
  const back = narrow ? 2 * HOUR : Math.min(30 * 24 * HOUR, Math.max(6 * HOUR, 30 * w.interval * 60_000));
  return { from: new Date(now - back).toISOString(), to: new Date(now + HOUR).toISOString() };
}

async function readSlots(w: Workflow) {
  const read = (narrow: boolean) => call(api.GET('/workflows/{workflow_id}/slots', { params: { path: { workflow_id: w.id }, query: windowOf(w, narrow) } }));
  try {
    return await read(false);
  } catch (err) {
    // A dense cron schedule holds more slots than one answer tells: a narrower window.
    if (err instanceof ApiError && err.status === 400) return read(true);
    throw err;
  }
}

/** Each recent slot of the workflow as a mark coloured by its fate (GET /workflows/{id}/slots); the text says it too. */
export function SlotTimeline({ w }: { w: Workflow }) {
  const slots = useQuery({ queryKey: ['slots', w.id], queryFn: () => readSlots(w), refetchInterval: 15_000 });
  if (!slots.data || slots.data.slots.length === 0) return null;
  const list = slots.data.slots;
  const counts = new Map<string, number>();
  // Slots orloj missed by being down are counted apart from the workflow's own skipped ones.
  for (const s of list) {
    const kind = s.reason === 'orloj_down' ? 'orloj_down' : s.fate;
    counts.set(kind, (counts.get(kind) ?? 0) + 1);
  }
  return (
    <section aria-labelledby="slots-title" className="slots">
      <h2 id="slots-title">Slots</h2>
      <DowntimeNotice downtime={slots.data.downtime} />
      <p className="muted">
        Since {formatTime(slots.data.from)}: {[...counts].map(([fate, n]) => `${n} ${FATE_TEXT[fate] ?? fate}`).join(', ')}.
      </p>
      <ol className="slot-timeline" aria-label="Slots, oldest first">
        {list.map((s) => {
          const text = `${formatTime(s.slot_at)}: ${FATE_TEXT[s.fate] ?? s.fate}${s.late_ms !== undefined ? `, ${Math.round(s.late_ms / 1000)} s late` : ''}${s.reason ? ` (${REASON_TEXT[s.reason] ?? s.reason})` : ''}`;
          // A slot that got no run is a gap in the strip; one orloj missed by being down is a plain gap, not the workflow's fault.
          const gap = s.fate === 'skipped' ? (s.reason === 'orloj_down' ? ' slot-gap slot-down' : ' slot-gap') : '';
          return (
            <li key={s.slot_at} className={`slot slot-${s.fate}${gap}`} title={text}>
              <span className="visually-hidden">{text}</span>
            </li>
          );
        })}
      </ol>
    </section>
  );
}

/** The times orloj itself was down in the window: why the strip has gaps the workflow did not cause. */
function DowntimeNotice({ downtime }: { downtime: readonly { from: string; to: string }[] }) {
  if (downtime.length === 0) return null;
  return (
    <p className="note downtime-notice" role="note">
      orloj was down {downtime.map((d) => formatPeriod(d.from, d.to)).join(', ')}: the runs due meanwhile were missed by orloj, not by this workflow
      (only the most recent one was made up).
    </p>
  );
}
