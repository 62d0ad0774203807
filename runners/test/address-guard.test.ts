import assert from 'node:assert/strict';
import type { LookupAddress } from 'node:dns';
import fc from 'fast-check';
import ipaddr from 'ipaddr.js';
import {
  AddressGuard,
  AddressNotAllowedError,
  CLOUD_METADATA_TARGETS,
  DEFAULT_BLOCKED_TARGETS,
  guardedLookup,
  parseCidr,
  parseTargetList,
} from '../src/executors/address-guard.js';

type LookupResult = { err: NodeJS.ErrnoException | null; address: string | LookupAddress[]; family?: number };

function callLookup(guard: AddressGuard, addresses: LookupAddress[], all: boolean, family?: number): Promise<LookupResult> {
  const lookup = guardedLookup(guard, async () => addresses);
  return new Promise((resolve) => {
    lookup('target.example', { all, family }, (err, address, fam) => resolve({ err, address, family: fam }));
  });
}

describe('address guard', () => {
  const guard = new AddressGuard();

  it('refuses loopback, link-local, metadata and unspecified addresses by default', () => {
    for (const a of [
      '127.0.0.1',
      '127.255.255.254',
      '::1',
      '169.254.169.254',
      '169.254.0.1',
      'fe80::1',
      'fe80::1%eth0',
      'febf::1',
      '0.0.0.0',
      '0.1.2.3',
      '::',
      'fd00:ec2::254',
    ]) {
      assert.equal(guard.isAllowed(a), false, a);
    }
  });

  it('refuses the IPv4-mapped IPv6 forms of blocked addresses', () => {
    for (const a of ['::ffff:127.0.0.1', '::ffff:7f00:1', '::ffff:169.254.169.254', '::ffff:0.0.0.0']) {
      assert.equal(guard.isAllowed(a), false, a);
    }
  });

  it('judges IPv6 forms that carry an IPv4 address (compatible, SIIT, NAT64, 6to4, Teredo, ISATAP) as that address', () => {
    for (const a of [
      '::127.0.0.1', // [::127.0.0.1], IPv4-compatible
      '::7f00:1',
      '::2', // 0.0.0.2: "this network"
      '::ffff:0:127.0.0.1', // SIIT IPv4-translated
      '64:ff9b::127.0.0.1', // NAT64 well-known prefix
      '64:ff9b::a9fe:a9fe', // … 169.254.169.254
      '64:ff9b:1::7f00:1', // local-use NAT64, /96 position
      '64:ff9b:1:7f00:0:100::', // local-use NAT64, /48 position (skipping the u octet)
      '2002:7f00:1::', // 6to4 of 127.0.0.1
      '2002:a9fe:a9fe::1',
      '2001:0:4136:e378:8000:63bf:80ff:fffe', // Teredo, client 127.0.0.1 (inverted)
      '2001:0:a9fe:a9fe::1', // Teredo, server 169.254.169.254
      '2001:db8::5efe:127.0.0.1', // ISATAP
      '2001:db8::200:5efe:a9fe:a9fe',
    ]) {
      assert.equal(guard.isAllowed(a), false, a);
    }
    const loopbackAllowed = new AddressGuard({ allowTargets: ['127.0.0.0/8'], denyTargets: ['10.0.0.0/8'] });
    assert.equal(loopbackAllowed.isAllowed('64:ff9b::127.0.0.1'), true, 'allowTargets re-allows the embedded form');
    assert.equal(loopbackAllowed.isAllowed('2002:7f00:1::'), true);
    assert.equal(loopbackAllowed.isAllowed('2002:a01:203::1'), false, 'denyTargets refuses the embedded form');
    assert.equal(loopbackAllowed.isAllowed('64:ff9b::10.1.2.3'), false);
  });

  it('allows public and private addresses by default', () => {
    for (const a of [
      '8.8.8.8',
      '10.0.0.1',
      '172.16.5.4',
      '192.168.1.1',
      '100.64.0.1',
      '169.253.255.255',
      '169.255.0.0',
      '128.0.0.1',
      '2001:db8::1',
      'fd00::1',
      'fd00:ec3::254',
      'fd20:ce::253',
      '100.100.100.201',
      '168.63.129.17',
      'fec0::1',
      '::ffff:8.8.8.8',
      '64:ff9b::8.8.8.8',
      '::ffff:0:8.8.8.8',
      '2002:808:808::1',
    ]) {
      assert.equal(guard.isAllowed(a), true, a);
    }
  });

  /** Issue 29, item 6: every documented metadata address, with the provider that documents it. */
  const METADATA_ADDRESSES: Array<[string, string]> = [
    ['169.254.169.254', 'AWS, GCP, Azure, Oracle, DigitalOcean, OpenStack…'],
    ['169.254.170.2', 'AWS ECS task credentials'],
    ['169.254.170.23', 'AWS EKS Pod Identity'],
    ['169.254.42.42', 'Scaleway'],
    ['169.254.0.23', 'Tencent Cloud'],
    ['fd00:ec2::254', 'AWS IPv6'],
    ['fd00:ec2::23', 'AWS EKS Pod Identity IPv6'],
    ['fd20:ce::254', 'Google Cloud IPv6'],
    ['100.100.100.200', 'Alibaba Cloud'],
    ['fd00:100::100:200', 'Alibaba Cloud IPv6'],
    ['168.63.129.16', 'Azure WireServer'],
    ['192.0.0.192', 'Oracle Cloud Classic'],
    ['fd00:c1::a9fe:a9fe', 'Oracle Cloud Infrastructure IPv6'],
    ['fd00:42::42', 'Scaleway IPv6'],
    ['fd00:a9fe:a9fe::1', 'Akamai / Linode IPv6'],
    ['fe80::a9fe:a9fe', 'OpenStack IPv6'],
  ];
  /** What an operator allowing "our private networks" (and link-local) might write. */
  const WIDE_ALLOW = ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', '100.64.0.0/10', '192.0.0.0/24', '168.63.0.0/16', 'fc00::/7', '169.254.0.0/16', 'fe80::/10'];

  for (const [address, provider] of METADATA_ADDRESSES) {
    it(`refuses the metadata address ${address} (${provider}), also when private and link-local ranges are allowed`, () => {
      assert.equal(guard.isAllowed(address), false);
      const wide = new AddressGuard({ allowTargets: WIDE_ALLOW });
      assert.equal(wide.isAllowed(address), false);
      if (address.includes('.')) {
        assert.equal(wide.isAllowed(`::ffff:${address}`), false, 'mapped form');
        assert.equal(wide.isAllowed(`64:ff9b::${address}`), false, 'NAT64 form');
      }
    });
  }

  it('lists every metadata address tested above in its own entry', () => {
    for (const [address] of METADATA_ADDRESSES) {
      const parsed = ipaddr.parse(address);
      const entry = CLOUD_METADATA_TARGETS.find((c) => {
        const [net, bits] = parseCidr(c);
        return net.kind() === parsed.kind() && parsed.match(net, bits);
      });
      assert.ok(entry, address);
    }
  });

  it('re-allows a metadata address only when allowTargets names it (an operator faking one in tests)', () => {
    const wide = new AddressGuard({ allowTargets: WIDE_ALLOW });
    assert.equal(wide.isAllowed('169.254.1.1'), true, 'the rest of link-local is re-allowed');
    assert.equal(wide.isAllowed('100.100.100.201'), true);
    assert.equal(wide.isAllowed('fd00:ec3::1'), true);
    const named = new AddressGuard({ allowTargets: ['100.100.100.200/32', 'fd00:ec2::254', '169.254.169.254/32'] });
    assert.equal(named.isAllowed('100.100.100.200'), true);
    assert.equal(named.isAllowed('fd00:ec2::254'), true);
    assert.equal(named.isAllowed('fd00:ec2::23'), false, 'only the named address of the AWS block');
    assert.equal(named.isAllowed('169.254.169.254'), true);
    assert.equal(named.isAllowed('169.254.170.2'), false, 'link-local stays refused');
    const denied = new AddressGuard({ allowTargets: ['100.100.100.200/32'], denyTargets: ['100.64.0.0/10'] });
    assert.equal(denied.isAllowed('100.100.100.200'), false, 'deny wins');
  });

  it('refuses anything that is not an IP address (fail closed)', () => {
    for (const a of ['', 'localhost', 'example.com', '999.1.1.1']) assert.equal(guard.isAllowed(a), false, a);
  });

  it('re-allows blocked ranges listed in allowTargets, including their mapped forms', () => {
    const g = new AddressGuard({ allowTargets: ['127.0.0.0/8'] });
    assert.equal(g.isAllowed('127.0.0.1'), true);
    assert.equal(g.isAllowed('127.9.9.9'), true);
    assert.equal(g.isAllowed('::ffff:127.0.0.1'), true);
    assert.equal(g.isAllowed('::1'), false, 'IPv6 loopback is a different range');
    assert.equal(g.isAllowed('169.254.169.254'), false);
  });

  it('allowTargets is not an allow-list: other addresses stay allowed', () => {
    const g = new AddressGuard({ allowTargets: ['127.0.0.1/32'] });
    assert.equal(g.isAllowed('8.8.8.8'), true);
    assert.equal(g.isAllowed('127.0.0.2'), false);
  });

  it('denyTargets blocks otherwise allowed ranges and wins over allowTargets', () => {
    const g = new AddressGuard({ allowTargets: ['127.0.0.0/8'], denyTargets: ['10.0.0.0/8', '127.0.0.53/32', 'fd00::/8'] });
    assert.equal(g.isAllowed('10.1.2.3'), false);
    assert.equal(g.isAllowed('::ffff:10.1.2.3'), false);
    assert.equal(g.isAllowed('127.0.0.53'), false);
    assert.equal(g.isAllowed('127.0.0.1'), true);
    assert.equal(g.isAllowed('fd12::1'), false);
    assert.equal(g.isAllowed('192.168.0.1'), true);
  });

  it('a deny range written in mapped IPv6 form also matches', () => {
    const g = new AddressGuard({ denyTargets: ['::ffff:0:0/96'] });
    assert.equal(g.isAllowed('::ffff:8.8.8.8'), false);
  });

  it('accepts bare addresses as single hosts', () => {
    const g = new AddressGuard({ allowTargets: ['127.0.0.1', '::1'] });
    assert.equal(g.isAllowed('127.0.0.1'), true);
    assert.equal(g.isAllowed('::1'), true);
    assert.equal(g.isAllowed('127.0.0.2'), false);
  });

  it('throws a clear error at construction for an invalid CIDR', () => {
    for (const bad of ['127.0.0.0/33', 'not-a-cidr', '127.1/8', '10.0.0.0/', '10.0.0.0/8/1', 'fe80::/129', '1.2.3.4/-1', '']) {
      assert.throws(
        () => new AddressGuard({ allowTargets: [bad] }),
        (err: Error) => err.message.includes('Invalid CIDR') && err.message.includes('RUNNER_ALLOW_TARGETS'),
        bad,
      );
    }
    assert.throws(() => new AddressGuard({ denyTargets: ['10.0.0.0/8', 'x'] }), /Invalid CIDR "x" in denyTargets \(RUNNER_DENY_TARGETS\)/);
  });

  it('parses every default range', () => {
    for (const cidr of [...DEFAULT_BLOCKED_TARGETS, ...CLOUD_METADATA_TARGETS]) assert.doesNotThrow(() => parseCidr(cidr));
  });

  it('parseTargetList splits a comma-separated setting', () => {
    assert.deepEqual(parseTargetList('127.0.0.0/8, ::1/128 ,,10.0.0.0/8 '), ['127.0.0.0/8', '::1/128', '10.0.0.0/8']);
    assert.deepEqual(parseTargetList(''), []);
    assert.deepEqual(parseTargetList('  '), []);
  });

  describe('property', () => {
    const octet = fc.integer({ min: 0, max: 255 });

    it('refuses every address in 127.0.0.0/8 and 169.254.0.0/16, in IPv4 and mapped form', () => {
      const blocked = fc.oneof(
        fc.tuple(octet, octet, octet).map(([b, c, d]) => `127.${b}.${c}.${d}`),
        fc.tuple(octet, octet).map(([c, d]) => `169.254.${c}.${d}`),
      );
      fc.assert(
        fc.property(blocked, (a) => {
          assert.equal(guard.isAllowed(a), false);
          assert.equal(guard.isAllowed(`::ffff:${a}`), false);
        }),
      );
    });

    it('refuses them in every IPv6 form that embeds an IPv4 address', () => {
      const blocked = fc.oneof(
        fc.tuple(octet, octet, octet).map(([b, c, d]) => [127, b, c, d]),
        fc.tuple(octet, octet).map(([c, d]) => [169, 254, c, d]),
      );
      const hex = (bytes: number[]) => `${((bytes[0]! << 8) | bytes[1]!).toString(16)}:${((bytes[2]! << 8) | bytes[3]!).toString(16)}`;
      fc.assert(
        fc.property(blocked, fc.integer({ min: 0, max: 0xffff }), (v4, any) => {
          const dotted = v4.join('.');
          const inverted = v4.map((b) => b ^ 0xff);
          for (const form of [
            `::${dotted}`,
            `::ffff:0:${dotted}`,
            `64:ff9b::${dotted}`,
            `64:ff9b:1::${dotted}`,
            `2002:${hex(v4)}:${any.toString(16)}::1`,
            `2001:0:${any.toString(16)}:1:0:0:${hex(inverted)}`,
            `2001:0:${hex(v4)}::${any.toString(16)}`,
            `2001:db8:${any.toString(16)}::5efe:${dotted}`,
          ]) {
            assert.equal(guard.isAllowed(form), false, form);
          }
        }),
      );
    });

    it('allows every public IPv4 address', () => {
      const metadata = new Set(['168.63.129.16']);
      const publicV4 = fc.ipV4().filter((a) => ipaddr.parse(a).range() === 'unicast' && !metadata.has(a));
      fc.assert(
        fc.property(publicV4, (a) => {
          assert.equal(guard.isAllowed(a), true);
        }),
      );
    });
  });
});

