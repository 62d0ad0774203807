/** What the AMQP adapter tells from a broker's URL and from a refused connection. */

/**
 * Connection failures that the same attempt would meet again: this side not
 * trusting the broker's certificate ('untrusted'), or the broker rejecting
 * ours (a TLS alert) or denying the login or the vhost ('refused').
 */
export function refusal(err: unknown): 'untrusted' | 'refused' | undefined {
  const code = (err as { code?: unknown } | undefined)?.code;
  if (typeof code === 'string' && TLS_VERIFY_ERRORS.has(code)) return 'untrusted';
  if (typeof code === 'string' && /^ERR_SSL_.*ALERT/.test(code)) return 'refused';
  const message = err instanceof Error ? err.message : '';
  return /\b(403 \(ACCESS-REFUSED\)|530 \(NOT-ALLOWED\))/.test(message) ? 'refused' : undefined;
}

const TLS_VERIFY_ERRORS = new Set([
  'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID',
  'CERT_UNTRUSTED',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'ERR_TLS_CERT_ALTNAME_INVALID',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
]);

export function hasPassword(url: string): boolean {
  try {
    return new URL(url).password !== '';
  } catch {
    return false;
  }
}

export function redact(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return '(unparseable url)';
  }
}
