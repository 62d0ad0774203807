import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import { cp, mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { TestClient } from '@orloj/api/test-support';
import { requireServices } from '@orloj/common/test-support';
import { IMAGE, buildImage, freePort, podman, podmanEnv, repoDir, run, until } from './support/image.js';

/**
 * deploy/compose.yaml brought up on this machine by Debian's docker-compose through a
 * podman Docker-API socket of this suite's own (the shared one other suites use is left
 * alone): PostgreSQL, RabbitMQ and nginx from a local stand-in image (override.yaml),
 * every orloj service from the real image, api ×2, scheduler ×2, runners ×2, mutual TLS
 * to both servers. A smoke through the ingress at /api: register, create a workflow,
 * its job runs on a runner replica. Then: without a client certificate, neither server
 * lets a client in.
 */
describe('deploy: compose, distributed with mutual TLS', function () {
  this.timeout(20 * 60_000);
  const project = `orloj-test-${crypto.randomBytes(3).toString('hex')}`;
  const stateDir = path.join(process.env.ORLOJ_PODMAN_DIR || '/var/tmp/orloj-podman', `../orloj-deploy-podman-${project}`);
  const sock = path.join(stateDir, 'podman.sock');
  let service: ChildProcess | undefined;
  let work: string;
  let deployDir: string;
  let port: number;
  let composeEnv: NodeJS.ProcessEnv;
  let up = false;

  const compose = async (args: string[], timeout = 300_000) => {
    const files = ['-p', project, '-f', 'compose.yaml', '-f', 'test/compose/override.yaml'];
    try {
      const { stdout } = await run('docker-compose', [...files, ...args], { cwd: deployDir, env: composeEnv, timeout, maxBuffer: 32 << 20 });
      return stdout;
    } catch (err) {
      throw new Error(`docker-compose ${args.join(' ')}: ${(err as { stderr?: string }).stderr ?? String(err)}`);
    }
  };
  const container = (svc: string, n = 1) => `${project}_${svc}_${n}`;
  const containersOf = async (svc: string) =>
    (await podman(['ps', '--filter', `label=com.docker.compose.project=${project}`, '--filter', `label=com.docker.compose.service=${svc}`, '--format', '{{.Names}}']))
      .split('\n')
      .filter(Boolean);

  before(async function () {
    await buildImage(this);
    for (const tool of ['docker-compose', 'openssl']) {
      try {
        await run('sh', ['-c', `command -v ${tool}`]);
      } catch {
        await run('apt-get', ['install', '-y', '-qq', '--no-install-recommends', tool === 'docker-compose' ? 'docker-compose' : 'openssl'], {
          env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
          timeout: 600_000,
        }).catch((err: unknown) => {
          if (requireServices) throw err;
          this.skip();
        });
      }
    }
    // Service names resolve inside compose networks through podman's CNI dnsname plugin.
    // compose's `init: true` needs podman's init binary (catatonit).
    await run('sh', ['-c', 'test -x /usr/lib/cni/dnsname && test -x /usr/libexec/podman/catatonit || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends golang-github-containernetworking-plugin-dnsname catatonit'], { timeout: 600_000 });
    await run(path.join(repoDir, 'deploy/test/compose/make-services-image.sh'), [], { env: podmanEnv, timeout: 900_000 });

    await mkdir(stateDir, { recursive: true });
    service = spawn('podman', ['system', 'service', '--time=0', `unix://${sock}`], { env: podmanEnv, cwd: '/', stdio: 'ignore' });
    await until(
      () => run('curl', ['-s', '--max-time', '2', '--unix-socket', sock, 'http://d/_ping']).then((r) => r.stdout),
      (out) => out === 'OK',
      'the podman API service',
    );

    work = await mkdtemp(path.join(tmpdir(), 'orloj-compose-'));
    deployDir = path.join(work, 'deploy');
    await cp(path.join(repoDir, 'deploy'), deployDir, { recursive: true, filter: (src) => !src.includes(`${path.sep}secrets`) });
    await run(path.join(deployDir, 'compose/setup.sh'), [], { timeout: 120_000 });
    port = await freePort();
    composeEnv = {
      ...process.env,
      DOCKER_HOST: `unix://${sock}`,
      ORLOJ_IMAGE: IMAGE,
      ORLOJ_HTTP_PORT: String(port),
      ORLOJ_PUBLIC_URL: `http://127.0.0.1:${port}`,
      // the smoke's HEARTBEAT check calls the api through the ingress by its compose name
      ORLOJ_ALLOWED_HOSTS: 'ingress',
      // The smoke checks the ingress itself: an address on the compose network.
      RUNNER_ALLOW_TARGETS: '10.0.0.0/8',
      LOG_LEVEL: 'warn',
      COMPOSE_HTTP_TIMEOUT: '300',
    };

    // No systemd here to run podman's health checks on a timer: run them until the
    // servers are healthy, so that depends_on: service_healthy lets the roles start.
    await compose(['up', '-d', '--no-build', 'postgres', 'rabbitmq']);
    up = true;
    for (const svc of ['postgres', 'rabbitmq']) {
      await until(
        () => run('podman', ['healthcheck', 'run', container(svc)], { env: podmanEnv }).then(() => 'healthy', () => 'unhealthy'),
        (s) => s === 'healthy',
        `${svc} healthy`,
        180_000,
      ).catch(async (err: unknown) => {
        throw new Error(`${String(err)}\n${await podman(['logs', '--tail', '30', container(svc)]).catch(String)}`);
      });
    }
    await compose(['up', '-d', '--no-build', '--scale', 'runners=2']);
  });

  after(async () => {
    if (up) await compose(['down', '-v', '-t', '5'], 180_000).catch((err: unknown) => console.error(String(err)));
    if (service?.pid) service.kill('SIGTERM');
    if (work) await rm(work, { recursive: true, force: true });
    await rm(stateDir, { recursive: true, force: true });
  });

  it('starts api ×2, scheduler ×2, runners ×2, log-ingest and notifier from the orloj image', async () => {
    const expected: Record<string, number> = { api: 2, scheduler: 2, runners: 2, 'log-ingest': 1, notifier: 1, ingress: 1 };
    for (const [svc, n] of Object.entries(expected)) {
      const names = await until(() => containersOf(svc), (c) => c.length === n, `${n} running ${svc}`);
      if (svc !== 'ingress') {
        for (const name of names) assert.equal(await podman(['inspect', '--format', '{{.ImageName}}', name]), IMAGE);
      }
    }
  });

  it('serves the api through the ingress at /api: register, create a workflow, a job runs on a runner replica', async () => {
    const c = new TestClient(`http://127.0.0.1:${port}/api`);
    await until(() => c.get('/openapi.json'), (r) => r.status === 200, 'the api through the ingress', 180_000).catch(async (err: unknown) => {
      const logs = await Promise.all(['api', 'scheduler', 'runners'].map((s) => podman(['logs', '--tail', '15', container(s)]).catch(String)));
      throw new Error(`${String(err)}\n${logs.join('\n')}`);
    });
    const reg = await c.post('/auth/register', { email: `compose-${crypto.randomUUID()}@example.com`, password: 'password123' });
    assert.equal(reg.status, 201, reg.text);
    const created = await c.post(
      '/workflows',
      { name: 'compose smoke', kind: 'HEARTBEAT', interval: 60, max_consecutive_job_failures_allowed: 3, payload: JSON.stringify({ endpoint: 'http://ingress/api/openapi.json' }) },
      { headers: { 'idempotency-key': crypto.randomUUID() } },
    );
    assert.equal(created.status, 201, created.text);
    const id = created.json.id as string;
    await until(() => c.get(`/workflows/${id}`).then((r) => r.json), (w) => w.build_status === 'COMPLETED', 'build COMPLETED', 120_000);
    const scheduled = await c.post(`/workflows/${id}/jobs/schedule`, undefined, { headers: { 'idempotency-key': crypto.randomUUID() } });
    assert.equal(scheduled.status, 201, scheduled.text);
    const job = await until(
      () => c.get(`/workflows/${id}/jobs/${scheduled.json.id}`).then((r) => r.json),
      (j) => j.status === 'COMPLETED' || j.status === 'FAILED',
      'the job to finish',
      120_000,
    );
    assert.equal(job.status, 'COMPLETED', JSON.stringify(job));

    // Which runner ran it: the database knows; it is one of the runner replicas.
    const runnerId = await podman(['exec', container('postgres'), 'setpriv', '--reuid=postgres', '--regid=postgres', '--init-groups', 'psql', '-tA', '-d', 'orloj', '-c', `select runner_id from jobs where id = '${String(scheduled.json.id)}'`]);
    const hosts = await Promise.all((await containersOf('runners')).map((n) => podman(['inspect', '--format', '{{.Config.Hostname}}', n])));
    // RUNNER_ID defaults to runner-<hostname>-<random> (unique per process, docs/operations.md)
    assert.ok(hosts.some((h) => runnerId.startsWith(`runner-${h}-`)), `runner ${runnerId} is one of ${hosts.join(', ')}`);
  });

  it('lets no client without a certificate into PostgreSQL or RabbitMQ', async () => {
    const network = `${project}_default`;
    const probe = (script: string) =>
      podman(['run', '--rm', '--network', network, '-v', `${path.join(deployDir, 'compose/secrets/tls/ca.crt')}:/ca.crt:ro`, 'localhost/orloj-test/services:1', 'sh', '-c', script]).then(
        (out) => ({ ok: true, out }),
        (err: unknown) => ({ ok: false, out: String((err as { stderr?: string }).stderr ?? err) }),
      );
    const pg = await probe('PGCONNECT_TIMEOUT=10 psql "host=postgres dbname=orloj user=orloj-api sslmode=verify-full sslrootcert=/ca.crt" -c "select 1"');
    assert.equal(pg.ok, false, pg.out);
    assert.match(pg.out, /certificate|authentication/i);
    // The broker's TLS listener requires a client certificate: the handshake fails without one.
    const mq = await probe('echo | timeout 10 openssl s_client -connect rabbitmq:5671 -CAfile /ca.crt -verify_return_error 2>&1; echo; echo | timeout 10 openssl s_client -connect rabbitmq:5671 -CAfile /ca.crt -quiet 2>&1 </dev/null; true');
    assert.match(mq.out, /alert|certificate required|handshake failure/i, mq.out);
    // No plain listener at all.
    const plain = await probe('timeout 5 bash -c "echo > /dev/tcp/rabbitmq/5672" && echo OPEN || echo CLOSED');
    assert.match(plain.out, /CLOSED/);
  });
});
