import assert from 'node:assert/strict';
import { systemClock } from '@orloj/common/core';
import { silentLogger } from '@orloj/common/logging';
import { roleBus } from '@orloj/common/envelope';
import { MemoryBus } from '@orloj/common/bus';
import { Health, InstrumentedBus, OrlojMetrics } from '@orloj/common/observability';
import { generateKeys } from './support/keys.js';
import { until, waitFor } from './support/async.js';

/** The value of one series in a registry's exposition (undefined when absent). */
async function sample(metrics: OrlojMetrics, series: string): Promise<number | undefined> {
  const { body } = await metrics.render();
  const line = body.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

describe('observability: metrics registry, bus counting and readiness', () => {
  it('keeps one registry per instance, with the default process metrics', async () => {
    const a = new OrlojMetrics();
    const b = new OrlojMetrics({ defaultMetrics: false });
    a.jobsFinished.inc({ kind: 'HEARTBEAT', trigger: 'AUTOMATIC', status: 'COMPLETED', reason: 'none' });
    assert.equal(await sample(a, 'orloj_jobs_finished_total{kind="HEARTBEAT",trigger="AUTOMATIC",status="COMPLETED",reason="none"}'), 1);
    assert.equal(await sample(b, 'orloj_jobs_finished_total{kind="HEARTBEAT",trigger="AUTOMATIC",status="COMPLETED",reason="none"}'), undefined);
    const { body, contentType } = await a.render();
    assert.match(contentType, /^text\/plain; version=0\.0\.4/);
    assert.match(body, /^process_cpu_user_seconds_total /m);
    assert.match(body, /^# TYPE nodejs_eventloop_lag_p99_seconds gauge/m);
    assert.doesNotMatch((await b.render()).body, /process_cpu/);
  });

  it('reads gauges and copied counters at scrape time, and exports nothing for an undefined reading', async () => {
    const metrics = new OrlojMetrics({ defaultMetrics: false });
    let leader = true;
    let tally = 3;
    metrics.gauge('orloj_test_leader', 'test', () => (leader ? 1 : 0));
    metrics.counterFrom('orloj_test_things_total', 'test', () => tally);
    metrics.labelledGauge('orloj_test_depth', 'test', 'queue', async () => (leader ? { jobs: 4, 'jobs.dead': 0 } : undefined));
    assert.equal(await sample(metrics, 'orloj_test_leader'), 1);
    assert.equal(await sample(metrics, 'orloj_test_things_total'), 3);
    assert.equal(await sample(metrics, 'orloj_test_depth{queue="jobs"}'), 4);
    leader = false;
    tally = 5;
    assert.equal(await sample(metrics, 'orloj_test_leader'), 0);
    assert.equal(await sample(metrics, 'orloj_test_things_total'), 5);
    assert.equal(await sample(metrics, 'orloj_test_depth{queue="jobs"}'), undefined);
  });

  it('counts published, consumed, redelivered and dead-lettered messages by queue, and reports queue depth', async () => {
    const metrics = new OrlojMetrics({ defaultMetrics: false });
    const raw = new MemoryBus({ logger: silentLogger, maxDeliveries: 3 });
    const bus = new InstrumentedBus(raw, metrics, 3);
    try {
      await bus.publish('jobs', { n: 1 });
      await bus.publish('jobs', { n: 2 });
      assert.equal(await bus.queueDepth('jobs'), 2);
      assert.equal(await bus.queueDepth('never-declared'), undefined);
      const seen: number[] = [];
      await bus.consume('jobs', (m) => {
        const n = (m as { n: number }).n;
        seen.push(n);
        if (n === 2) throw new Error('poison');
      });
      await waitFor(() => seen.filter((n) => n === 2).length === 3, 'three deliveries of the poison message');
      await until(() => bus.queueDepth('jobs.dead'), (n) => n === 1, 'the poison message dead-lettered');
      assert.equal(await sample(metrics, 'orloj_bus_messages_published_total{queue="jobs"}'), 2);
      assert.equal(await sample(metrics, 'orloj_bus_messages_consumed_total{queue="jobs"}'), 1);
      assert.equal(await sample(metrics, 'orloj_bus_messages_redelivered_total{queue="jobs"}'), 2);
      assert.equal(await sample(metrics, 'orloj_bus_messages_dead_lettered_total{queue="jobs"}'), 1);
      assert.equal(await bus.queueDepth('jobs.dead'), 1);
      assert.equal(bus.connected, true);
    } finally {
      await bus.close();
    }
  });

  it('counts messages a role refuses, by queue and reason', async () => {
    const metrics = new OrlojMetrics({ defaultMetrics: false });
    const bus = new MemoryBus({ logger: silentLogger });
    const keys = generateKeys();
    const scheduler = roleBus({ bus, role: 'scheduler', keys, clock: systemClock, logger: silentLogger, signatures: 'required', metrics });
    let handled = 0;
    await scheduler.consume('job-events', () => {
      handled += 1;
    });
    await bus.publish('job-events', { not: 'an envelope' });
    await until(() => sample(metrics, 'orloj_bus_messages_refused_total{queue="job-events",reason="unsigned"}'), (n) => n === 1, 'the refusal counted');
    assert.equal(handled, 0);
    await bus.close();
  });

  it('is ready only when every check passes, names the failing ones, and bounds a hanging check', async () => {
    let storeUp = true;
    const health = new Health(100)
      .add({ name: 'store', check: () => (storeUp ? undefined : Promise.reject(new Error('connection refused'))) })
      .add({ name: 'bus', check: () => true });
    assert.deepEqual(await health.readiness(), { ready: true, checks: { store: { ok: true }, bus: { ok: true } } });
    storeUp = false;
    assert.deepEqual(await health.readiness(), { ready: false, checks: { store: { ok: false, detail: 'connection refused' }, bus: { ok: true } } });
    health.add({ name: 'slow', check: () => new Promise<void>(() => undefined) });
    const report = await health.readiness();
    assert.deepEqual(report.checks.slow, { ok: false, detail: 'no answer within 100 ms' });
    health.add({ name: 'reason', check: () => 'starting or stopping' });
    assert.deepEqual((await health.readiness()).checks.reason, { ok: false, detail: 'starting or stopping' });
  });
});
