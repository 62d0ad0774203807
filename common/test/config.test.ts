import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ConfigError, loadConfig, resolveSecrets } from '@orloj/common';

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
