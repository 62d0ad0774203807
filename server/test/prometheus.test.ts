import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import amqp from 'amqplib';
import { AcceleratedClock } from '@orloj/common/core';
import type { JobStatus, Workflow } from '@orloj/common/domain';
import { QUEUES } from '@orloj/common/messages';
import { terminateWorkflow } from '@orloj/common/store';
import { createTestDatabase, type TestDatabase, needService, deleteBusObjects, until } from '@orloj/common/test-support';
import type { RoleProcess } from '@orloj/common/test-support';
import { replicaOfHolder } from '@orloj/scheduler';
import { insertUser, insertWorkflow } from '@orloj/notifier/test-support';
import { needPrometheus, PrometheusServer } from './support/prometheus.js';
import { probePort, roleFleet } from './support/role-fleet.js';

const ARTEFACTS = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../deploy/observability');
const SPEED = 20; // one-minute workflows run every 3 s of real time
const WORKFLOWS = 8;

/**
 * A distributed run (api, two schedulers, runners, log-ingest and notifier as
 * separate processes on PostgreSQL and RabbitMQ) scraped by a real Prometheus
 * every second: what Prometheus's query API says about jobs, lag, leadership
 * and queue depth must be what the database and the broker say. Then the
 * leader is killed and the leader metric moves to the other scheduler.
 */
