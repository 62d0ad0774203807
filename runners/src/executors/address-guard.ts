import { lookup as dnsLookup } from 'node:dns';
import type { LookupAddress, LookupOptions } from 'node:dns';
import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';

/**
 * Which network addresses HEARTBEAT checks (and registry pulls) may connect to.
 *
 * Blocked by default: loopback, link-local, unspecified addresses, and every
 * documented cloud metadata or platform service address (CLOUD_METADATA_TARGETS;
 * most lie in ranges that are otherwise allowed: 100.64.0.0/10, fc00::/7, a
 * public address). Private ranges are allowed: self-hosted teams monitor
 * internal services. IPv6 addresses that carry an IPv4 address (mapped,
 * compatible, NAT64, 6to4, Teredo, ISATAP; see embeddedIPv4) are judged as that
 * IPv4 address as well as by their own form.
 *
 * - `allowTargets` re-allows (parts of) the default-blocked ranges, e.g. `127.0.0.0/8`.
 *   It is not an allow-list: addresses that are not blocked stay allowed. A
 *   metadata address is re-allowed only by an entry no wider than its own
 *   entry (naming it, e.g. `100.100.100.200/32`): allowing `169.254.0.0/16` or
 *   a private range such as `100.64.0.0/10` or `fc00::/7` leaves them refused.
 * - `denyTargets` adds blocked ranges. They win over `allowTargets`.
 */

/** The ranges refused unless re-allowed by `allowTargets`. */
export const DEFAULT_BLOCKED_TARGETS: readonly string[] = [
  '127.0.0.0/8', // loopback
  '::1/128',
  '169.254.0.0/16', // link-local (most metadata services live here; they are listed below as well)
  'fe80::/10',
  '0.0.0.0/8', // unspecified / "this network"
  '::/128',
];

/**
 * Cloud instance metadata and platform services (credentials, user data,
 * host agents), from each provider's documentation (docs/heartbeat.md).
 * Refused by default, each re-allowed only by an `allowTargets` entry no wider
 * than itself.
 */
export const CLOUD_METADATA_TARGETS: readonly string[] = [
  '169.254.169.254/32', // AWS, GCP, Azure IMDS, Oracle, DigitalOcean, OpenStack, Hetzner, Akamai, IBM, …
  '169.254.170.2/32', // AWS ECS task metadata and credentials
  '169.254.170.23/32', // AWS EKS Pod Identity agent
  '169.254.42.42/32', // Scaleway
  '169.254.0.23/32', // Tencent Cloud
  'fd00:ec2::/32', // AWS IPv6 services: IMDS ::254, EKS Pod Identity ::23, DNS, NTP
  'fd20:ce::254/128', // Google Cloud IPv6
  '100.100.100.200/32', // Alibaba Cloud
  'fd00:100::100:200/128', // Alibaba Cloud IPv6
  '168.63.129.16/32', // Azure WireServer (host agent, health, DNS)
  '192.0.0.192/32', // Oracle Cloud Classic
  'fd00:c1::a9fe:a9fe/128', // Oracle Cloud Infrastructure IPv6
  'fd00:42::42/128', // Scaleway IPv6
  'fd00:a9fe:a9fe::1/128', // Akamai / Linode IPv6
  'fe80::a9fe:a9fe/128', // OpenStack IPv6
];

type Address = ipaddr.IPv4 | ipaddr.IPv6;
type Cidr = [Address, number];

export interface AddressGuardOptions {
  /** CIDRs that re-allow default-blocked ranges (RUNNER_ALLOW_TARGETS). */
  allowTargets?: readonly string[];
  /** CIDRs that are refused in addition to the defaults (RUNNER_DENY_TARGETS). */
  denyTargets?: readonly string[];
}

/** Raised (as a connection error) when a target address is refused. */
export class AddressNotAllowedError extends Error {
  readonly code = 'ERR_ORLOJ_ADDRESS_NOT_ALLOWED';
  constructor(
    readonly host: string,
    readonly address: string,
  ) {
    super(`Connecting to ${address} (${host}) is not allowed by the runner's address guard`);
    this.name = 'AddressNotAllowedError';
  }
}

/** Splits a comma-separated setting such as RUNNER_ALLOW_TARGETS into its trimmed, non-empty entries. */
export function parseTargetList(text: string): string[] {
  return text
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
}

