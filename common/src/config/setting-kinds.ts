/**
 * The kinds of setting a row of settings.ts declares: each parses one
 * variable's text within its bounds, says what it accepts (the docs table's
 * "accepts" column) and shows its default the way a user would write it.
 */
import { formatDuration, parseDuration } from '../core/duration.js';

/** Records why a variable's text is refused; `got` is the part quoted back (the whole text unless named; null: none). */
export type Report = (reason: string, got?: string | null) => void;

/** One environment variable: its parser with bounds, its default and its documentation line. */
export interface Setting<T> {
  /** The value of an unset variable; undefined where loadConfig derives it (`shown` then says how). */
  readonly default: T;
  /** The default as the docs table shows it (Markdown). */
  readonly shown: string;
  /** What the variable accepts, as the docs table shows it (Markdown). */
  readonly accepts: string;
  /** The docs table's meaning column (Markdown). */
  readonly doc: string;
  /** The value of the variable's (trimmed, non-empty) text; undefined after reporting why it is refused. */
  readonly parse: (text: string, report: Report) => T | undefined;
}

export type SettingValue<S> = S extends Setting<infer T> ? T : never;

const code = (text: string): string => `\`${text}\``;

/** Durations as users write them, days included ("7d" rather than "168h"). */
export function showDuration(ms: number): string {
  return ms % 86_400_000 === 0 ? `${ms / 86_400_000}d` : formatDuration(ms);
}

/** Integers from `min` to `max`. */
export function int(min: number, max: number, fallback: number, doc: string): Setting<number> {
  return {
    default: fallback,
    shown: code(String(fallback)),
    accepts: `integer, ${min} – ${max}`,
    doc,
    parse: (text, report) => {
      const n = Number(text);
      if (/^\d+$/.test(text) && n >= min && n <= max) return n;
      report(`must be an integer from ${min} to ${max}`);
      return undefined;
    },
  };
}

/** A positive decimal number such as 0.5 or 2, at most `max`. */
export function decimal(max: number, fallback: number, doc: string): Setting<number> {
  return {
    default: fallback,
    shown: code(String(fallback)),
    accepts: `number, above 0 – ${max}`,
    doc,
    parse: (text, report) => {
      const n = Number(text);
      if (/^\d+(?:\.\d+)?$/.test(text) && n > 0 && n <= max) return n;
      report(`must be a number above 0 and at most ${max}`);
      return undefined;
    },
  };
}

/** A duration such as "30s" or "10m", in milliseconds, optionally within bounds. */
export function duration(fallbackMs: number, doc: string, bounds: { min?: number; max?: number } = {}): Setting<number> {
  const { min, max } = bounds;
  const range = min !== undefined && max !== undefined ? `, ${showDuration(min)} – ${showDuration(max)}` : max !== undefined ? `, at most ${showDuration(max)}` : '';
  return {
    default: fallbackMs,
    shown: code(showDuration(fallbackMs)),
    accepts: `duration${range}`,
    doc,
    parse: (text, report) => {
      const ms = parseDuration(text);
      if (ms === undefined) report('must be a duration such as "7d", "12h" or "30m"');
      else if (min !== undefined && max !== undefined && (ms < min || ms > max)) report(`must be from ${formatDuration(min)} to ${formatDuration(max)}`);
      else if (max !== undefined && ms > max) report(`must be at most ${formatDuration(max)}`);
      else if (min !== undefined && ms < min) report(`must be at least ${formatDuration(min)}`);
      else return ms;
      return undefined;
    },
  };
}

/** How long rows are kept: a duration of at least an hour, or `off` (undefined: kept forever). */
export function age(fallbackMs: number, doc: string): Setting<number | undefined> {
  const d = duration(fallbackMs, doc, { min: 3_600_000 });
  return {
    ...d,
    accepts: 'duration, at least `1h`; `off`',
    parse: (t, report) => (t.toLowerCase() === 'off' ? undefined : d.parse(t, (reason, got) => report(reason.startsWith('must be at least') ? `${reason}, or off` : reason, got))),
  };
}

export function bool(fallback: boolean, doc: string): Setting<boolean> {
  return {
    default: fallback,
    shown: code(String(fallback)),
    accepts: '`true` or `false`',
    doc,
    parse: (text, report) => {
      const v = text.toLowerCase();
      if (['true', '1', 'yes', 'on'].includes(v)) return true;
      if (['false', '0', 'no', 'off'].includes(v)) return false;
      report('must be true or false', v);
      return undefined;
    },
  };
}

/** One of `allowed`, matched without regard to case. */
export function oneOf<T extends string>(allowed: readonly T[], fallback: T, doc: string): Setting<T> {
  return {
    default: fallback,
    shown: code(fallback),
    accepts: allowed.map(code).join(', '),
    doc,
    parse: (text, report) => {
      const match = allowed.find((a) => a.toLowerCase() === text.toLowerCase());
      if (!match) report(`must be one of ${allowed.join(', ')}`);
      return match;
    },
  };
}

/** Checks and normalizes a variable's text, or reports it and returns undefined. */
export type Normalize = (value: string, report: Report) => string | undefined;

/** Free text, optionally checked and normalized. */
export function text(fallback: string, doc: string, normalize?: Normalize, accepts = 'text'): Setting<string> {
  return { ...derived(code(fallback), doc, normalize, accepts), default: fallback } as Setting<string>;
}

/** Text whose default loadConfig derives (from other settings, the host, the files present); `shown` says how. */
export function derived(shown: string, doc: string, normalize?: Normalize, accepts = 'text'): Setting<string | undefined> {
  return { default: undefined, shown, accepts, doc, parse: (t, report) => (normalize ? normalize(t, report) : t) };
}

/** A comma-separated list; `each` normalizes an entry, or reports it and returns undefined. */
export function list(doc: string, each?: Normalize, fallback: readonly string[] = [], accepts = 'comma-separated list'): Setting<readonly string[]> {
  return {
    default: fallback,
    shown: fallback.length ? code(fallback.join(',')) : '(none)',
    accepts,
    doc,
    parse: (t, report) => {
      const entries = t.split(',').map((s) => s.trim()).filter(Boolean);
      if (!each) return entries;
      let ok = true;
      const out = entries.map((entry) => each(entry, (reason) => ((ok = false), report(reason, entry))) ?? entry);
      return ok ? out : undefined;
    },
  };
}

/** A file's path, none by default. */
export function file(doc: string): Setting<string | undefined> {
  return derived('(none)', doc, undefined, 'file path');
}
