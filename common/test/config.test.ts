import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ConfigError, loadConfig, resolveSecrets } from '@orloj/common/config';

describe('config', () => {
  it('has documented defaults', () => {
    const c = loadConfig({});
    assert.equal(c.port, 8080);
    assert.equal(c.host, '127.0.0.1');
    assert.equal(c.dataDir, path.resolve('./data'));
    assert.equal(c.databaseUrl, `sqlite:${path.resolve('./data/orloj.db')}`);
    assert.equal(c.serverHostUrl, 'http://localhost:8080');
    assert.equal(c.sameSite, 'Lax');
    assert.equal(c.secureCookies, false);
    assert.equal(c.sessionTtlMs, 7 * 86_400_000);
    assert.equal(c.csrfTtlMs, 7 * 86_400_000);
    assert.deepEqual(c.rateLimit, { enabled: true, authPerMinute: 10, authBurst: 5, apiPerSecond: 20, apiBurst: 40 });
    assert.ok(Object.isFrozen(c));
  });

  it('limits connections, heavy requests and streams per user, and leaves registration open, by default (issue 29)', () => {
    const c = loadConfig({});
    assert.deepEqual(c.http, {
      maxConnections: 4096,
      maxConnectionsPerClient: 256,
      headersTimeoutMs: 10_000,
      maxHeavyRequests: 8,
      maxHeavyRequestsPerUser: 2,
      maxStreamsPerUser: 10,
    });
    assert.equal(c.registration, 'open');
    assert.equal(loadConfig({ REGISTRATION: 'Invitation' }).registration, 'invitation');
    // A core left to the event loop: at least one reader thread, at most four.
    assert.equal(c.sqliteReadWorkers, Math.max(1, Math.min(4, os.availableParallelism() - 1)));
    assert.equal(loadConfig({ SQLITE_READ_WORKERS: '3' }).sqliteReadWorkers, 3);
  });

  it('refuses a bad connection, heavy-request, stream, registration or reader setting, naming each variable', () => {
    const bad = {
      HTTP_MAX_CONNECTIONS: '0',
      HTTP_MAX_CONNECTIONS_PER_CLIENT: 'many',
      HTTP_HEADERS_TIMEOUT: '10m',
      HTTP_MAX_HEAVY_REQUESTS: '0',
      HTTP_MAX_HEAVY_REQUESTS_PER_USER: '-1',
      LIVE_TAIL_MAX_STREAMS_PER_USER: '0',
      REGISTRATION: 'by-invite',
      SQLITE_READ_WORKERS: '65',
    };
    assert.throws(
      () => loadConfig(bad),
      (err: unknown) => {
        assert.ok(err instanceof ConfigError);
        for (const name of Object.keys(bad)) assert.match(err.message, new RegExp(`${name} must`), name);
        return true;
      },
    );
  });

  it('names every invalid variable in one error', () => {
    assert.throws(
      () =>
        loadConfig({
          PORT: 'eighty',
          SERVER_SAME_SITE_MODE: 'Sometimes',
          SESSION_EXPIRY: 'forever',
          DATABASE_URL: 'mysql://x',
          SESSION_SECRET: 'short',
          SERVER_ALLOWED_ORIGINS: 'not a url',
          RATE_LIMIT_ENABLED: 'maybe',
        }),
      (err: unknown) => {
        assert.ok(err instanceof ConfigError);
        for (const name of ['PORT', 'SERVER_SAME_SITE_MODE', 'SESSION_EXPIRY', 'DATABASE_URL', 'SESSION_SECRET', 'SERVER_ALLOWED_ORIGINS', 'RATE_LIMIT_ENABLED']) {
          assert.match(err.message, new RegExp(name));
        }
        return true;
      },
    );
  });

  it('isolates containers by default: 256 MiB scratch space, a user namespace where the runtime offers one', () => {
    const c = loadConfig({});
    assert.equal(c.runner.containerScratchMb, 256);
    assert.equal(c.runner.containerUserns, 'auto');
    const set = loadConfig({ CONTAINER_SCRATCH_MB: '64', CONTAINER_USERNS: 'host' });
    assert.equal(set.runner.containerScratchMb, 64);
    assert.equal(set.runner.containerUserns, 'host');
    assert.throws(() => loadConfig({ CONTAINER_SCRATCH_MB: '0' }), /CONTAINER_SCRATCH_MB must be an integer from 1 to 65536/);
    assert.throws(() => loadConfig({ CONTAINER_SCRATCH_MB: 'lots' }), /CONTAINER_SCRATCH_MB/);
    assert.throws(() => loadConfig({ CONTAINER_USERNS: 'keep-id' }), /CONTAINER_USERNS must be one of auto, host/);
  });

  it('refuses SameSite=None without https and a CSRF expiry longer than the session', () => {
    assert.throws(() => loadConfig({ SERVER_SAME_SITE_MODE: 'None' }), /https/);
    assert.throws(() => loadConfig({ SESSION_EXPIRY: '1h', CSRF_EXPIRY: '2h' }), /CSRF_EXPIRY/);
    assert.equal(loadConfig({ SERVER_SAME_SITE_MODE: 'none', SERVER_HOST_URL: 'https://x.example' }).secureCookies, true);
  });

  it('reads secrets from NAME_FILE', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'orloj-cfg-'));
    const file = path.join(dir, 's');
    fs.writeFileSync(file, 'x'.repeat(40) + '\n');
    assert.equal(loadConfig({ SESSION_SECRET_FILE: file }).sessionSecret, 'x'.repeat(40));
    assert.throws(() => loadConfig({ SESSION_SECRET_FILE: path.join(dir, 'missing') }), /SESSION_SECRET_FILE/);
    fs.rmSync(dir, { recursive: true });
  });

  it('generates secrets once into DATA_DIR and reuses them', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'orloj-cfg-'));
    const first = resolveSecrets(loadConfig({ DATA_DIR: dir }));
    const second = resolveSecrets(loadConfig({ DATA_DIR: dir }));
    assert.ok(first.sessionSecret.length >= 32);
    assert.equal(first.sessionSecret, second.sessionSecret);
    assert.equal(first.csrfSecret, second.csrfSecret);
    assert.notEqual(first.sessionSecret, first.csrfSecret);
    assert.equal(fs.statSync(path.join(dir, 'secrets.json')).mode & 0o777, 0o600);
    fs.rmSync(dir, { recursive: true });
  });

  it('reads SERVER_ALLOWED_HOSTS as lower-cased names, .domains or *, and refuses anything else naming it', () => {
    assert.deepEqual(loadConfig({}).allowedHosts, []);
    assert.deepEqual(loadConfig({ SERVER_ALLOWED_HOSTS: 'Orloj.Example.com., .corp.example ,*' }).allowedHosts, ['orloj.example.com', '.corp.example', '*']);
    for (const bad of ['https://orloj.example.com', 'orloj.example.com:8080', 'a b', '..x', '[::1]', 'x/y']) {
      assert.throws(() => loadConfig({ SERVER_ALLOWED_HOSTS: bad }), (err: unknown) => err instanceof ConfigError && /SERVER_ALLOWED_HOSTS/.test(err.message), bad);
    }
  });

  it('creates DATA_DIR 0700 and tightens a secrets.json left open to others', () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'orloj-cfg-'));
    const dir = path.join(root, 'a', 'data');
    const previous = process.umask(0);
    try {
      resolveSecrets(loadConfig({ DATA_DIR: dir }));
    } finally {
      process.umask(previous);
    }
    assert.equal(fs.statSync(dir).mode & 0o777, 0o700);
    assert.equal(fs.statSync(path.join(root, 'a')).mode & 0o777, 0o700);
    fs.chmodSync(path.join(dir, 'secrets.json'), 0o644);
    resolveSecrets(loadConfig({ DATA_DIR: dir }));
    assert.equal(fs.statSync(path.join(dir, 'secrets.json')).mode & 0o777, 0o600);
    fs.rmSync(root, { recursive: true });
  });
});