/**
 * Parses one CIDR (`10.0.0.0/8`, `fd00::/8`). A bare address is taken as a
 * single host (/32 or /128). Throws a descriptive Error for anything else.
 */
export function parseCidr(text: string, setting = 'target list'): Cidr {
  const value = text.trim();
  const fail = (): never => {
    throw new Error(
      `Invalid CIDR ${JSON.stringify(text)} in ${setting}: expected an IPv4 or IPv6 range such as 127.0.0.0/8 or fd00::/8`,
    );
  };
  const slash = value.indexOf('/');
  const addrText = slash === -1 ? value : value.slice(0, slash);
  if (addrText.includes('%')) fail(); // zone ids make no sense in a range
  // Only the unambiguous dotted-quad form for IPv4 (ipaddr.js also takes "127.1", "0x7f.1").
  if (!ipaddr.IPv6.isValid(addrText) && !ipaddr.IPv4.isValidFourPartDecimal(addrText)) fail();
  try {
    if (slash === -1) {
      const addr = ipaddr.parse(addrText);
      return [addr, addr.kind() === 'ipv4' ? 32 : 128];
    }
    const prefixText = value.slice(slash + 1);
    if (!/^\d{1,3}$/.test(prefixText)) fail();
    return ipaddr.parseCIDR(value);
  } catch {
    return fail();
  }
}

function parseCidrList(list: readonly string[] | undefined, setting: string): Cidr[] {
  return (list ?? []).map((s) => parseCidr(s, setting));
}

function matchesAny(forms: readonly Address[], ranges: readonly Cidr[]): boolean {
  for (const form of forms) {
    for (const [net, bits] of ranges) {
      if (form.kind() === net.kind() && form.match(net, bits)) return true;
    }
  }
  return false;
}

function ipv4FromBytes(bytes: readonly number[], offset: number, xor = 0): ipaddr.IPv4 {
  return new ipaddr.IPv4([0, 1, 2, 3].map((i) => (bytes[offset + i]! ^ xor) & 0xff));
}

/** Bytes 8 onwards of a local-use NAT64 address skip byte 8 (RFC 6052 "u" octet) for prefixes below /96. */
function rfc6052(bytes: readonly number[], prefixBits: 48 | 56 | 64 | 96): ipaddr.IPv4 {
  if (prefixBits === 96) return ipv4FromBytes(bytes, 12);
  const start = prefixBits / 8;
  const v4: number[] = [];
  for (let i = start; v4.length < 4; i++) if (i !== 8) v4.push(bytes[i]!);
  return new ipaddr.IPv4(v4);
}

/**
 * The IPv4 addresses an IPv6 address carries, in every standard form that
 * leads to the IPv4 host (a relay or translator on the path unwraps them):
 * - IPv4-mapped `::ffff:a.b.c.d` and IPv4-compatible `::a.b.c.d` (`[::127.0.0.1]`);
 * - SIIT IPv4-translated `::ffff:0:a.b.c.d` (RFC 6145);
 * - NAT64 well-known prefix `64:ff9b::/96` and local-use `64:ff9b:1::/48`
 *   (every RFC 6052 position within it);
 * - 6to4 `2002:AABB:CCDD::/48` (RFC 3056);
 * - Teredo `2001:0::/32`: the server and the (inverted) client address (RFC 4380);
 * - ISATAP interface ids `…:0:5efe:a.b.c.d` / `…:200:5efe:a.b.c.d` (RFC 5214).
 */
export function embeddedIPv4(address: ipaddr.IPv6): ipaddr.IPv4[] {
  const bytes = address.toByteArray();
  const p = address.parts;
  const found: ipaddr.IPv4[] = [];
  const zeroTo = (n: number) => p.slice(0, n).every((x) => x === 0);
  if (zeroTo(5) && (p[5] === 0xffff || p[5] === 0)) found.push(ipv4FromBytes(bytes, 12)); // mapped, compatible
  if (zeroTo(4) && p[4] === 0xffff && p[5] === 0) found.push(ipv4FromBytes(bytes, 12)); // SIIT
  if (p[0] === 0x64 && p[1] === 0xff9b && p.slice(2, 6).every((x) => x === 0)) found.push(ipv4FromBytes(bytes, 12));
  if (p[0] === 0x64 && p[1] === 0xff9b && p[2] === 1) found.push(...([48, 56, 64, 96] as const).map((bits) => rfc6052(bytes, bits)));
  if (p[0] === 0x2002) found.push(ipv4FromBytes(bytes, 2));
  if (p[0] === 0x2001 && p[1] === 0) found.push(ipv4FromBytes(bytes, 4), ipv4FromBytes(bytes, 12, 0xff));
  if ((p[4] === 0 || p[4] === 0x200) && p[5] === 0x5efe) found.push(ipv4FromBytes(bytes, 12));
  return found;
}

