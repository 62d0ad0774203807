import { isIP } from 'node:net';
import { Agent, buildConnector, request } from 'undici';
import type { Dispatcher } from 'undici';
import { Cancellation, onAbort, systemClock } from '@orloj/common/core';
import { JOB_TIMEOUTS, reasons } from '@orloj/common/domain';
import { lazyChild } from '@orloj/common/logging';
import type { AbortLike, Clock } from '@orloj/common/core';
import type { CheckFailure, HeartbeatPayload, JobReason } from '@orloj/common/domain';
import type { LazyLogger, Logger } from '@orloj/common/logging';
import { AddressGuard, AddressNotAllowedError, guardedLookup, systemResolver } from './address-guard.js';
import type { Resolver } from './address-guard.js';

export { parseTargetList } from './address-guard.js';

/**
 * The HEARTBEAT executor: one HTTP(S) request per job.
 *
 * - Connections come from one keep-alive undici Agent per executor.
 * - Every connection goes through the address guard at connect time, on the
 *   address the socket actually uses (see address-guard.ts), so DNS rebinding
 *   cannot bypass it; literal IP hosts are checked the same way.
 * - Redirects are NOT followed: the status checked is what the endpoint itself
 *   answered (a 301 is a 301). Following would also let a permitted host send
 *   the runner on to another target.
 * - `timeout` covers connecting, sending, the response headers and reading the
 *   body (at most 1 MiB is read; a longer body is cut off and its connection
 *   closed). A failure already decided by the status code is reported as such
 *   even when discarding the body runs out of time.
 * - Reasons use only the canonical messages from @orloj/common; raw library
 *   errors go to the debug log.
 */

export type HttpCheckResult =
  | { status: 'COMPLETED'; statusCode: number; durationMs: number }
  | { status: 'FAILED'; reason: JobReason; failure: CheckFailure; statusCode?: number; durationMs: number }
  | { status: 'CANCELED' };

type Classified = { reason: JobReason; failure: CheckFailure };

export interface HttpCheckExecutorOptions {
  logger: Logger;
  /** CIDRs that re-allow default-blocked ranges (RUNNER_ALLOW_TARGETS). */
  allowTargets?: string[];
  /** CIDRs blocked in addition to the defaults (RUNNER_DENY_TARGETS). */
  denyTargets?: string[];
  clock?: Clock;
  /** Host name resolution; defaults to the system resolver (dns.lookup). Injected by tests. */
  lookup?: Resolver;
  /** Upper bound for establishing a connection. Defaults to 5 minutes (the largest heartbeat timeout), so the job's own timeout governs. */
  connectTimeoutMs?: number;
}

export interface HttpCheckRunOptions {
  /** Cancels the check: the result is CANCELED. */
  signal?: AbortLike;
}

/** At most this much of a response body is read (and searched for `body_contains`). */
export const MAX_BODY_BYTES = 1024 * 1024;

const USER_AGENT = 'orloj-heartbeat/1';

