import { isIP } from 'node:net';
import type { Middleware } from 'koa';
import { OrlojError } from '@orloj/common/core';
import type { ResolvedConfig } from '@orloj/common/config';

/**
 * Paths served whatever the Host: probes carry no user data, and orchestrators
 * and load balancers address them by pod IP, service name or no Host at all.
 */
export const HOST_EXEMPT_PATHS: ReadonlySet<string> = new Set(['/livez', '/readyz']);

/**
 * Which `Host` names are served. A DNS-rebinding page runs at the attacker's
 * name (`evil.example` rebound to 127.0.0.1), so its requests carry that name;
 * serving only known names shuts it out. Always served:
 * - the host name of SERVER_HOST_URL;
 * - `localhost` and IP literals (`127.0.0.1`, `[::1]`, a pod IP): a page can
 *   only have such an origin if it really is served from that address, so
 *   they cannot be rebound — this keeps the embedded default, probes by IP
 *   and scrapes by pod IP working without configuration;
 * - SERVER_ALLOWED_HOSTS: exact names, `.example.com` (the domain and every
 *   subdomain), or `*` (any name: no rebinding protection).
 * The port is not compared: rebinding changes the name, not the port.
 */
export class HostPolicy {
  private readonly exact = new Set<string>();
  private readonly suffixes: string[] = [];
  private readonly any: boolean;

  constructor(serverHostUrl: string, allowedHosts: readonly string[]) {
    this.exact.add(new URL(serverHostUrl).hostname.toLowerCase());
    this.exact.add('localhost');
    for (const entry of allowedHosts) {
      if (entry.startsWith('.')) {
        this.suffixes.push(entry);
        this.exact.add(entry.slice(1));
      } else {
        this.exact.add(entry);
      }
    }
    this.any = allowedHosts.includes('*');
  }

  /** `hostname` as Koa gives it: no port. */
  allows(hostname: string): boolean {
    if (this.any) return true;
    // Koa leaves an IPv6 literal in its brackets.
    const name = hostname.toLowerCase().replace(/^\[(.*)\]$/, '$1').replace(/\.$/, '');
    if (name === '') return false;
    if (isIP(name) !== 0) return true;
    return this.exact.has(name) || this.suffixes.some((s) => name.endsWith(s));
  }
}

/**
 * Refuses requests whose Host is not served (400 `host_not_allowed`), before
 * anything else runs: no dashboard, no cookies read, no rate-limit bucket.
 */
export function hostCheckMiddleware(config: Pick<ResolvedConfig, 'serverHostUrl' | 'allowedHosts'>, prefix: string): Middleware {
  const policy = new HostPolicy(config.serverHostUrl, config.allowedHosts);
  return async (ctx, next) => {
    if (policy.allows(ctx.hostname)) return next();
    const path = ctx.path.startsWith(`${prefix}/`) ? ctx.path.slice(prefix.length) : ctx.path;
    if (HOST_EXEMPT_PATHS.has(path.toLowerCase().replace(/\/+$/, ''))) return next();
    throw new OrlojError('host_not_allowed', 'The Host header names a host this service does not serve; see SERVER_ALLOWED_HOSTS.', {
      fields: [{ field: 'Host', message: 'is not SERVER_HOST_URL\'s host, localhost, an IP address or in SERVER_ALLOWED_HOSTS' }],
    });
  };
}