/** Whether an allow entry names (a part of) this blocked range for this address: it matches the address and is no wider than the range. */
function reAllowedWithin(form: Address, range: Cidr, allowed: readonly Cidr[]): boolean {
  return allowed.some(([net, bits]) => form.kind() === net.kind() && bits >= range[1] && form.match(net, bits));
}

export class AddressGuard {
  private readonly blocked: Cidr[];
  private readonly metadata: Cidr[];
  private readonly allowed: Cidr[];
  private readonly denied: Cidr[];

  /** Throws an Error naming the bad entry when a CIDR is invalid. */
  constructor(options: AddressGuardOptions = {}) {
    this.blocked = parseCidrList(DEFAULT_BLOCKED_TARGETS, 'default blocked targets');
    this.metadata = parseCidrList(CLOUD_METADATA_TARGETS, 'cloud metadata targets');
    this.allowed = parseCidrList(options.allowTargets, 'allowTargets (RUNNER_ALLOW_TARGETS)');
    this.denied = parseCidrList(options.denyTargets, 'denyTargets (RUNNER_DENY_TARGETS)');
  }

  /**
   * Whether a literal IP address may be contacted. Anything that does not parse
   * as an IP address is refused (fail closed).
   */
  isAllowed(address: string): boolean {
    let parsed: Address;
    try {
      parsed = ipaddr.parse(address);
    } catch {
      return false;
    }
    // Judge an IPv6 address that carries an IPv4 address by that address too (and by its own form).
    const forms: Address[] = parsed.kind() === 'ipv6' ? [...embeddedIPv4(parsed as ipaddr.IPv6), parsed] : [parsed];
    if (matchesAny(forms, this.denied)) return false;
    for (const form of forms) {
      for (const range of this.metadata) {
        if (form.kind() === range[0].kind() && form.match(range) && !reAllowedWithin(form, range, this.allowed)) return false;
      }
    }
    if (matchesAny(forms, this.blocked) && !matchesAny(forms, this.allowed)) return false;
    return true;
  }
}

/** Resolves a host name to every candidate address. */
export type Resolver = (hostname: string) => Promise<LookupAddress[]>;

export const systemResolver: Resolver = (hostname) =>
  new Promise((resolve, reject) => {
    dnsLookup(hostname, { all: true, verbatim: true }, (err, addresses) => (err ? reject(err) : resolve(addresses)));
  });

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/**
 * A `lookup` function for net/tls `connect` options: resolves the host, refuses
 * if ANY candidate address is not allowed (a name mixing allowed and refused
 * addresses is treated as hostile), and hands back only addresses it checked.
 * Because the socket connects to what this function returns, re-resolving the
 * name later (DNS rebinding) cannot slip an unchecked address in.
 */
export function guardedLookup(guard: AddressGuard, resolver: Resolver = systemResolver) {
  return (hostname: string, options: LookupOptions, callback: LookupCallback): void => {
    resolver(hostname).then(
      (all) => {
        const family = options.family === 'IPv4' ? 4 : options.family === 'IPv6' ? 6 : options.family;
        const candidates = family === 4 || family === 6 ? all.filter((a) => a.family === family) : all;
        if (candidates.length === 0) {
          const err: NodeJS.ErrnoException = new Error(`getaddrinfo ENOTFOUND ${hostname}`);
          err.code = 'ENOTFOUND';
          callback(err, '');
          return;
        }
        for (const a of candidates) {
          if (isIP(a.address) === 0 || !guard.isAllowed(a.address)) {
            callback(new AddressNotAllowedError(hostname, a.address), '');
            return;
          }
        }
        if (options.all) {
          callback(null, candidates);
        } else {
          const first = candidates[0]!;
          callback(null, first.address, first.family);
        }
      },
      (err: NodeJS.ErrnoException) => callback(err, ''),
    );
  };
}
