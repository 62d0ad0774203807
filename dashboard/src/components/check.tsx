import type { Job } from '../api/client';

export type Check = NonNullable<Job['check']>;

/** Why a check failed, in words (docs/api.md, "Checks and health"). */
export const FAILURE_TEXT: Record<NonNullable<Check['failure']>, string> = {
  dns: 'the host name did not resolve',
  connect: 'the connection failed',
  tls: 'the TLS connection failed',
  timeout: 'no answer within the timeout',
  status: 'unexpected status code',
  body: 'expected text missing from the body',
  address: 'the address is not allowed',
  request: 'the request failed',
};

/** "HTTP 200 in 12 ms", or "no response after 5003 ms: the connection failed". */
export function checkSummary(c: Check): string {
  const response = c.status_code !== undefined ? `HTTP ${c.status_code} in ${c.response_time_ms} ms` : `no response after ${c.response_time_ms} ms`;
  return c.failure && c.failure !== 'status' ? `${response}: ${FAILURE_TEXT[c.failure]}` : response;
}