describe('config: mutual TLS files (BUS_TLS_*, DATABASE_TLS_*)', function () {
  this.timeout(60_000);
  let dir: string;
  let f: (name: string) => string;
  const amqps = 'amqps://mq.example:5671';
  const postgres = 'postgres://orloj-api@db.example/orloj';

  before(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'orloj-cfg-tls-'));
    // the certificates operators make, with the script they use
    execFileSync(path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../deploy/tls/generate.sh'), [dir], { stdio: 'ignore' });
    f = (name) => path.join(dir, name);
  });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  const problems = (env: Record<string, string>): string => {
    try {
      loadConfig(env);
    } catch (err) {
      assert.ok(err instanceof ConfigError);
      return err.message;
    }
    assert.fail('expected a ConfigError');
  };

  it('takes the files of a client certificate for the bus and the store', () => {
    const c = loadConfig({
      BUS_URL: amqps,
      BUS_TLS_CA_FILE: f('ca.crt'),
      BUS_TLS_CERT_FILE: f('orloj-api.crt'),
      BUS_TLS_KEY_FILE: f('orloj-api.key'),
      DATABASE_URL: postgres,
      DATABASE_TLS_CA_FILE: f('ca.crt'),
      DATABASE_TLS_CERT_FILE: f('orloj-api.crt'),
      DATABASE_TLS_KEY_FILE: f('orloj-api.key'),
    });
    assert.deepEqual(c.busTls, { caFile: f('ca.crt'), certFile: f('orloj-api.crt'), keyFile: f('orloj-api.key') });
    assert.deepEqual(c.databaseTls, c.busTls);
    assert.equal(loadConfig({}).busTls, undefined);
    assert.equal(loadConfig({}).databaseTls, undefined);
    // a CA alone verifies the server without presenting a certificate
    assert.deepEqual(loadConfig({ BUS_URL: amqps, BUS_TLS_CA_FILE: f('ca.crt') }).busTls, { caFile: f('ca.crt') });
  });

  it('refuses a missing or unreadable file, naming the variable', () => {
    assert.match(problems({ BUS_URL: amqps, BUS_TLS_CA_FILE: f('nope.crt') }), /BUS_TLS_CA_FILE names a file that cannot be read: .*nope\.crt \(ENOENT\)/);
    assert.match(problems({ DATABASE_URL: postgres, DATABASE_TLS_CA_FILE: dir }), /DATABASE_TLS_CA_FILE names a file that cannot be read/);
  });

  it('refuses a file that holds no PEM certificate or key, naming the variable', () => {
    assert.match(problems({ BUS_URL: amqps, BUS_TLS_CA_FILE: f('orloj-api.key') }), /BUS_TLS_CA_FILE must name a PEM file holding a certificate/);
    assert.match(
      problems({ BUS_URL: amqps, BUS_TLS_CERT_FILE: f('orloj-api.crt'), BUS_TLS_KEY_FILE: f('orloj-api.crt') }),
      /BUS_TLS_KEY_FILE must name a PEM file holding a private key/,
    );
  });

  it('refuses half a pair and a key of another certificate', () => {
    assert.match(problems({ BUS_URL: amqps, BUS_TLS_CERT_FILE: f('orloj-api.crt') }), /BUS_TLS_CERT_FILE needs BUS_TLS_KEY_FILE/);
    assert.match(problems({ DATABASE_URL: postgres, DATABASE_TLS_KEY_FILE: f('orloj-api.key') }), /DATABASE_TLS_KEY_FILE needs DATABASE_TLS_CERT_FILE/);
    assert.match(
      problems({ BUS_URL: amqps, BUS_TLS_CERT_FILE: f('orloj-api.crt'), BUS_TLS_KEY_FILE: f('orloj-runners.key') }),
      /BUS_TLS_KEY_FILE does not belong to the certificate in BUS_TLS_CERT_FILE/,
    );
  });

  it('refuses TLS files where there is no TLS to use them, or a second way to say it', () => {
    assert.match(problems({ BUS_TLS_CA_FILE: f('ca.crt') }), /BUS_TLS_CA_FILE.*need an amqps:\/\/ BUS_URL/);
    assert.match(problems({ BUS_URL: 'amqp://mq.example', BUS_TLS_CA_FILE: f('ca.crt') }), /need an amqps:\/\/ BUS_URL/);
    assert.match(problems({ DATABASE_TLS_CA_FILE: f('ca.crt') }), /DATABASE_TLS_CA_FILE.*need a postgres:\/\/ DATABASE_URL/);
    assert.match(
      problems({ DATABASE_URL: `${postgres}?sslmode=verify-full&sslrootcert=${f('ca.crt')}`, DATABASE_TLS_CA_FILE: f('ca.crt') }),
      /DATABASE_TLS_\* and the ssl parameters of DATABASE_URL/,
    );
  });
});

