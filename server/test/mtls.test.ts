import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { migrate, migrationStatus, startOrloj, type RunningOrloj } from '@orloj/server';
import { loadConfig } from '@orloj/common/config';
import { silentLogger, type Logger } from '@orloj/common/logging';
import { QUEUES } from '@orloj/common/messages';
import { ensureKeyDir } from '@orloj/common/envelope';
import { createBus, type Bus } from '@orloj/common/bus';
import { openDatabase } from '@orloj/common/store';
import { TestClient } from '@orloj/api/test-support';
import { recordingLogger, until, needService, services } from '@orloj/common/test-support';
import {
  generateCertificates,
  scratchDir,
  startPostgres,
  startRabbit,
  tlsEnv,
  type DeployRole,
  type Postgres,
  type Rabbit,
} from './support/tls-servers.js';

const TEST_IMAGE = 'localhost/orloj-test/busybox:1';

/**
 * Issue 16's mutual TLS: every role against a TLS-only RabbitMQ requiring
 * client certificates and a PostgreSQL that admits only `hostssl … cert`,
 * each with its own certificate (deploy/tls/generate.sh), the broker
 * permissions of deploy/rabbitmq/definitions.json and the database roles of
 * deploy/postgres/roles.sql. Both servers are private to this suite.
 */
