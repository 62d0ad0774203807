/** Times as people read them: "3 min ago" / "in 2 min", with the absolute time and its zone on hover. */
const UNITS: [Intl.RelativeTimeFormatUnit, number][] = [
  ['day', 86_400_000],
  ['hour', 3_600_000],
  ['minute', 60_000],
  ['second', 1_000],
];

const relative = new Intl.RelativeTimeFormat(undefined, { numeric: 'auto', style: 'short' });
const absolute = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'long' });

/** "3 min ago", "in 2 min", "now"; rounds to the largest whole unit. */
export function formatRelative(iso: string, now: number = Date.now()): string {
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return iso;
  const diff = t - now;
  if (Math.abs(diff) < 5_000) return 'now';
  for (const [unit, size] of UNITS) {
    if (Math.abs(diff) >= size || unit === 'second') return relative.format(Math.trunc(diff / size), unit);
  }
  return iso;
}

/** The absolute time with its zone, e.g. "Nov 25, 2026, 2:30:00 AM UTC". */
export function formatAbsolute(iso: string): string {
  const t = Date.parse(iso);
  return Number.isNaN(t) ? iso : absolute.format(t);
}
