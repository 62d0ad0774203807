/**
 * What a HEARTBEAT job's request did: recorded per job (docs/api.md, "Checks
 * and health") so the dashboard can show response times, status codes and
 * uptime.
 */

/**
 * Why a check failed, as a monitoring user sorts failures:
 * `dns` the host name did not resolve; `connect` the connection was refused or
 * broke; `tls` the TLS handshake or certificate failed; `timeout` the job's
 * time limit ran out; `status` an unexpected status code; `body` the expected
 * text was missing from the body; `address` the target resolves to an address
 * runners may not contact; `request` anything else (an unusable URL…).
 */
export const CHECK_FAILURES = ['dns', 'connect', 'tls', 'timeout', 'status', 'body', 'address', 'request'] as const;
export type CheckFailure = (typeof CHECK_FAILURES)[number];

export interface CheckResult {
  /** The response's status code; null when no response came. */
  statusCode: number | null;
  /** From sending the request to the end of the response (or the failure). */
  responseTimeMs: number;
  /** Why the check failed; null when it passed. */
  failure: CheckFailure | null;
}

/** The check as a job.finished message carries it (snake_case, optional fields absent). */
export interface CheckResultMessage {
  status_code?: number;
  response_time_ms: number;
  failure?: CheckFailure;
}

export function checkToMessage(c: CheckResult): CheckResultMessage {
  return {
    response_time_ms: c.responseTimeMs,
    ...(c.statusCode === null ? {} : { status_code: c.statusCode }),
    ...(c.failure === null ? {} : { failure: c.failure }),
  };
}

const MAX_RESPONSE_TIME_MS = 2_147_483_647;

/** A check read from a message; undefined when it is absent or malformed (the job's result stands without it). */
export function checkFromMessage(value: unknown): CheckResult | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const m = value as Record<string, unknown>;
  const time = m.response_time_ms;
  if (typeof time !== 'number' || !Number.isInteger(time) || time < 0 || time > MAX_RESPONSE_TIME_MS) return undefined;
  const code = m.status_code;
  if (code !== undefined && (typeof code !== 'number' || !Number.isInteger(code) || code < 100 || code > 999)) return undefined;
  const failure = m.failure;
  if (failure !== undefined && !(CHECK_FAILURES as readonly unknown[]).includes(failure)) return undefined;
  return { statusCode: (code as number | undefined) ?? null, responseTimeMs: time, failure: (failure as CheckFailure | undefined) ?? null };
}
