/**
 * Go-style duration strings as users write them in payloads: "10s", "1m30s",
 * "1h", "250ms", "7d". Returns milliseconds, or undefined when the text is not a
 * positive duration.
 */
const PART = /(\d+(?:\.\d+)?)(ms|d|h|m|s)/y;
const UNIT_MS: Record<string, number> = { d: 86_400_000, h: 3_600_000, m: 60_000, s: 1_000, ms: 1 };

export function parseDuration(text: string): number | undefined {
  if (text.length === 0 || text.length > 32) return undefined;
  PART.lastIndex = 0;
  let total = 0;
  let consumed = 0;
  while (consumed < text.length) {
    PART.lastIndex = consumed;
    const m = PART.exec(text);
    if (!m) return undefined;
    total += Number(m[1]) * UNIT_MS[m[2]!]!;
    consumed = PART.lastIndex;
  }
  total = Math.round(total);
  return total > 0 ? total : undefined;
}

export function formatDuration(ms: number): string {
  if (ms % 3_600_000 === 0) return `${ms / 3_600_000}h`;
  if (ms % 60_000 === 0) return `${ms / 60_000}m`;
  if (ms % 1000 === 0) return `${ms / 1000}s`;
  return `${ms}ms`;
}
