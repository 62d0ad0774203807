import assert from 'node:assert/strict';
import { CONFIG_DEFAULTS, loadConfig } from '@orloj/common/config';
import { DEFAULT_BUS_PREFIX, DEFAULT_MAX_DELIVERIES, DEFAULT_PREFETCH } from '@orloj/common/bus';

describe('CONFIG_DEFAULTS', () => {
  it('is what loadConfig falls back to when nothing is set', () => {
    const c = loadConfig({});
    const d = CONFIG_DEFAULTS;
    assert.deepEqual(
      {
        tickMs: c.scheduler.tickMs,
        leaderLeaseTtlMs: c.scheduler.leaderLeaseTtlMs,
        jobLeaseTtlMs: c.scheduler.jobLeaseTtlMs,
        queueTimeoutMs: c.scheduler.queueTimeoutMs,
        buildTimeoutMs: c.scheduler.buildTimeoutMs,
        maxQueued: c.scheduler.maxQueued,
      },
      {
        tickMs: d.scheduler.tickMs,
        leaderLeaseTtlMs: d.scheduler.leaderLeaseTtlMs,
        jobLeaseTtlMs: d.scheduler.jobLeaseTtlMs,
        queueTimeoutMs: d.scheduler.queueTimeoutMs,
        buildTimeoutMs: d.scheduler.buildTimeoutMs,
        maxQueued: d.scheduler.maxQueued,
      },
    );
    assert.equal(c.runner.concurrency, d.runner.concurrency);
    assert.equal(c.runner.shutdownGraceMs, d.runner.shutdownGraceMs);
    assert.equal(c.notifier.pollMs, d.notifier.pollMs);
    assert.deepEqual(c.tenants, d.tenants);
    assert.equal(c.dbPoolSize, d.database.poolSize);
    assert.equal(c.busPrefix, d.bus.prefix);
    assert.equal(c.containers.maxTimeoutMs, d.jobs.containerInstallationMaxTimeoutMs);
    const { pauseMs: _pause, checkEveryMs: _check, ...retention } = d.retention;
    assert.deepEqual(c.retention, retention);
  });

  it('keeps the documented values (README, docs/operations.md)', () => {
    assert.equal(CONFIG_DEFAULTS.scheduler.jobLeaseTtlMs, 30_000);
    assert.equal(CONFIG_DEFAULTS.scheduler.queueTimeoutMs, 10 * 60_000);
    assert.equal(CONFIG_DEFAULTS.tenants.maxActiveJobsPerUser, 0);
    assert.equal(CONFIG_DEFAULTS.scheduler.maxAttempts, 3);
    const { http } = CONFIG_DEFAULTS;
    assert.deepEqual(
      [http.maxConnections, http.maxConnectionsPerClient, http.headersTimeoutMs, http.maxHeavyRequests, http.maxHeavyRequestsPerUser, http.heavyWaitMs, http.maxStreamsPerUser],
      [4096, 256, 10_000, 8, 2, 30_000, 10],
    );
  });

  it('keeps the values the roles wrote inline before (docs/logs.md, docs/runners.md, docs/container-runtime.md, docs/bus.md)', () => {
    const { logs, runner, containers, bus } = CONFIG_DEFAULTS;
    assert.deepEqual(
      [logs.sinkBatchLines, logs.sinkBatchBytes, logs.sinkBufferLines, logs.sinkBufferBytes, logs.ingestPrefetch, logs.ingestMaxMergeLines, logs.ingestQuietMs],
      [5_000, 1024 * 1024, 10_000, 16 * 1024 * 1024, 16, 50_000, 250],
    );
    assert.deepEqual([runner.stoppedJobsTtlMs, runner.stoppedJobsTracked], [60 * 60_000, 10_000]);
    assert.deepEqual([containers.memoryMb, containers.pidsLimit, containers.pullTimeoutMs], [512, 256, 5 * 60_000]);
    assert.deepEqual([bus.envelopeTtlMs, bus.envelopeSeenIds], [5 * 60_000, 100_000]);
    assert.equal(CONFIG_DEFAULTS.notifier.prefetch, 16);
  });

  it('is the source of the bus defaults exported under their own names', () => {
    assert.equal(DEFAULT_BUS_PREFIX, CONFIG_DEFAULTS.bus.prefix);
    assert.equal(DEFAULT_MAX_DELIVERIES, CONFIG_DEFAULTS.bus.maxDeliveries);
    assert.equal(DEFAULT_PREFETCH, CONFIG_DEFAULTS.bus.prefetch);
  });

  it('cannot be changed at run time', () => {
    assert.ok(Object.isFrozen(CONFIG_DEFAULTS));
    for (const section of Object.values(CONFIG_DEFAULTS)) assert.ok(Object.isFrozen(section));
  });
});
