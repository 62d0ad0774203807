import type { CreateWorkflow, Workflow, WorkflowKind } from '../api/client';

/**
 * The workflow form's values (text as typed) and their translation to and
 * from the api's request body, whose `payload` is a JSON object in a string
 * with kind-specific fields (docs/api.md). Only what the user filled in is
 * sent: the api applies its defaults and validates, and its field errors
 * (`payload.endpoint`, …) come back to the field they name.
 */
export interface WorkflowFormValues {
  name: string;
  kind: WorkflowKind;
  /** Every `interval` minutes, or by a cron expression in a time zone (docs/api.md, "Schedules"). */
  scheduleBy: 'interval' | 'cron';
  interval: string;
  cron: string;
  timezone: string;
  jitter: string;
  /** The run policy (docs/api.md, "Run policy"); the defaults are the api's. */
  overlapPolicy: NonNullable<Workflow['overlap_policy']>;
  catchUpPolicy: NonNullable<Workflow['catch_up_policy']>;
  firstRun: NonNullable<Workflow['first_run']>;
  maxFailures: string;
  timeout: string;
  // HEARTBEAT
  endpoint: string;
  method: 'GET' | 'HEAD' | 'POST';
  expectedStatus: string;
  headers: string;
  body: string;
  bodyContains: string;
  // CONTAINER
  image: string;
  cmd: string;
  env: string;
  memoryMb: string;
  cpus: string;
  network: 'none' | 'bridge';
  logRetention: boolean;
}

export type FormField = keyof WorkflowFormValues;

export function emptyValues(kind: WorkflowKind = 'HEARTBEAT'): WorkflowFormValues {
  return {
    name: '',
    kind,
    scheduleBy: 'interval',
    interval: '5',
    cron: '',
    timezone: 'UTC',
    jitter: '0',
    overlapPolicy: 'run_after',
    catchUpPolicy: 'latest',
    firstRun: 'at_first_slot',
    maxFailures: '3',
    timeout: '',
    endpoint: '',
    method: 'GET',
    expectedStatus: '200',
    headers: '',
    body: '',
    bodyContains: '',
    image: '',
    cmd: '',
    env: '',
    memoryMb: '',
    cpus: '',
    network: 'none',
    logRetention: true,
  };
}

const PAYLOAD_FIELDS: Record<string, FormField> = {
  endpoint: 'endpoint',
  method: 'method',
  expected_status_code: 'expectedStatus',
  headers: 'headers',
  timeout: 'timeout',
  body: 'body',
  body_contains: 'bodyContains',
  image: 'image',
  cmd: 'cmd',
  env: 'env',
  memory_mb: 'memoryMb',
  cpus: 'cpus',
  network: 'network',
};
const TOP_FIELDS: Record<string, FormField> = {
  name: 'name',
  kind: 'kind',
  interval: 'interval',
  cron: 'cron',
  timezone: 'timezone',
  jitter_seconds: 'jitter',
  overlap_policy: 'overlapPolicy',
  catch_up_policy: 'catchUpPolicy',
  first_run: 'firstRun',
  max_consecutive_job_failures_allowed: 'maxFailures',
  log_retention: 'logRetention',
};

/** The form field an api error names (`payload.headers.X-Y` belongs to headers), if the form has one. */
export function formFieldOf(apiField: string): FormField | undefined {
  const m = /^payload\.([a-z_]+)/.exec(apiField);
  if (m) return PAYLOAD_FIELDS[m[1]!];
  return TOP_FIELDS[apiField];
}

type Obj = Record<string, unknown>;

const str = (v: unknown): string => (typeof v === 'string' ? v : typeof v === 'number' ? String(v) : '');
const lines = (text: string): string[] => text.split('\n').map((l) => l.replace(/\r$/, ''));
const pairs = (o: unknown, sep: string): string =>
  o && typeof o === 'object' ? Object.entries(o as Obj).map(([k, v]) => `${k}${sep}${str(v)}`).join('\n') : '';

