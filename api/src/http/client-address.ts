import ipaddr from 'ipaddr.js';

/**
 * The client address used for rate limits: the socket peer, or — when the peer
 * is a configured trusted proxy — the right-most X-Forwarded-For hop that is
 * not itself a trusted proxy.
 */
export class ClientAddressResolver {
  private readonly trusted: [ipaddr.IPv4 | ipaddr.IPv6, number][];

  constructor(trustedProxies: readonly string[]) {
    this.trusted = trustedProxies.map((cidr) => {
      try {
        return cidr.includes('/') ? ipaddr.parseCIDR(cidr) : (() => {
          const a = ipaddr.parse(cidr);
          return [a, a.kind() === 'ipv4' ? 32 : 128] as [ipaddr.IPv4 | ipaddr.IPv6, number];
        })();
      } catch {
        throw new Error(`TRUSTED_PROXIES holds an invalid address or CIDR: "${cidr}"`);
      }
    });
  }

  /** Whether a socket peer is one of TRUSTED_PROXIES (whose X-Forwarded-For and X-Request-Id count). */
  trusts(peer: string | undefined): boolean {
    return peer !== undefined && this.isTrusted(normalize(peer));
  }

  private isTrusted(address: string): boolean {
    if (!this.trusted.length || !ipaddr.isValid(address)) return false;
    let a = ipaddr.parse(address);
    if (a.kind() === 'ipv6' && (a as ipaddr.IPv6).isIPv4MappedAddress()) a = (a as ipaddr.IPv6).toIPv4Address();
    return this.trusted.some(([range, bits]) => a.kind() === range.kind() && a.match(range, bits));
  }

  resolve(peer: string | undefined, forwardedFor: string | undefined): string {
    const socket = normalize(peer ?? 'unknown');
    if (!forwardedFor || !this.isTrusted(socket)) return socket;
    const hops = forwardedFor
      .split(',')
      .map((h) => normalize(h.trim()))
      .filter(Boolean);
    for (let i = hops.length - 1; i >= 0; i--) {
      const hop = hops[i]!;
      if (!this.isTrusted(hop)) return hop;
    }
    return hops[0] ?? socket;
  }
}

function normalize(address: string): string {
  return address.startsWith('::ffff:') && address.includes('.') ? address.slice(7) : address;
}
