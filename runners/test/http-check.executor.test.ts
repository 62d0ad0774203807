import assert from 'node:assert/strict';
import diagnostics from 'node:diagnostics_channel';
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { setImmediate } from 'node:timers/promises';
import { pino } from 'pino';
import { Cancellation } from '@orloj/common/core';
import { reasons } from '@orloj/common/domain';
import type { CheckFailure, HeartbeatPayload } from '@orloj/common/domain';
import { AddressNotAllowedError } from '../src/executors/address-guard.js';
import { HttpCheckExecutor, parseTargetList } from '../src/executors/http-check.executor.js';
import type { HttpCheckResult } from '../src/executors/http-check.executor.js';

const logger = pino({ level: 'silent' });

interface Seen {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
  remotePort: number | undefined;
}

/** A real HTTP server on 127.0.0.1 with a few fixed routes. */
class TestServer {
  readonly seen: Seen[] = [];
  /** Resolvers waiting for the next request to /hang. */
  private hangWaiters: (() => void)[] = [];
  private readonly server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      this.seen.push({
        method: req.method ?? '',
        url: req.url ?? '',
        headers: req.headers,
        body: Buffer.concat(chunks).toString('utf8'),
        remotePort: req.socket.remotePort,
      });
      this.route(req, res);
    });
  });
  port = 0;

  async start(): Promise<void> {
    this.server.listen(0, '127.0.0.1');
    await once(this.server, 'listening');
    this.port = (this.server.address() as AddressInfo).port;
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    this.server.close();
    await once(this.server, 'close');
  }

  url(path: string, host = '127.0.0.1'): string {
    return `http://${host}:${this.port}${path}`;
  }

  /** Resolves when the server has received a request to /hang. */
  nextHang(): Promise<void> {
    return new Promise((resolve) => this.hangWaiters.push(resolve));
  }

  private route(req: http.IncomingMessage, res: http.ServerResponse): void {
    const path = (req.url ?? '/').split('?')[0];
    switch (path) {
      case '/ok':
        res.writeHead(200, { 'content-type': 'text/plain' }).end('all systems nominal');
        return;
      case '/unavailable':
        res.writeHead(503, { 'content-type': 'text/plain' }).end('down for maintenance');
        return;
      case '/created':
        res.writeHead(201).end('created');
        return;
      case '/redirect':
        res.writeHead(302, { location: '/ok' }).end();
        return;
      case '/big': {
        // The marker sits after the first MiB: it must not be found.
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.write(Buffer.alloc(1024 * 1024, 'a'));
        res.end('MARKER');
        return;
      }
      case '/hang': {
        // Never answers; the waiter learns that the request arrived.
        const waiters = this.hangWaiters;
        this.hangWaiters = [];
        for (const w of waiters) w();
        return;
      }
      default:
        res.writeHead(404).end('not found');
    }
  }
}

function heartbeat(endpoint: string, extra: Partial<HeartbeatPayload> = {}): HeartbeatPayload {
  return { endpoint, method: 'GET', expected_status_code: 200, headers: {}, timeout: 10_000, ...extra };
}

/** The kind of failure each reason is recorded with (the job's `check.failure`). */
const FAILURE_OF: [message: string, failure: CheckFailure][] = [
  [reasons.connectionRefused().message, 'connect'],
  [reasons.dnsFailure().message, 'dns'],
  [reasons.tlsFailure().message, 'tls'],
  [reasons.addressNotAllowed().message, 'address'],
  [reasons.bodyMismatch().message, 'body'],
  [reasons.requestFailed().message, 'request'],
];

function assertFailed(result: HttpCheckResult, expected: { code: string; message: string }): void {
  assert.equal(result.status, 'FAILED', JSON.stringify(result));
  if (result.status !== 'FAILED') return;
  assert.deepEqual(result.reason, expected);
  const failure =
    expected.code === 'TIME_LIMIT_EXCEEDED'
      ? 'timeout'
      : expected.code === 'UNEXPECTED_STATUS_CODE' && expected.message !== reasons.bodyMismatch().message
        ? 'status'
        : FAILURE_OF.find(([message]) => message === expected.message)?.[1];
  assert.equal(result.failure, failure, 'the kind of failure recorded with the job');
  assert.ok(Number.isInteger(result.durationMs) && result.durationMs >= 0);
}