describe('guardedLookup', () => {
  const guard = new AddressGuard();

  it('hands back checked addresses (all and single forms)', async () => {
    const addrs: LookupAddress[] = [
      { address: '2001:db8::1', family: 6 },
      { address: '93.184.216.34', family: 4 },
    ];
    const all = await callLookup(guard, addrs, true);
    assert.equal(all.err, null);
    assert.deepEqual(all.address, addrs);
    const one = await callLookup(guard, addrs, false);
    assert.equal(one.address, '2001:db8::1');
    assert.equal(one.family, 6);
    const v4 = await callLookup(guard, addrs, false, 4);
    assert.equal(v4.address, '93.184.216.34');
  });

  it('refuses when any candidate address is blocked', async () => {
    const r = await callLookup(
      guard,
      [
        { address: '93.184.216.34', family: 4 },
        { address: '127.0.0.1', family: 4 },
      ],
      true,
    );
    assert.ok(r.err instanceof AddressNotAllowedError);
    assert.equal(r.err.address, '127.0.0.1');
  });

  it('answers ENOTFOUND when nothing resolved', async () => {
    const r = await callLookup(guard, [], true);
    assert.equal(r.err?.code, 'ENOTFOUND');
  });

  it('passes resolver errors through', async () => {
    const lookup = guardedLookup(guard, async () => {
      throw Object.assign(new Error('boom'), { code: 'EAI_AGAIN' });
    });
    const err = await new Promise<NodeJS.ErrnoException | null>((resolve) => lookup('x.example', { all: true }, (e) => resolve(e)));
    assert.equal(err?.code, 'EAI_AGAIN');
  });
});
