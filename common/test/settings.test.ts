import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadConfig, SETTINGS, settingsTable, type Setting } from '@orloj/common/config';
import { DEFAULT_BUS_PREFIX } from '@orloj/common/bus';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const OPERATIONS = path.join(root, 'docs/operations.md');
const BEGIN = '<!-- settings:begin (generated from common/src/config/settings.ts by scripts/settings-table.ts) -->';
const END = '<!-- settings:end -->';

/** The settings table of docs/operations.md: variable → default as shown. */
function documented(): { table: string; defaults: Map<string, string> } {
  const text = fs.readFileSync(OPERATIONS, 'utf8');
  const from = text.indexOf(BEGIN);
  const to = text.indexOf(END);
  assert.ok(from >= 0 && to > from, `docs/operations.md holds the settings table between ${BEGIN} and ${END}`);
  const table = text.slice(from + BEGIN.length, to).trim();
  const defaults = new Map<string, string>();
  for (const line of table.split('\n').slice(2)) {
    const m = /^\| `([A-Z0-9_]+)` \| (.*?) \| /.exec(line);
    assert.ok(m, `a settings row names one variable: ${line}`);
    assert.ok(!defaults.has(m[1]!), `${m[1]} is documented once`);
    defaults.set(m[1]!, m[2]!);
  }
  return { table, defaults };
}

describe('settings (each declared once)', () => {
  it('documents every declared variable in docs/operations.md, with its default', () => {
    const { defaults } = documented();
    for (const [name, setting] of Object.entries(SETTINGS) as [string, Setting<unknown>][]) {
      assert.ok(defaults.has(name), `${name} is declared but not in docs/operations.md's settings table (run: node --import tsx --conditions=orloj-src scripts/settings-table.ts)`);
      assert.equal(defaults.get(name), setting.shown, `${name}'s documented default`);
    }
  });

  it('declares every variable docs/operations.md documents', () => {
    for (const name of documented().defaults.keys()) assert.ok(name in SETTINGS, `${name} is documented but not declared in common/src/config/settings.ts`);
  });

  it('is the table the declarations render (accepts and meaning included)', () => {
    assert.equal(documented().table, settingsTable(), 'docs/operations.md is stale: run node --import tsx --conditions=orloj-src scripts/settings-table.ts');
  });

  it('reads exactly the declared variables, and nothing else from the environment', () => {
    const read = new Set<string>();
    const env = new Proxy({} as Record<string, string | undefined>, {
      get: (_target, name) => {
        if (typeof name === 'string') read.add(name);
        return undefined;
      },
    });
    loadConfig(env);
    assert.deepEqual([...read].sort(), Object.keys(SETTINGS).sort());
  });

  it('keeps every default and bound it had (README and docs/operations.md before the rows)', () => {
    const c = loadConfig({});
    assert.deepEqual(
      [c.port, c.host, c.dbPoolSize, c.listCacheBytes, c.sessionTtlMs, c.csrfTtlMs, c.logLevel, c.registration, c.busUrl, c.busPrefix, c.opsPort, c.liveTailHoldAfterEndMs],
      [8080, '127.0.0.1', 10, 32 * 1024 * 1024, 7 * 86_400_000, 7 * 86_400_000, 'info', 'open', 'memory:', 'orloj.', 9464, 60_000],
    );
    assert.deepEqual(c.rateLimit, { enabled: true, authPerMinute: 10, authBurst: 5, apiPerSecond: 20, apiBurst: 40 });
    assert.deepEqual(c.http, { maxConnections: 4096, maxConnectionsPerClient: 256, headersTimeoutMs: 10_000, maxHeavyRequests: 8, maxHeavyRequestsPerUser: 2, maxStreamsPerUser: 10 });
    const { id: _s, ...scheduler } = c.scheduler;
    assert.deepEqual(scheduler, { tickMs: 1_000, leaderLeaseTtlMs: 15_000, jobLeaseTtlMs: 30_000, queueTimeoutMs: 600_000, buildTimeoutMs: 300_000, maxQueued: 2_000 });
    assert.deepEqual([c.runner.concurrency, c.runner.shutdownGraceMs, c.runner.containerScratchMb, c.runner.containerUserns], [4, 30_000, 256, 'auto']);
    assert.equal(c.notifier.pollMs, 500);
    assert.deepEqual(c.containers, { registries: ['docker.io'], networkEnabled: false, maxMemoryMb: 1024, maxCpus: 1, maxTimeoutMs: 30 * 60_000, maxLogLines: 100_000, maxLogBytes: 32 * 1024 * 1024 });
    assert.deepEqual(c.tenants, { maxWorkflowsPerUser: 500, maxActiveJobsPerUser: 0 });
    assert.deepEqual(c.retention, { jobsMs: 90 * 86_400_000, jobLogsMs: 30 * 86_400_000, notificationsMs: 90 * 86_400_000, keepJobs: 20, intervalMs: 3_600_000, batchSize: 500 });
    for (const [name, bad] of Object.entries({ HTTP_HEADERS_TIMEOUT: '61s', CONTAINER_MAX_TIMEOUT: '2h', DB_POOL_SIZE: '1001', CONTAINER_MAX_CPUS: '65', RETENTION_KEEP_JOBS: '10001' })) {
      assert.throws(() => loadConfig({ [name]: bad }), new RegExp(`${name} must`), name);
    }
  });

  it('gives the roles built without a Config the declared defaults', () => {
    assert.equal(DEFAULT_BUS_PREFIX, SETTINGS.BUS_PREFIX.default);
  });

  it('cannot be changed at run time', () => {
    assert.ok(Object.isFrozen(SETTINGS));
    for (const row of Object.values(SETTINGS)) assert.ok(Object.isFrozen(row));
  });
});