const DNS_CODES = new Set(['ENOTFOUND', 'EAI_AGAIN', 'EAI_FAIL', 'EAI_NONAME', 'EAI_NODATA', 'ENODATA']);
// Node's own TLS errors and OpenSSL's certificate verification codes.
const TLS_CODES = new Set(['DEPTH_ZERO_SELF_SIGNED_CERT', 'SELF_SIGNED_CERT_IN_CHAIN', 'INVALID_CA', 'INVALID_PURPOSE']);
// The connection could not be made or broke while the exchange ran.
const CONNECTION_CODES = new Set(['ECONNRESET', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', 'ETIMEDOUT', 'UND_ERR_SOCKET', 'UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_CLOSED']);
const TLS_CODE_PREFIXES = ['ERR_TLS_', 'ERR_SSL_', 'ERR_OSSL_', 'CERT_', 'UNABLE_TO_'];

type Outcome = 'timeout' | 'canceled';

export class HttpCheckExecutor {
  private readonly logger: Logger;
  private readonly clock: Clock;
  private readonly agent: Agent;

  /** Throws when allowTargets/denyTargets hold an invalid CIDR. */
  constructor(options: HttpCheckExecutorOptions) {
    this.logger = options.logger;
    this.clock = options.clock ?? systemClock;
    const guard = new AddressGuard({ allowTargets: options.allowTargets, denyTargets: options.denyTargets });
    const base = buildConnector({
      timeout: options.connectTimeoutMs ?? JOB_TIMEOUTS.heartbeatTimeoutMaxMs,
      lookup: guardedLookup(guard, options.lookup ?? systemResolver),
    });
    const connect: buildConnector.connector = (opts, callback) => {
      // net.connect skips `lookup` for literal addresses: check those here.
      if (isIP(opts.hostname) !== 0 && !guard.isAllowed(opts.hostname)) {
        const err = new AddressNotAllowedError(opts.hostname, opts.hostname);
        queueMicrotask(() => callback(err, null));
        return;
      }
      base(opts, callback);
    };
    this.agent = new Agent({
      connect,
      // The job's timeout (one timer for the whole exchange) governs instead.
      headersTimeout: 0,
      bodyTimeout: 0,
    });
  }

  async run(payload: HeartbeatPayload, options: HttpCheckRunOptions = {}): Promise<HttpCheckResult> {
    const { signal } = options;
    if (signal?.aborted) return { status: 'CANCELED' };

    const started = this.clock.now();
    const elapsed = (): number => Math.max(0, this.clock.now() - started);
    const failed = ({ reason, failure }: Classified, statusCode?: number): HttpCheckResult =>
      statusCode === undefined
        ? { status: 'FAILED', reason, failure, durationMs: elapsed() }
        : { status: 'FAILED', reason, failure, statusCode, durationMs: elapsed() };

    let url: URL;
    try {
      url = new URL(payload.endpoint);
    } catch {
      return failed({ reason: reasons.requestFailed(), failure: 'request' });
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') return failed({ reason: reasons.requestFailed(), failure: 'request' });
    const log = lazyChild(this.logger, { target: url.origin });

    // A Cancellation, not an AbortController: undici takes either, and this one is cheap (cancellation.ts).
    const requestCancel = new Cancellation();
    let outcome: Outcome | undefined;
    const stop = (why: Outcome): void => {
      if (outcome !== undefined) return;
      outcome = why;
      requestCancel.abort();
    };
    const timer = setTimeout(() => stop('timeout'), payload.timeout);
    const stopListening = signal && onAbort(signal, () => stop('canceled'));

    const stopped = (): HttpCheckResult | undefined =>
      outcome === 'canceled'
        ? { status: 'CANCELED' }
        : outcome === 'timeout'
          ? failed({ reason: reasons.timeLimitExceeded(payload.timeout), failure: 'timeout' })
          : undefined;

    try {
      let response: Dispatcher.ResponseData;
      try {
        response = await request(url, {
          dispatcher: this.agent,
          method: payload.method,
          headers: buildHeaders(payload.headers),
          body: payload.method === 'POST' ? (payload.body ?? '') : null,
          signal: requestCancel,
        });
      } catch (err) {
        const early = stopped();
        if (early) return early;
        return failed(this.classify(err, url, log));
      }

      const { statusCode, body } = response;
      if (statusCode !== payload.expected_status_code) {
        await discard(body);
        return stopped()?.status === 'CANCELED'
          ? { status: 'CANCELED' }
          : failed({ reason: reasons.unexpectedStatusCode(payload.expected_status_code, statusCode), failure: 'status' }, statusCode);
      }

      let head: Buffer;
      try {
        head = await readHead(body, MAX_BODY_BYTES);
      } catch (err) {
        const early = stopped();
        if (early) return early;
        return failed(this.classify(err, url, log), statusCode);
      }
      const early = stopped();
      if (early) return early;

      if (payload.body_contains !== undefined && !head.includes(Buffer.from(payload.body_contains, 'utf8'))) {
        return failed({ reason: reasons.bodyMismatch(), failure: 'body' }, statusCode);
      }
      return { status: 'COMPLETED', statusCode, durationMs: elapsed() };
    } finally {
      clearTimeout(timer);
      stopListening?.();
    }
  }

  /** Closes pooled connections; waits for requests in flight. */
  async close(): Promise<void> {
    await this.agent.close();
  }

  private classify(err: unknown, url: URL, log: LazyLogger): Classified {
    const codes = errorCodes(err);
    if (err instanceof AddressNotAllowedError || codes.includes('ERR_ORLOJ_ADDRESS_NOT_ALLOWED')) {
      const refused = findAddressError(err);
      log.info({ address: refused?.address }, 'heartbeat target refused by the address guard');
      return { reason: reasons.addressNotAllowed(), failure: 'address' };
    }
    log.debug({ err }, 'heartbeat request failed');
    if (codes.includes('ECONNREFUSED')) return { reason: reasons.connectionRefused(), failure: 'connect' };
    if (codes.some((c) => DNS_CODES.has(c))) return { reason: reasons.dnsFailure(), failure: 'dns' };
    // EPROTO is a failed TLS handshake when talking https (e.g. a plain-HTTP port).
    if (codes.some(isTlsCode) || (url.protocol === 'https:' && codes.includes('EPROTO'))) return { reason: reasons.tlsFailure(), failure: 'tls' };
    if (codes.some((c) => CONNECTION_CODES.has(c))) return { reason: reasons.requestFailed(), failure: 'connect' };
    return { reason: reasons.requestFailed(), failure: 'request' };
  }
}

function isTlsCode(code: string): boolean {
  return TLS_CODES.has(code) || TLS_CODE_PREFIXES.some((p) => code.startsWith(p));
}

function buildHeaders(headers: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = { ...headers };
  if (!Object.keys(out).some((k) => k.toLowerCase() === 'user-agent')) out['user-agent'] = USER_AGENT;
  return out;
}

/** Codes of an error, its causes and (for AggregateError, e.g. happy eyeballs) its members. */
function errorCodes(err: unknown, depth = 0): string[] {
  if (depth > 5 || typeof err !== 'object' || err === null) return [];
  const out: string[] = [];
  const e = err as { code?: unknown; cause?: unknown; errors?: unknown };
  if (typeof e.code === 'string') out.push(e.code);
  if (e.cause !== undefined) out.push(...errorCodes(e.cause, depth + 1));
  if (Array.isArray(e.errors)) for (const inner of e.errors) out.push(...errorCodes(inner, depth + 1));
  return out;
}

function findAddressError(err: unknown, depth = 0): AddressNotAllowedError | undefined {
  if (err instanceof AddressNotAllowedError) return err;
  if (depth > 5 || typeof err !== 'object' || err === null) return undefined;
  const e = err as { cause?: unknown; errors?: unknown };
  const fromCause = findAddressError(e.cause, depth + 1);
  if (fromCause) return fromCause;
  if (Array.isArray(e.errors)) {
    for (const inner of e.errors) {
      const found = findAddressError(inner, depth + 1);
      if (found) return found;
    }
  }
  return undefined;
}

/**
 * Reads up to `limit` bytes. A longer body is cut off (the stream is destroyed,
 * so that connection is closed rather than pooled); a shorter one is read to
 * its end, which returns the connection to the pool.
 */
async function readHead(body: Dispatcher.ResponseData['body'], limit: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body as AsyncIterable<Buffer>) {
    const remaining = limit - size;
    if (chunk.length >= remaining) {
      chunks.push(chunk.subarray(0, remaining));
      size += remaining;
      if (chunk.length > remaining) break; // more than the limit: stop (destroys the stream)
      continue;
    }
    chunks.push(chunk);
    size += chunk.length;
  }
  return Buffer.concat(chunks, size);
}

/** Discards a body we do not need, bounded like readHead; errors are irrelevant here. */
async function discard(body: Dispatcher.ResponseData['body']): Promise<void> {
  try {
    await body.dump({ limit: MAX_BODY_BYTES });
  } catch {
    // the result is already decided
  }
}