describe('Prometheus scraping every role of a distributed run', function () {
  this.timeout(400_000);
  let db: TestDatabase;
  let amqpUrl: string;
  let dataDir: string;
  const prefix = `orloj-prom-${crypto.randomBytes(4).toString('hex')}.`;
  let fleet: RoleProcess[] = [];
  let prometheus: PrometheusServer | undefined;
  let target: http.Server | undefined;
  const origin = Date.now();
  const clock = new AcceleratedClock(origin, SPEED);

  before(async function () {
    this.timeout(240_000);
    const { prometheus: binary } = needPrometheus(this);
    amqpUrl = needService(this, 'amqp');
    db = await createTestDatabase('postgres', this);
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'orloj-prom-'));
    target = http.createServer((_req, res) => res.end('ok'));
    await new Promise<void>((r) => target!.listen(0, '127.0.0.1', r));
    const env = { databaseUrl: db.url, amqpUrl, busPrefix: prefix, dataDir };
    const roles = ['api', 'scheduler', 'scheduler', 'runners', 'log-ingest', 'notifier'];
    let schedulers = 0;
    fleet = roleFleet(roles, env, (role) => ({
      ORLOJ_CLOCK: `accelerated:${origin}:${SPEED}`,
      // Clock time: a tick every 1 s, a leader lease of 10 s and job leases of 30 s in real time.
      SCHEDULER_TICK: '20s',
      LEADER_LEASE_TTL: '200s',
      JOB_LEASE_TTL: '600s',
      RUNNER_ALLOW_TARGETS: '127.0.0.0/8',
      LOG_LEVEL: 'warn',
      ...(role === 'scheduler' ? { SCHEDULER_ID: `scheduler-${++schedulers}` } : {}),
    }));
    // The first process makes the signing keys in DATA_DIR; the others read them.
    await fleet[0]!.start();
    await Promise.all(fleet.slice(1).map((p) => p.start()));
    prometheus = new PrometheusServer(binary);
    await prometheus.start(fleet.map((p) => ({ role: p.role, address: `127.0.0.1:${probePort(p)}` })));
  });

  after(async function () {
    this.timeout(90_000);
    await prometheus?.stop();
    await Promise.all(fleet.map((p) => p.stop('SIGTERM')));
    target?.close();
    await db?.drop();
    if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
    if (amqpUrl) await deleteBusObjects(amqpUrl, prefix);
  });

  const count = async (statuses: JobStatus[]): Promise<number> => {
    const r = await db.store.db
      .selectFrom('jobs')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .where('status', 'in', statuses)
      .executeTakeFirstOrThrow();
    return Number(r.n);
  };

  it('reports what the database and the broker hold, and the leader moving on a kill', async () => {
    const prom = prometheus!;
    await until(() => prom.targets(), (ts) => ts.length === fleet.length && ts.every((t) => t.health === 'up'), 'every role scraped', 60_000);

    // Work: built one-minute HEARTBEAT workflows against a local target.
    const userId = await insertUser(db.store);
    const now = clock.now();
    const port = (target!.address() as { port: number }).port;
    const workflows: Workflow[] = [];
    for (let i = 0; i < WORKFLOWS; i++) {
      workflows.push(
        await insertWorkflow(db.store, userId, {
          payload: JSON.stringify({ endpoint: `http://127.0.0.1:${port}/w/${i}`, method: 'GET', expected_status_code: 200, timeout: '30s' }),
          buildCompletedAt: now,
          createdAt: now,
          updatedAt: now,
          nextDueAt: now + 60_000,
          maxConsecutiveJobFailuresAllowed: 100,
        }),
      );
    }
    await until(() => count(['COMPLETED']), (n) => n >= 3 * WORKFLOWS, 'three rounds of jobs', 120_000);

    // Quiesce: terminate the workflows, wait until no job is open and every event is applied.
    await db.store.transaction(async (tx) => {
      for (const w of workflows) await terminateWorkflow(tx, userId, w.id, clock.now());
    });
    await until(() => count(['PENDING', 'QUEUED', 'RUNNING']), (n) => n === 0, 'no open job', 60_000);
    await until(() => db.store.outbox.pending(), (n) => n === 0, 'every domain event applied', 60_000);

    // A queue with messages nobody consumes: three on builds.dead, straight to the broker
    // (not jobs.dead: the schedulers take refused jobs from there and hand them out again).
    const connection = await amqp.connect(amqpUrl);
    let brokerDepth: number;
    try {
      const ch = await connection.createChannel();
      const dead = `${prefix}${QUEUES.builds}.dead`;
      for (let i = 0; i < 3; i++) ch.sendToQueue(dead, Buffer.from('{"junk":true}'));
      await until(async () => (await ch.checkQueue(dead)).messageCount, (n) => n === 3, 'the junk on builds.dead');
      brokerDepth = (await ch.checkQueue(dead)).messageCount;
    } finally {
      await connection.close().catch(() => undefined);
    }

    const finished = await count(['COMPLETED', 'FAILED', 'CANCELED']);
    const completed = await count(['COMPLETED']);
    await until(() => prom.value('sum(orloj_jobs_finished_total)'), (n) => n === finished, `orloj_jobs_finished_total to reach ${finished}`, 30_000);
    assert.equal(await prom.value('sum(orloj_jobs_finished_total{status="COMPLETED",kind="HEARTBEAT",trigger="AUTOMATIC",reason="none"})'), completed);

    // Lag: one observation per automatic job that started, summing start − due as the rows say.
    const lagRows = await db.store.db
      .selectFrom('jobs')
      .select(['started_at', 'scheduled_at'])
      .where('trigger', '=', 'AUTOMATIC')
      .where('started_at', 'is not', null)
      .where('status', 'in', ['COMPLETED', 'FAILED', 'CANCELED'])
      .execute();
    const lagSum = lagRows.reduce((s, r) => s + Math.max(0, Number(r.started_at) - Number(r.scheduled_at)) / 1000, 0);
    assert.equal(await prom.value('sum(orloj_schedule_lag_seconds_count)'), lagRows.length);
    assert.ok(Math.abs((await prom.value('sum(orloj_schedule_lag_seconds_sum)')) - lagSum) < 1e-3 * Math.max(1, lagSum), `lag sum ${lagSum}`);

    // Open jobs and queue depth, exported by the leader alone.
    await until(() => prom.value('orloj_bus_queue_messages{queue="builds.dead"}'), (n) => n === brokerDepth, 'the leader to report the builds.dead depth', 30_000);
    assert.equal((await prom.query('orloj_bus_queue_messages{queue="builds.dead"}')).length, 1, 'one scheduler (the leader) reports it');
    // The leader refreshes these gauges on its own period: on a busy machine a scrape may still hold the last jobs open.
    await until(() => prom.value('sum(orloj_jobs{status="QUEUED"})'), (n) => n === 0, 'no QUEUED job reported', 30_000);
    await until(() => prom.value('sum(orloj_jobs{status="RUNNING"})'), (n) => n === 0, 'no RUNNING job reported', 30_000);
    assert.equal((await prom.query('orloj_jobs{status="RUNNING"}')).length, 1);

    // Everything ready and connected; the api counted HTTP requests (the scrapes themselves).
    assert.equal(await prom.value('count(orloj_ready == 1)'), fleet.length);
    assert.equal(await prom.value('count(orloj_bus_connected == 1)'), fleet.length);
    assert.ok((await prom.value('sum(orloj_http_request_duration_seconds_count{route="/metrics"})')) > 0);
    assert.ok((await prom.value('sum(orloj_bus_messages_published_total{queue="jobs"})')) >= finished);
    assert.ok((await prom.value('sum(orloj_bus_messages_consumed_total{queue="job-events"})')) > 0);

    // Every expression of the dashboard and the alerts is valid PromQL, and every orloj metric they name exists.
    const dashboard = JSON.parse(fs.readFileSync(path.join(ARTEFACTS, 'grafana-dashboard.json'), 'utf8')) as { panels: { targets: { expr: string }[] }[] };
    const exprs = [...dashboard.panels.flatMap((p) => p.targets.map((t) => t.expr)), ...[...fs.readFileSync(path.join(ARTEFACTS, 'alerts.yml'), 'utf8').matchAll(/expr: (.+)/g)].map((m) => m[1]!)];
    // Known to orloj: described (# HELP) by some process; a labelled counter appears as a series only once it counted something.
    const exported = new Set<string>();
    for (const p of fleet) {
      const text = await (await fetch(`http://127.0.0.1:${probePort(p)}/metrics`)).text();
      for (const m of text.matchAll(/^# HELP (orloj_\w+)/gm)) exported.add(m[1]!);
    }
    for (const expr of exprs) {
      await prom.query(expr);
      for (const [name] of expr.matchAll(/orloj_[a-z_]+/g)) {
        const base = name.replace(/_(bucket|sum|count)$/, '');
        assert.ok(exported.has(name) || exported.has(base), `${name} (in ${expr}) is not exported`);
      }
    }

    // The leader per the lease row, per Prometheus; then killed.
    const lease = await db.store.db.selectFrom('leases').select('holder').executeTakeFirstOrThrow();
    const schedulers = fleet.filter((p) => p.role === 'scheduler');
    // the holder is `<SCHEDULER_ID>/<per-process suffix>` (leaseHolder)
    const leaderIndex = Number(replicaOfHolder(lease.holder).replace('scheduler-', '')) - 1;
    const leader = schedulers[leaderIndex]!;
    const instanceOf = (p: RoleProcess) => `127.0.0.1:${probePort(p)}`;
    const leading = async () => (await prom.query('orloj_scheduler_leader == 1')).map((r) => r.metric.instance);
    assert.deepEqual(await leading(), [instanceOf(leader)]);
    const standby = schedulers[1 - leaderIndex]!;
    await leader.stop('SIGKILL');
    await until(leading, (l) => l.length === 1 && l[0] === instanceOf(standby), 'the leader metric to move to the other scheduler', 90_000);
    assert.equal(await prom.value(`up{instance="${instanceOf(leader)}"}`), 0);
  });
});