describe('HttpCheckExecutor', () => {
  const server = new TestServer();
  let executor: HttpCheckExecutor;
  let guarded: HttpCheckExecutor;

  before(async () => {
    await server.start();
    executor = new HttpCheckExecutor({ logger, allowTargets: ['127.0.0.0/8'] });
    guarded = new HttpCheckExecutor({ logger });
  });

  after(async () => {
    await Promise.all([executor.close(), guarded.close()]);
    await server.stop();
  });

  it('completes when the endpoint answers the expected status', async () => {
    const result = await executor.run(heartbeat(server.url('/ok')));
    assert.equal(result.status, 'COMPLETED');
    if (result.status !== 'COMPLETED') return;
    assert.equal(result.statusCode, 200);
    assert.ok(result.durationMs >= 0);
    const req = server.seen.at(-1);
    assert.equal(req?.method, 'GET');
    assert.equal(req?.headers['user-agent'], 'orloj-heartbeat/1');
  });

  it('honours a non-default expected status', async () => {
    const result = await executor.run(heartbeat(server.url('/created'), { expected_status_code: 201 }));
    assert.equal(result.status, 'COMPLETED');
  });

  it('fails with UNEXPECTED_STATUS_CODE naming expected and received', async () => {
    const result = await executor.run(heartbeat(server.url('/unavailable')));
    assertFailed(result, reasons.unexpectedStatusCode(200, 503));
    assert.equal(result.status === 'FAILED' && result.statusCode, 503);
    assert.match(result.status === 'FAILED' ? result.reason.message : '', /503.*200/);
  });

  it('does not follow redirects', async () => {
    const before = server.seen.length;
    const result = await executor.run(heartbeat(server.url('/redirect')));
    assertFailed(result, reasons.unexpectedStatusCode(200, 302));
    assert.equal(server.seen.length, before + 1, 'only the redirect itself was requested');
    assert.equal((await executor.run(heartbeat(server.url('/redirect'), { expected_status_code: 302 }))).status, 'COMPLETED');
  });

  it('sends POST with body and headers, keeping a user-set User-Agent', async () => {
    const result = await executor.run(
      heartbeat(server.url('/ok?x=1'), {
        method: 'POST',
        body: '{"ping":true}',
        headers: { 'Content-Type': 'application/json', 'X-Token': 'abc', 'User-Agent': 'custom/2' },
      }),
    );
    assert.equal(result.status, 'COMPLETED');
    const req = server.seen.at(-1);
    assert.equal(req?.method, 'POST');
    assert.equal(req?.url, '/ok?x=1');
    assert.equal(req?.body, '{"ping":true}');
    assert.equal(req?.headers['content-type'], 'application/json');
    assert.equal(req?.headers['x-token'], 'abc');
    assert.equal(req?.headers['user-agent'], 'custom/2');
  });

  it('completes when the body contains the expected text', async () => {
    const result = await executor.run(heartbeat(server.url('/ok'), { body_contains: 'nominal' }));
    assert.equal(result.status, 'COMPLETED');
  });

  it('fails when the body lacks the expected text', async () => {
    const result = await executor.run(heartbeat(server.url('/ok'), { body_contains: 'degraded' }));
    assertFailed(result, reasons.bodyMismatch());
    assert.equal(result.status === 'FAILED' && result.statusCode, 200);
  });

  it('searches only the first MiB of the body', async () => {
    const result = await executor.run(heartbeat(server.url('/big'), { body_contains: 'MARKER' }));
    assertFailed(result, reasons.bodyMismatch());
  });

  it('sends HEAD', async () => {
    const result = await executor.run(heartbeat(server.url('/ok'), { method: 'HEAD' }));
    assert.equal(result.status, 'COMPLETED');
    assert.equal(server.seen.at(-1)?.method, 'HEAD');
  });

  it('reuses pooled connections (bodies are consumed)', async () => {
    const exec = new HttpCheckExecutor({ logger, allowTargets: ['127.0.0.0/8'] });
    try {
      // undici hands a kept-alive socket back one event-loop turn after the response
      // completes (a deliberate guard against servers that close anyway); heartbeats
      // are minutes apart, here one setImmediate turn stands in for that. Not a timed wait.
      await exec.run(heartbeat(server.url('/ok')));
      await setImmediate();
      await exec.run(heartbeat(server.url('/unavailable')));
      await setImmediate();
      await exec.run(heartbeat(server.url('/ok'), { body_contains: 'nominal' }));
      const ports = server.seen.slice(-3).map((s) => s.remotePort);
      assert.equal(new Set(ports).size, 1, `one connection expected, saw ports ${ports.join(',')}`);
    } finally {
      await exec.close();
    }
  });

  it('fails with TIME_LIMIT_EXCEEDED when the endpoint never answers', async () => {
    const result = await executor.run(heartbeat(server.url('/hang'), { timeout: 300 }));
    assertFailed(result, reasons.timeLimitExceeded(300));
    assert.equal(result.status === 'FAILED' && result.reason.code, 'TIME_LIMIT_EXCEEDED');
  });

  it('returns CANCELED when the signal aborts', async () => {
    const controller = new AbortController();
    const arrived = server.nextHang();
    const running = executor.run(heartbeat(server.url('/hang')), { signal: controller.signal });
    await arrived;
    controller.abort();
    assert.deepEqual(await running, { status: 'CANCELED' });
  });

  it('returns CANCELED when a Cancellation aborts (as the runner cancels an attempt)', async () => {
    const cancel = new Cancellation();
    const arrived = server.nextHang();
    const running = executor.run(heartbeat(server.url('/hang')), { signal: cancel });
    await arrived;
    cancel.abort();
    assert.deepEqual(await running, { status: 'CANCELED' });
  });

  it('returns CANCELED for an already aborted signal without sending', async () => {
    const before = server.seen.length;
    const result = await executor.run(heartbeat(server.url('/ok')), { signal: AbortSignal.abort() });
    assert.deepEqual(result, { status: 'CANCELED' });
    assert.equal(server.seen.length, before);
  });

  it('reports a refused connection', async () => {
    const closed = http.createServer();
    closed.listen(0, '127.0.0.1');
    await once(closed, 'listening');
    const port = (closed.address() as AddressInfo).port;
    closed.close();
    await once(closed, 'close');
    const result = await executor.run(heartbeat(`http://127.0.0.1:${port}/`));
    assertFailed(result, reasons.connectionRefused());
  });

  it('reports a DNS failure', async () => {
    const result = await executor.run(heartbeat('http://nonexistent.invalid/'));
    assertFailed(result, reasons.dnsFailure());
  });

  it('reports a TLS failure (https to a plain HTTP port)', async () => {
    const result = await executor.run(heartbeat(`https://127.0.0.1:${server.port}/ok`));
    assertFailed(result, reasons.tlsFailure());
  });

  describe('address guard', () => {
    it('refuses a literal loopback address when loopback is not allowed', async () => {
      const before = server.seen.length;
      const result = await guarded.run(heartbeat(server.url('/ok')));
      assertFailed(result, reasons.addressNotAllowed());
      assert.equal(server.seen.length, before, 'nothing reached the server');
    });

    it('refuses a host name that resolves to loopback (localhost)', async () => {
      const before = server.seen.length;
      const result = await guarded.run(heartbeat(server.url('/ok', 'localhost')));
      assertFailed(result, reasons.addressNotAllowed());
      assert.equal(server.seen.length, before);
    });

    it('checks the address the socket uses: a rebinding name resolving to loopback is refused', async () => {
      const lookup = async (hostname: string) => {
        assert.equal(hostname, 'status.rebind.test');
        return [{ address: '127.0.0.1', family: 4 }];
      };
      const before = server.seen.length;
      const exec = new HttpCheckExecutor({ logger, lookup });
      const allowing = new HttpCheckExecutor({ logger, lookup, allowTargets: ['127.0.0.0/8'] });
      try {
        const result = await exec.run(heartbeat(server.url('/ok', 'status.rebind.test')));
        assertFailed(result, reasons.addressNotAllowed());
        assert.equal(server.seen.length, before);
        // The same resolver, with loopback allowed, connects to what it returned.
        const ok = await allowing.run(heartbeat(server.url('/ok', 'status.rebind.test')));
        assert.equal(ok.status, 'COMPLETED');
        assert.equal(server.seen.at(-1)?.headers.host, `status.rebind.test:${server.port}`);
      } finally {
        await Promise.all([exec.close(), allowing.close()]);
      }
    });

    it('refuses a name whose candidates mix allowed and blocked addresses', async () => {
      const exec = new HttpCheckExecutor({
        logger,
        lookup: async () => [
          { address: '203.0.113.7', family: 4 },
          { address: '169.254.169.254', family: 4 },
        ],
      });
      try {
        assertFailed(await exec.run(heartbeat('http://mixed.test/')), reasons.addressNotAllowed());
      } finally {
        await exec.close();
      }
    });

    it('refuses the metadata address even when loopback is allowed', async () => {
      assertFailed(await executor.run(heartbeat('http://169.254.169.254/latest/meta-data/')), reasons.addressNotAllowed());
      assertFailed(await executor.run(heartbeat('http://[fd00:ec2::254]/latest/meta-data/')), reasons.addressNotAllowed());
    });

    /**
     * Issue 29, item 6: metadata services outside 169.254/16 were reached.
     * Each is refused before any connection is attempted, as a literal and as
     * a name resolving to it, with private and link-local ranges allowed.
     * Every socket made meanwhile is watched (Node's `net.client.socket`
     * channel): a literal makes none, a name makes one whose lookup fails with
     * the guard's refusal, and a socket whose lookup fails never connects. A
     * missed refusal would time out or be refused by the network instead.
     */
    describe('cloud metadata addresses, refused before connecting', () => {
      const addresses = ['100.100.100.200', 'fd20:ce::254', '168.63.129.16', 'fd00:ec2::254', '169.254.169.254', '169.254.170.2', '192.0.0.192', 'fd00:c1::a9fe:a9fe', 'fd00:100::100:200', 'fd00:42::42', 'fd00:a9fe:a9fe::1'];
      const allowTargets = ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', '100.64.0.0/10', '192.0.0.0/24', 'fc00::/7', '169.254.0.0/16'];
      const sockets: Array<{ lookupRefused: boolean; connected: boolean }> = [];
      const watch = (message: unknown): void => {
        const socket = (message as { socket: import('node:net').Socket }).socket;
        const seen = { lookupRefused: false, connected: false };
        sockets.push(seen);
        socket.once('lookup', (err: Error | null) => void (seen.lookupRefused = err instanceof AddressNotAllowedError));
        socket.once('connect', () => void (seen.connected = true));
      };
      before(() => diagnostics.subscribe('net.client.socket', watch));
      after(() => diagnostics.unsubscribe('net.client.socket', watch));

      for (const address of addresses) {
        it(`refuses ${address}`, async () => {
          const family = address.includes(':') ? 6 : 4;
          const exec = new HttpCheckExecutor({ logger, allowTargets, lookup: async () => [{ address, family }] });
          try {
            // A short time limit: where the address answers or hangs, a missed refusal fails fast.
            const payload = (endpoint: string) => heartbeat(endpoint, { timeout: 2_000, body_contains: 'secret' });
            const first = sockets.length;
            assertFailed(await exec.run(payload(`http://${family === 6 ? `[${address}]` : address}/latest/meta-data/`)), reasons.addressNotAllowed());
            assert.equal(sockets.length, first, 'a socket was made for the literal address');
            assertFailed(await exec.run(payload('http://metadata.orloj.test/computeMetadata/v1/')), reasons.addressNotAllowed());
            const made = sockets.slice(first);
            assert.ok(made.length <= 1, `${made.length} sockets for one refused name`);
            for (const socket of made) assert.deepEqual(socket, { lookupRefused: true, connected: false });
          } finally {
            await exec.close();
          }
        });
      }
    });

    it('refuses an IPv4-mapped IPv6 loopback literal', async () => {
      const result = await guarded.run(heartbeat(`http://[::ffff:127.0.0.1]:${server.port}/ok`));
      assertFailed(result, reasons.addressNotAllowed());
      assertFailed(await guarded.run(heartbeat(`http://[::1]:${server.port}/ok`)), reasons.addressNotAllowed());
    });

    it('refuses IPv4-embedding IPv6 literals and names of blocked addresses, sending nothing', async () => {
      const before = server.seen.length;
      for (const host of ['[::127.0.0.1]', '[::ffff:0:127.0.0.1]', '[64:ff9b::127.0.0.1]', '[2002:7f00:1::]', '[64:ff9b::a9fe:a9fe]']) {
        assertFailed(await guarded.run(heartbeat(`http://${host}:${server.port}/ok`)), reasons.addressNotAllowed());
      }
      // A name a NAT64 resolver (DNS64) answers with the synthesized form of 127.0.0.1.
      const exec = new HttpCheckExecutor({ logger, lookup: async () => [{ address: '64:ff9b::7f00:1', family: 6 }] });
      try {
        assertFailed(await exec.run(heartbeat(`http://dns64.test:${server.port}/ok`)), reasons.addressNotAllowed());
      } finally {
        await exec.close();
      }
      assert.equal(server.seen.length, before, 'nothing reached the server');
    });

    it('refuses ranges in denyTargets that would otherwise be allowed', async () => {
      const exec = new HttpCheckExecutor({
        logger,
        allowTargets: ['127.0.0.0/8'],
        denyTargets: ['127.0.0.1/32', '10.0.0.0/8'],
        lookup: async () => [{ address: '10.20.30.40', family: 4 }],
      });
      try {
        const before = server.seen.length;
        assertFailed(await exec.run(heartbeat(server.url('/ok'))), reasons.addressNotAllowed());
        assert.equal(server.seen.length, before);
        assertFailed(await exec.run(heartbeat('http://intranet.test/health')), reasons.addressNotAllowed());
      } finally {
        await exec.close();
      }
    });

    it('rejects an invalid CIDR at construction', () => {
      assert.throws(() => new HttpCheckExecutor({ logger, allowTargets: ['127.0.0.0/99'] }), /Invalid CIDR "127\.0\.0\.0\/99"/);
      assert.throws(() => new HttpCheckExecutor({ logger, denyTargets: parseTargetList('10.0.0.0/8,bogus') }), /Invalid CIDR "bogus"/);
    });
  });
});
