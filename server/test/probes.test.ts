import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createTestDatabase, type TestDatabase, needService, deleteBusObjects, jsonLines, requireServices } from '@orloj/common/test-support';
import type { RoleProcess } from '@orloj/common/test-support';
import { amqpClientProperties } from './support/amqp-handshake.js';
import { TcpProxy } from './support/tcp-proxy.js';
import { probe, probePort, probeUntil, roleFleet } from './support/role-fleet.js';

const ROLES = ['api', 'scheduler', 'runners', 'log-ingest', 'notifier'] as const;
const STORE_ROLES = ['api', 'scheduler', 'log-ingest', 'notifier'];

/** The name a role process gives its broker connection (server/src/main.ts). */
const connectionName = (p: RoleProcess) => `orloj ${p.role} pid ${p.child!.pid} on ${os.hostname()}`;

type Readiness = { ready: boolean; checks: Record<string, { ok: boolean; detail?: string }> };
const readiness = (body: string) => JSON.parse(body) as Readiness;

/**
 * Every role as its own `orloj start --roles <role>` process on PostgreSQL and
 * RabbitMQ, each reaching them through a TCP proxy of the test's own: cutting
 * a proxy takes the store or the broker away from these processes alone
 * (the shared services keep running for the other suites).
 */
describe('probes: /livez and /readyz of every role, with the store and the broker taken away', function () {
  this.timeout(300_000);
  let db: TestDatabase;
  let amqpUrl: string;
  let dataDir: string;
  const prefix = `orloj-probes-${crypto.randomBytes(4).toString('hex')}.`;
  let pgProxy: TcpProxy;
  let amqpProxy: TcpProxy;
  let fleet: RoleProcess[] = [];
  const ports: Record<string, number> = {};

  before(async function () {
    this.timeout(180_000);
    amqpUrl = needService(this, 'amqp');
    db = await createTestDatabase('postgres', this);
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'orloj-probes-'));
    const pgUrl = new URL(db.url);
    pgProxy = new TcpProxy(pgUrl.hostname, Number(pgUrl.port || 5432));
    pgUrl.hostname = '127.0.0.1';
    pgUrl.port = String(await pgProxy.start());
    const brokerUrl = new URL(amqpUrl);
    // It keeps the first 4 KiB each client sends: the AMQP handshake, with the connection's name.
    amqpProxy = new TcpProxy(brokerUrl.hostname, Number(brokerUrl.port || 5672), 4096);
    brokerUrl.hostname = '127.0.0.1';
    brokerUrl.port = String(await amqpProxy.start());
    // The keys are made once into DATA_DIR/keys, before the processes share it.
    const apiLimits: Record<string, string> = { RATE_LIMIT_API_PER_SECOND: '1', RATE_LIMIT_API_BURST: '1', TRUSTED_PROXIES: '127.0.0.1' };
    fleet = roleFleet(ROLES, { databaseUrl: pgUrl.toString(), amqpUrl: brokerUrl.toString(), busPrefix: prefix, dataDir }, (role) => (role === 'api' ? apiLimits : {}));
    await fleet[0]!.start();
    await Promise.all(fleet.slice(1).map((p) => p.start()));
    for (const p of fleet) ports[p.role] = probePort(p);
  });

  after(async function () {
    this.timeout(60_000);
    await pgProxy?.restore();
    await amqpProxy?.restore();
    await Promise.all(fleet.map((p) => p.stop('SIGTERM')));
    await pgProxy?.stop();
    await amqpProxy?.stop();
    await db?.drop();
    if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
    if (amqpUrl) await deleteBusObjects(amqpUrl, prefix);
  });

  it('answers live and ready on every role, each on its own port', async () => {
    assert.equal(new Set(Object.values(ports)).size, ROLES.length);
    for (const role of ROLES) {
      assert.equal((await probe(ports[role]!, '/livez')).status, 200, role);
      const ready = await probeUntil(ports[role]!, '/readyz', (p) => p.status === 200, `${role} ready`);
      const checks = readiness(ready.body).checks;
      assert.equal(checks.bus?.ok, true, role);
      assert.equal(checks.store?.ok, STORE_ROLES.includes(role) ? true : undefined, role);
      const metrics = await probe(ports[role]!, '/metrics');
      assert.equal(metrics.status, 200);
      assert.match(metrics.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
      assert.match(metrics.body, /^orloj_bus_connected 1$/m, role);
      assert.match(metrics.body, /^orloj_ready 1$/m, role);
      assert.match(metrics.body, /^process_cpu_seconds_total /m, role);
      assert.match(metrics.body, /^nodejs_eventloop_lag_p99_seconds /m, role);
      if (role !== 'api') assert.equal((await probe(ports[role]!, '/elsewhere')).status, 404);
    }
  });

  it('never rate-limits probes and scrapes on the api, and tags every response with a request id', async () => {
    const port = ports.api!;
    const answers = await Promise.all(Array.from({ length: 30 }, (_, i) => probe(port, ['/livez', '/readyz', '/metrics'][i % 3]!)));
    assert.deepEqual(new Set(answers.map((a) => a.status)), new Set([200]));
    const limited = await Promise.all(Array.from({ length: 5 }, () => probe(port, '/api/workflows')));
    assert.ok(limited.some((a) => a.status === 429), 'the ordinary routes are limited (1/s, burst 1)');
    for (const a of [...answers, ...limited]) assert.match(a.headers.get('x-request-id') ?? '', /^[0-9a-f-]{36}$/);
    // From a trusted proxy (TRUSTED_PROXIES=127.0.0.1) the request id is kept, and logged.
    await new Promise((r) => setTimeout(r, 1_100)); // the rate limit's bucket (1/s) must refill in real time
    const traced = await probe(port, '/api/workflows/not-a-uuid?secret=1', { 'X-Request-Id': 'edge-7f3a', Cookie: 'orloj_session=topsecret' });
    assert.equal(traced.headers.get('x-request-id'), 'edge-7f3a');
    const api = fleet[0]!;
    const deadline = Date.now() + 10_000;
    while (!api.output.includes('"reqId":"edge-7f3a"') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100)); // poll interval: the log line arrives from another process
    const line = jsonLines(api.output.split('\n').filter((l) => l.startsWith('{')).join('\n')).find((l) => l.reqId === 'edge-7f3a' && l.msg === 'request');
    assert.ok(line, 'an access-log line carries the request id');
    assert.deepEqual(
      { method: line.method, route: line.route, path: line.path, status: line.status, client: line.client, role: line.role },
      { method: 'GET', route: '/workflows/:workflow_id', path: '/api/workflows/not-a-uuid', status: traced.status, client: '127.0.0.1', role: 'api' },
    );
    assert.equal(typeof line.durationMs, 'number');
    assert.doesNotMatch(api.output, /topsecret|secret=1/);
  });

  it('is not ready while the store is unreachable, and ready again once it is back', async () => {
    await pgProxy.cut();
    for (const role of ROLES) {
      if (STORE_ROLES.includes(role)) {
        const down = await probeUntil(ports[role]!, '/readyz', (p) => p.status === 503, `${role} not ready without the store`);
        assert.equal(readiness(down.body).checks.store?.ok, false, role);
      } else {
        assert.equal((await probe(ports[role]!, '/readyz')).status, 200, 'runners need no store');
      }
      assert.equal((await probe(ports[role]!, '/livez')).status, 200, `${role} is still live`);
    }
    await pgProxy.restore();
    for (const role of ROLES) await probeUntil(ports[role]!, '/readyz', (p) => p.status === 200, `${role} ready again after the store came back`);
  });

  it('is not ready while the broker is unreachable, and ready again once it reconnected', async () => {
    await amqpProxy.cut();
    for (const role of ROLES) {
      const down = await probeUntil(ports[role]!, '/readyz', (p) => p.status === 503, `${role} not ready without the broker`);
      assert.equal(readiness(down.body).checks.bus?.ok, false, role);
      assert.match((await probe(ports[role]!, '/metrics')).body, /^orloj_bus_connected 0$/m, role);
      assert.equal((await probe(ports[role]!, '/livez')).status, 200, `${role} is still live`);
    }
    await amqpProxy.restore();
    for (const role of ROLES) await probeUntil(ports[role]!, '/readyz', (p) => p.status === 200, `${role} ready again after the broker came back`);
  });

  it('names each broker connection after its role and process id', () => {
    // What each process announced to the broker (Connection.Start-Ok), read off the wire by the test's proxy:
    // every connection it made, the first ones and those after the broker cut above.
    // (A connection cut before its handshake ended has no Start-Ok: it never had a name to show.)
    const announced = amqpProxy.connections.map((c) => amqpClientProperties(c.sent)).flatMap((props) => (props ? [props.connection_name] : []));
    assert.ok(announced.length >= fleet.length, `${announced.length} handshakes for ${fleet.length} processes`);
    for (const name of announced) assert.match(String(name), /^orloj [a-z,-]+ pid \d+ on \S+$/, 'every connection is named');
    for (const p of fleet) assert.ok(announced.includes(connectionName(p)), `${connectionName(p)} in ${announced.join(' | ')}`);
  });

  it('shows those names in the broker\'s own list (rabbitmqctl list_connections)', function () {
    // The Debian wrapper runs rabbitmqctl as the rabbitmq user (its Erlang cookie): it works for root or
    // rabbitmq on the broker's machine, and nowhere else. CI is root there, so it must work in CI.
    const listed = spawnSync('rabbitmqctl', ['-q', 'list_connections', 'peer_port', 'client_properties', '--formatter', 'json'], { encoding: 'utf8', timeout: 60_000 });
    if (listed.error || listed.status !== 0) {
      const why = `rabbitmqctl failed (${listed.error?.message ?? `exit ${listed.status}`})${listed.stderr ? `: ${listed.stderr.trim()}` : ''}`;
      if (requireServices) throw new Error(`REQUIRE_SERVICES=1: ${why}`);
      this.skip();
    }
    // The broker's connections that came through the proxy, by the port they came from.
    const byPort = new Map(
      (JSON.parse(listed.stdout) as { peer_port: number; client_properties: [string, string, unknown][] }[]).map((c) => [
        c.peer_port,
        c.client_properties.find(([key]) => key === 'connection_name')?.[2],
      ]),
    );
    // (Open ones only: the port of a connection closed before may be another client's now.)
    const open = amqpProxy.connections.filter((c) => c.open && c.upstreamPort !== undefined && byPort.has(c.upstreamPort));
    assert.equal(open.length, fleet.length, `one open connection per process: ${JSON.stringify([...byPort])}`);
    for (const c of open) assert.equal(byPort.get(c.upstreamPort!), amqpClientProperties(c.sent)?.connection_name, 'the broker shows the name the client sent');
    for (const p of fleet) assert.ok([...byPort.values()].includes(connectionName(p)), `${connectionName(p)} listed by the broker`);
  });

  it('writes only JSON objects without duplicate keys to stdout', () => {
    for (const p of fleet) {
      // RoleProcess mixes stdout and stderr; orloj writes nothing to stderr when all is well.
      const lines = jsonLines(p.output);
      assert.ok(lines.length > 3, p.role);
    }
  });
});