/** The form filled from a stored workflow (edit). */
export function valuesFromWorkflow(w: Workflow): WorkflowFormValues {
  let p: Obj = {};
  try {
    const parsed: unknown = JSON.parse(w.payload);
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) p = parsed as Obj;
  } catch {
    // an unreadable payload leaves the kind fields empty; the api says what is wrong on save
  }
  const base = emptyValues(w.kind);
  return {
    ...base,
    name: w.name,
    scheduleBy: w.cron ? 'cron' : 'interval',
    interval: String(w.interval),
    cron: w.cron ?? '',
    timezone: w.timezone ?? 'UTC',
    jitter: String(w.jitter_seconds ?? 0),
    overlapPolicy: w.overlap_policy ?? base.overlapPolicy,
    catchUpPolicy: w.catch_up_policy ?? base.catchUpPolicy,
    firstRun: w.first_run ?? base.firstRun,
    maxFailures: String(w.max_consecutive_job_failures_allowed),
    timeout: str(p.timeout),
    endpoint: str(p.endpoint),
    method: p.method === 'HEAD' || p.method === 'POST' ? p.method : 'GET',
    expectedStatus: p.expected_status_code === undefined ? '' : str(p.expected_status_code),
    headers: pairs(p.headers, ': '),
    body: str(p.body),
    bodyContains: str(p.body_contains),
    image: str(p.image),
    cmd: Array.isArray(p.cmd) ? p.cmd.map(str).join('\n') : '',
    env: pairs(p.env, '='),
    memoryMb: str(p.memory_mb),
    cpus: str(p.cpus),
    network: p.network === 'bridge' ? 'bridge' : 'none',
    logRetention: w.log_retention,
  };
}

export type WorkflowRequest = Omit<CreateWorkflow, 'kind'> & { kind: WorkflowKind };
export type BuildResult = { ok: true; request: WorkflowRequest } | { ok: false; errors: Partial<Record<FormField, string>> };

/**
 * The request body for the form, or errors for what cannot even be put into
 * one (a header line without a colon, a count that is not a number). The
 * rest (ranges, URL, image reference) is the api's to judge.
 */
export function buildRequest(v: WorkflowFormValues): BuildResult {
  const errors: Partial<Record<FormField, string>> = {};
  const integer = (field: FormField, text: string): number | undefined => {
    const t = text.trim();
    if (t === '') return undefined;
    if (!/^-?\d+$/.test(t)) {
      errors[field] = 'must be a whole number';
      return undefined;
    }
    return Number(t);
  };
  const map = (field: FormField, text: string, sep: string, what: string): Record<string, string> | undefined => {
    const out: Record<string, string> = {};
    for (const line of lines(text)) {
      if (line.trim() === '') continue;
      const at = line.indexOf(sep);
      if (at <= 0) {
        errors[field] = `each line must be ${what}`;
        return undefined;
      }
      out[line.slice(0, at).trim()] = sep === ':' ? line.slice(at + 1).trim() : line.slice(at + 1);
    }
    return Object.keys(out).length ? out : undefined;
  };

  const payload: Obj = {};
  const set = (key: string, value: unknown) => {
    if (value !== undefined && value !== '') payload[key] = value;
  };
  if (v.kind === 'HEARTBEAT') {
    set('endpoint', v.endpoint.trim());
    if (v.method !== 'GET') set('method', v.method);
    set('expected_status_code', integer('expectedStatus', v.expectedStatus));
    set('headers', map('headers', v.headers, ':', '"Name: value"'));
    set('timeout', v.timeout.trim());
    if (v.method === 'POST') set('body', v.body);
    set('body_contains', v.bodyContains);
  } else {
    set('image', v.image.trim());
    const args = v.cmd === '' ? [] : lines(v.cmd.replace(/\n+$/, ''));
    if (args.length) set('cmd', args);
    set('env', map('env', v.env, '=', 'KEY=value'));
    set('timeout', v.timeout.trim());
    set('memory_mb', integer('memoryMb', v.memoryMb));
    if (v.cpus.trim() !== '') {
      const cpus = Number(v.cpus.trim());
      if (Number.isFinite(cpus)) set('cpus', cpus);
      else errors.cpus = 'must be a number such as 0.5';
    }
    if (v.network === 'bridge') set('network', 'bridge');
  }
  const byCron = v.scheduleBy === 'cron';
  const interval = byCron ? undefined : integer('interval', v.interval);
  const maxFailures = integer('maxFailures', v.maxFailures);
  const jitter = integer('jitter', v.jitter) ?? 0;
  if (interval === undefined && !byCron) errors.interval ??= 'is required';
  if (maxFailures === undefined) errors.maxFailures ??= 'is required';
  if (Object.keys(errors).length) return { ok: false, errors };
  return {
    ok: true,
    request: {
      name: v.name.trim(),
      kind: v.kind,
      payload: JSON.stringify(payload),
      ...(byCron ? { cron: v.cron.trim(), timezone: v.timezone.trim() } : { interval: interval!, cron: null }),
      jitter_seconds: jitter,
      overlap_policy: v.overlapPolicy,
      catch_up_policy: v.catchUpPolicy,
      first_run: v.firstRun,
      max_consecutive_job_failures_allowed: maxFailures!,
      ...(v.kind === 'CONTAINER' ? { log_retention: v.logRetention } : {}),
    },
  };
}