describe('config: OPS_PORT', () => {
  it('defaults to 9464, takes 0 for any free port, and refuses anything else naming the variable', () => {
    assert.equal(loadConfig({}).opsPort, 9464);
    assert.equal(loadConfig({ OPS_PORT: '0' }).opsPort, 0);
    assert.equal(loadConfig({ OPS_PORT: '9100' }).opsPort, 9100);
    for (const bad of ['http', '-1', '70000']) assert.throws(() => loadConfig({ OPS_PORT: bad }), (err: unknown) => err instanceof ConfigError && /OPS_PORT must be an integer from 0 to 65535/.test(err.message));
  });
});

describe('config: LIVE_TAIL_HOLD_AFTER_END', () => {
  it('defaults to 60 s, takes shorter durations, and refuses longer or malformed ones naming the variable', () => {
    assert.equal(loadConfig({}).liveTailHoldAfterEndMs, 60_000);
    assert.equal(loadConfig({ LIVE_TAIL_HOLD_AFTER_END: '250ms' }).liveTailHoldAfterEndMs, 250);
    assert.equal(loadConfig({ LIVE_TAIL_HOLD_AFTER_END: '1m' }).liveTailHoldAfterEndMs, 60_000);
    assert.throws(() => loadConfig({ LIVE_TAIL_HOLD_AFTER_END: '61s' }), (err: unknown) => err instanceof ConfigError && /LIVE_TAIL_HOLD_AFTER_END must be at most 1m/.test(err.message));
    for (const bad of ['0', 'soon', '-5s']) assert.throws(() => loadConfig({ LIVE_TAIL_HOLD_AFTER_END: bad }), (err: unknown) => err instanceof ConfigError && /LIVE_TAIL_HOLD_AFTER_END must be a duration/.test(err.message));
  });
});

