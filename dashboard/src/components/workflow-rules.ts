import type { FormField, WorkflowFormValues } from './workflow-payload';

/**
 * The workflow form's own checks, every field in one pass, in the words the api
 * uses for the same rules (docs/api.md): the form says what is wrong as you
 * type, before anything is sent. The api checks again and stays the judge;
 * these mirror its limits because the dashboard may not import @orloj/common.
 */
const NAME_MAX = 200;
const INTERVAL = [1, 10_080] as const;
const FAILURES = [3, 100] as const;
const JITTER = [0, 3600] as const;
const CRON_NICKNAMES = ['@yearly', '@annually', '@monthly', '@weekly', '@daily', '@midnight', '@hourly'];
const TIMEOUT_MAX_MS = { HEARTBEAT: 5 * 60_000, CONTAINER: 60 * 60_000 } as const;
const DURATION_PART = /^(\d+(?:\.\d+)?)(ms|d|h|m|s)/;
const UNIT_MS: Record<string, number> = { d: 86_400_000, h: 3_600_000, m: 60_000, s: 1_000, ms: 1 };
// The distribution spec's reference grammar: [registry[:port]/]path[:tag][@digest]
const IMAGE =
  /^(?:(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*(?::[0-9]+)?\/)?[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:\/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*(?::[\w][\w.-]{0,127})?(?:@sha256:[a-f0-9]{64})?$/;

/** "10s", "1m30s", "250ms" in milliseconds; undefined when it is not such a duration. */
export function durationMs(text: string): number | undefined {
  let rest = text.trim();
  if (rest === '' || rest.length > 32) return undefined;
  let total = 0;
  while (rest !== '') {
    const m = DURATION_PART.exec(rest);
    if (!m) return undefined;
    total += Number(m[1]) * UNIT_MS[m[2]!]!;
    rest = rest.slice(m[0].length);
  }
  return total > 0 ? Math.round(total) : undefined;
}

function wholeIn(text: string, [min, max]: readonly [number, number]): string | undefined {
  const t = text.trim();
  if (t === '') return 'is required';
  if (!/^-?\d+$/.test(t)) return 'must be a whole number';
  const n = Number(t);
  if (n < min) return `must be at least ${min}`;
  if (n > max) return `must be at most ${max}`;
  return undefined;
}

function lineErrors(text: string, sep: string, what: string): string | undefined {
  const bad = text.split('\n').some((l) => l.trim() !== '' && l.indexOf(sep) <= 0);
  return bad ? `each line must be ${what}` : undefined;
}

/** Every field's problem at once; an empty object when the form can be sent. */
export function checkWorkflowValues(v: WorkflowFormValues): Partial<Record<FormField, string>> {
  const out: Partial<Record<FormField, string>> = {};
  const add = (field: FormField, message: string | undefined) => {
    if (message) out[field] = message;
  };
  add('name', v.name === '' ? 'must not be empty' : v.name.trim() === '' ? 'must not be blank' : v.name.length > NAME_MAX ? `must be at most ${NAME_MAX} characters long` : undefined);
  if (v.scheduleBy === 'cron') {
    add('cron', cronProblem(v.cron));
    add('timezone', timeZoneProblem(v.timezone));
  } else add('interval', wholeIn(v.interval, INTERVAL));
  add('jitter', wholeIn(v.jitter, JITTER));
  add('maxFailures', wholeIn(v.maxFailures, FAILURES));
  if (v.timeout.trim() !== '') {
    const ms = durationMs(v.timeout);
    const max = TIMEOUT_MAX_MS[v.kind];
    add('timeout', ms === undefined ? 'must be a positive duration such as "10s" or "1m30s"' : ms > max ? `must be at most ${max / 1000}s` : undefined);
  }
  if (v.kind === 'HEARTBEAT') {
    add('endpoint', endpointProblem(v.endpoint.trim()));
    if (v.expectedStatus.trim() !== '') add('expectedStatus', wholeIn(v.expectedStatus, [100, 599]));
    add('headers', lineErrors(v.headers, ':', '"Name: value"'));
  } else {
    const image = v.image.trim();
    add('image', image === '' ? 'is required' : IMAGE.test(image) ? undefined : 'must be a valid image reference such as "alpine:3.20"');
    add('env', lineErrors(v.env, '=', 'KEY=value'));
    if (v.memoryMb.trim() !== '') add('memoryMb', /^\d+$/.test(v.memoryMb.trim()) ? undefined : 'must be a whole number');
    if (v.cpus.trim() !== '') add('cpus', Number.isFinite(Number(v.cpus.trim())) && Number(v.cpus.trim()) > 0 ? undefined : 'must be a number such as 0.5');
  }
  return out;
}

function endpointProblem(endpoint: string): string | undefined {
  if (endpoint === '') return 'is required';
  let url: URL;
  try {
    url = new URL(endpoint);
  } catch {
    return 'must be an absolute http or https URL';
  }
  if ((url.protocol !== 'http:' && url.protocol !== 'https:') || url.hostname === '') return 'must be an absolute http or https URL';
  if (url.username || url.password) return 'must not contain credentials; use headers instead';
  return undefined;
}

/** The api's first cron checks (its own check is the judge: values out of range come back from it). */
function cronProblem(expression: string): string | undefined {
  const text = expression.trim();
  if (text === '') return 'must not be empty';
  if (text.startsWith('@')) return CRON_NICKNAMES.includes(text.toLowerCase()) ? undefined : `must be five fields or one of ${CRON_NICKNAMES.join(', ')}`;
  return text.split(/\s+/).length === 5 ? undefined : 'must have five fields (minute hour day-of-month month day-of-week)';
}

export function timeZoneProblem(zone: string): string | undefined {
  try {
    if (zone.trim() === zone && zone !== '') {
      new Intl.DateTimeFormat('en-US', { timeZone: zone });
      return undefined;
    }
  } catch {
    // not a zone this browser knows
  }
  return 'must be an IANA time zone name such as Europe/Berlin';
}