describe('mutual TLS: every role against a TLS-only broker and a certificate-only database', function () {
  this.timeout(180_000);
  let dir: string;
  let certs: string;
  let rabbit: Rabbit | undefined;
  let pg: Postgres | undefined;
  const started: RunningOrloj[] = [];
  const buses: Bus[] = [];
  const clockOrigin = Date.now();

  before(async function () {
    dir = scratchDir('mtls');
    certs = await generateCertificates(dir);
    // The operator's step: distributed processes read their signing keys, they never make them.
    await ensureKeyDir(path.join(dir, 'data'));
    const servers = await Promise.allSettled([startRabbit(this, dir, certs), startPostgres(this, dir, certs)]);
    if (servers[0].status === 'fulfilled') rabbit = servers[0].value;
    if (servers[1].status === 'fulfilled') pg = servers[1].value;
    for (const s of servers) if (s.status === 'rejected') throw s.reason;
  });

  after(async () => {
    await Promise.allSettled(buses.map((b) => b.close()));
    for (const o of [...started].reverse()) await o.stop();
    await Promise.allSettled([rabbit?.stop(), pg?.stop()]);
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  /**
   * One role's environment: by default its own certificates for both servers
   * (the runners: no database); `null` presents none, only the CA.
   */
  function roleEnv(role: DeployRole, certsOf: { bus?: DeployRole | null; db?: DeployRole | null } = {}): Record<string, string> {
    const busCert = certsOf.bus === undefined ? role : (certsOf.bus ?? undefined);
    const dbCert = certsOf.db === undefined ? role : (certsOf.db ?? undefined);
    return {
      DATA_DIR: path.join(dir, 'data'),
      BUS_URL: rabbit!.url,
      ...tlsEnv('BUS_TLS', certs, busCert),
      ...(role === 'runners' ? {} : { DATABASE_URL: pg!.url(`orloj-${role}`), ...tlsEnv('DATABASE_TLS', certs, dbCert) }),
      PORT: '0',
      OPS_PORT: '0',
      RATE_LIMIT_ENABLED: 'false',
      RUNNER_ALLOW_TARGETS: '127.0.0.0/8',
      DOCKER_HOST: services.docker ?? 'unix:///nonexistent/docker.sock',
      // the test image is built locally (localhost/…), outside the default allow-list (docs/security.md)
      CONTAINER_REGISTRIES: 'docker.io,localhost',
      // one clock minute passes in one real second, the same clock in every role
      ORLOJ_CLOCK: `accelerated:${clockOrigin}:60`,
      SCHEDULER_TICK: '10s',
      JOB_LEASE_TTL: '60s',
      RUNNER_SHUTDOWN_GRACE: '2s',
      LOG_LEVEL: 'silent',
    };
  }

  async function start(role: DeployRole, env = roleEnv(role), logger: Logger = silentLogger): Promise<RunningOrloj> {
    const orloj = await startOrloj({ roles: [role], logger, env });
    started.push(orloj);
    return orloj;
  }

  async function busAs(role: DeployRole): Promise<Bus> {
    const config = loadConfig(roleEnv(role));
    const bus = await createBus(config.busUrl, { logger: silentLogger, tls: config.busTls, connectTimeoutMs: 20_000 });
    buses.push(bus);
    return bus;
  }

  it('checks and applies migrations over TLS: `orloj migrate --check` honours DATABASE_TLS_* like `orloj migrate`', async () => {
    const env = roleEnv('api');
    await migrate(env);
    const status = await migrationStatus(env);
    assert.deepEqual([status.pending, status.unknown], [[], []]);
  });

  it('runs each role with its own certificate: a job runs, its log lines arrive, its events are applied', async function () {
    // the job prints lines (the runners → log-ingest path) in a container of the machine's runtime
    needService(this, 'docker');
    const api = await start('api');
    for (const role of ['scheduler', 'log-ingest', 'notifier', 'runners'] as const) await start(role);

    const c = new TestClient(`http://127.0.0.1:${api.port}`);
    assert.equal((await c.post('/auth/register', { email: `mtls-${crypto.randomUUID()}@example.com`, password: 'password123' })).status, 201);
    const created = await c.post(
      '/workflows',
      { name: 'echo', kind: 'CONTAINER', payload: JSON.stringify({ image: TEST_IMAGE, cmd: ['echo', 'over mutual TLS'] }), interval: 60, max_consecutive_job_failures_allowed: 3 },
      { headers: { 'idempotency-key': crypto.randomUUID() } },
    );
    assert.equal(created.status, 201, created.text);
    const id = created.json.id as string;
    await until(() => c.get(`/workflows/${id}`).then((r) => r.json), (w) => w.build_status === 'COMPLETED', 'build COMPLETED', 60_000);
    const manual = await c.post(`/workflows/${id}/jobs/schedule`, undefined, { headers: { 'idempotency-key': crypto.randomUUID() } });
    assert.equal(manual.status, 201, manual.text);
    const jobUrl = `/workflows/${id}/jobs/${manual.json.id}`;
    await until(() => c.get(jobUrl).then((r) => r.json), (j) => j.status === 'COMPLETED', 'the job COMPLETED (runners → scheduler)', 60_000);
    const logs = await until(() => c.get(`${jobUrl}/logs`).then((r) => r.json), (l) => Array.isArray(l.logs) && l.logs.length > 0, 'log lines (runners → log-ingest)', 60_000);
    assert.equal(logs.logs[0].message, 'over mutual TLS');
    await until(() => c.get(`/analytics/${id}`).then((r) => r.json), (a) => a.total_jobs >= 1, 'job counters (notifier relay → notifier)', 60_000);

    // Each process is logged in as its certificate: on the broker as the CN
    // (EXTERNAL), in the database as the role of the same name.
    const identities = ['orloj-api', 'orloj-log-ingest', 'orloj-notifier', 'orloj-runners', 'orloj-scheduler'];
    assert.deepEqual([...new Set(await rabbit!.connectionUsers())].sort(), identities);
    // the definitions replace the default guest user
    assert.deepEqual((await rabbit!.users()).sort(), identities);
    // Every role with a store logged in as its own role (a pool may have closed its idle connections since: the server's log, not a snapshot).
    const sessions = [...new Set(pg!.loggedIn().filter((l) => l.database === 'orloj' && l.user.startsWith('orloj-')).map((l) => l.user))].sort();
    assert.deepEqual(sessions, ['orloj-api', 'orloj-log-ingest', 'orloj-notifier', 'orloj-scheduler']);
  });

  it('refuses a process without a client certificate at once, naming the cause', async () => {
    // At once: on the first refusal, never a "retrying" line (which waits out the 30 s connect timeout).
    const { logger, lines } = recordingLogger();
    await assert.rejects(
      start('runners', roleEnv('runners', { bus: null }), logger),
      /refused this process: .*certificate required.*BUS_TLS_CERT_FILE/s,
    );
    await assert.rejects(start('notifier', roleEnv('notifier', { db: null }), logger), /certificate/i);
    assert.deepEqual(lines.filter((l) => /retrying/.test(l.msg ?? '')).map((l) => l.msg), [], 'retried a refusal that retrying cannot help');
  });

  it('refuses to talk to a broker it cannot verify', async () => {
    const { BUS_TLS_CA_FILE: _ca, ...untrusting } = roleEnv('runners');
    // without the orloj CA the broker's certificate is not trusted by the system's CAs
    await assert.rejects(start('runners', untrusting), /does not trust the message broker at amqps:\/\/localhost:\d+: self[- ]signed certificate in certificate chain/);
  });

  it("refuses another role's certificate on queues and data it may not use", async () => {
    const runners = await busAs('runners');
    // the runners may not consume the notifier's queue, nor publish jobs
    await assert.rejects(
      runners.consume(QUEUES.domainEvents, () => {}),
      /ACCESS_REFUSED - access to (queue|exchange) 'orloj\.domain-events(\.dead)?(\.in)?' in vhost '\/' refused for user 'orloj-runners'/,
    );
    await assert.rejects(
      runners.publish(QUEUES.jobs, { forged: true }),
      /ACCESS_REFUSED - access to exchange 'orloj\.jobs\.in' in vhost '\/' refused for user 'orloj-runners'/,
    );
    // what the runners may do still works on the same connection
    await runners.publish(QUEUES.jobEvents, { harmless: true });

    // a notifier started with the runners' broker certificate cannot take its queue
    await assert.rejects(start('notifier', roleEnv('notifier', { bus: 'runners' })), /ACCESS_REFUSED.*orloj-runners/);

    // the runners have no database identity; a certificate only logs in as its own CN
    for (const [user, cert] of [
      ['orloj-runners', 'runners'],
      ['orloj-scheduler', 'api'],
    ] as const) {
      const database = openDatabase(pg!.url(user), { tls: loadConfig({ DATABASE_URL: pg!.url(user), ...tlsEnv('DATABASE_TLS', certs, cert) }).databaseTls });
      try {
        await assert.rejects(database.migrate(), /certificate authentication failed|role "orloj-runners" does not exist/);
      } finally {
        await database.close();
      }
    }
  });
});