describe('config: retention', () => {
  it('defaults to 90 days of jobs and notifications, 30 days of job logs, and the newest 20 jobs of each workflow', () => {
    const { retention } = loadConfig({});
    const days = (ms: number | undefined) => (ms === undefined ? undefined : ms / 86_400_000);
    assert.deepEqual([days(retention.jobsMs), days(retention.jobLogsMs), days(retention.notificationsMs)], [90, 30, 90]);
    assert.deepEqual([retention.keepJobs, retention.intervalMs, retention.batchSize], [20, 3_600_000, 500]);
  });

  it('keeps rows forever with off, and refuses ages under an hour, naming the variable', () => {
    const c = loadConfig({ RETENTION_JOBS: 'off', RETENTION_JOB_LOGS: 'OFF', RETENTION_NOTIFICATIONS: '365d', RETENTION_KEEP_JOBS: '0' });
    assert.equal(c.retention.jobsMs, undefined);
    assert.equal(c.retention.jobLogsMs, undefined);
    assert.equal(c.retention.notificationsMs, 365 * 86_400_000);
    assert.equal(c.retention.keepJobs, 0);
    assert.throws(() => loadConfig({ RETENTION_JOBS: '30m' }), /RETENTION_JOBS must be at least 1h, or off/);
    assert.throws(() => loadConfig({ RETENTION_JOB_LOGS: 'forever' }), /RETENTION_JOB_LOGS must be a duration/);
    assert.throws(() => loadConfig({ RETENTION_BATCH_SIZE: '0' }), /RETENTION_BATCH_SIZE/);
  });
});
