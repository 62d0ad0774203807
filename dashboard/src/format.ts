/** Display helpers: dates in the user's locale, durations as "1h 2m 3s". */
export function formatTime(iso: string | undefined): string {
  if (!iso) return '—';
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : d.toLocaleString();
}

/**
 * A period as "04:35–04:39" (the user's locale and zone): the date once when
 * it is today, on both ends otherwise.
 */
export function formatPeriod(fromIso: string, toIso: string, now: Date = new Date()): string {
  const from = new Date(fromIso);
  const to = new Date(toIso);
  const clock = (d: Date) => d.toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit' });
  const today = (d: Date) => d.toDateString() === now.toDateString();
  if (today(from) && today(to)) return `${clock(from)}–${clock(to)}`;
  const day = (d: Date) => d.toLocaleDateString(undefined, { month: 'short', day: 'numeric' });
  return from.toDateString() === to.toDateString() ? `${day(from)} ${clock(from)}–${clock(to)}` : `${day(from)} ${clock(from)} – ${day(to)} ${clock(to)}`;
}

export function formatSeconds(total: number): string {
  if (!Number.isFinite(total) || total < 0) return '—';
  if (total < 1) return `${Math.round(total * 1000)}ms`;
  let s = Math.floor(total);
  const parts: string[] = [];
  for (const [unit, size] of [['d', 86_400], ['h', 3_600], ['m', 60]] as const) {
    if (s >= size) {
      parts.push(`${Math.floor(s / size)}${unit}`);
      s %= size;
    }
  }
  if (s || parts.length === 0) parts.push(`${s}s`);
  return parts.slice(0, 2).join(' ');
}

/** The time between two instants, or since `from` when `to` is absent and `running`. */
export function formatSpan(from: string | undefined, to: string | undefined): string {
  if (!from || !to) return '—';
  return formatSeconds((Date.parse(to) - Date.parse(from)) / 1000);
}

export function formatInterval(minutes: number): string {
  return minutes % 1440 === 0 ? `${minutes / 1440} d` : minutes % 60 === 0 ? `${minutes / 60} h` : `${minutes} min`;
}

export function formatCount(n: number): string {
  return n.toLocaleString();
}
