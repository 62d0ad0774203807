import assert from 'node:assert/strict';
import crypto, { type KeyObject } from 'node:crypto';
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import Docker from 'dockerode';
import { pino } from 'pino';
import { ManualClock, newId } from '@orloj/common/core';
import { reasons } from '@orloj/common/domain';
import { loadConfig } from '@orloj/common/config';
import {
  MESSAGE_TYPES,
  MESSAGES,
  PRODUCER_POLICY,
  QUEUES,
  TOPICS,
  type BuildFinishedMessage,
  type BuildRunMessage,
  type JobFinishedMessage,
  type JobHeartbeatMessage,
  type JobRunMessage,
  type JobStartedMessage,
  type JobStopMessage,
} from '@orloj/common/messages';
import { EnvelopeSigner, EnvelopeVerifier, SignedBus, type Envelope, type ProducerRole } from '@orloj/common/envelope';
import { MemoryBus, type Bus, type PublishOptions } from '@orloj/common/bus';
import { deferred, ForwardingBus, Inbox, until, waitFor, within, type Deferred, needService } from '@orloj/common/test-support';
import { ContainerExecutor, dockerOptionsFromHost, MANAGED_LABEL } from '../src/executors/container.executor.js';
import { HttpCheckExecutor } from '../src/executors/http-check.executor.js';
import { ImagePolicy } from '../src/executors/image-policy.js';
import type { CapturedLine, LogSink } from '../src/log-sink.js';
import { Runner, RUNNER_ID_LABEL, SIGNATURE_FAILURES_BEFORE_WITHDRAWAL, type RunnerOptions } from '../src/runner.js';

const logger = pino({ level: 'silent' });
const LEASE_TTL_MS = 300;
const HEARTBEAT_MS = LEASE_TTL_MS / 3;
const GRACE_MS = 60_000;
const ABORT_GRACE_MS = 20_000;
/** Built by scripts/container-runtime.sh: static busybox, no CMD. */
const IMAGE = 'localhost/orloj-test/busybox:1';

const keyPairs = {
  scheduler: crypto.generateKeyPairSync('ed25519'),
  runners: crypto.generateKeyPairSync('ed25519'),
};
const publicKeys: Partial<Record<ProducerRole, KeyObject>> = {
  scheduler: keyPairs.scheduler.publicKey,
  runners: keyPairs.runners.publicKey,
};

/** A ManualClock that announces sleeps, so a test can wait until the runner waits. */
class TestClock extends ManualClock {
  private watchers: { match: (ms: number) => boolean; seen: Deferred<number> }[] = [];

  override sleep(ms: number, signal?: AbortSignal): Promise<void> {
    const hit = this.watchers.filter((w) => w.match(ms));
    this.watchers = this.watchers.filter((w) => !w.match(ms));
    const slept = super.sleep(ms, signal);
    for (const w of hit) w.seen.resolve(ms);
    return slept;
  }

  /** Resolves when a sleep matching ms (a length or a test) starts after this call. */
  nextSleep(ms: number | ((ms: number) => boolean), what = `a sleep of ${String(ms)} ms`): Promise<number> {
    const seen = deferred<number>();
    this.watchers.push({ match: typeof ms === 'number' ? (v) => v === ms : ms, seen });
    return within(seen.promise, what);
  }
}

/** A real HTTP target on 127.0.0.1: /ok, /status/<code>, and /hold/<name> answering 200 once released. */
class Target {
  hits: string[] = [];
  /** Names of /hold requests as they arrive. */
  arrivals = new Inbox<string>();
  /** Names of /hold requests whose client went away before the answer. */
  aborted = new Inbox<string>();
  private held = new Map<string, http.ServerResponse>();
  maxHeld = 0;
  private readonly server = http.createServer((req, res) => {
    const url = req.url ?? '';
    this.hits.push(url);
    const hold = /^\/hold\/([\w-]+)/.exec(url);
    const status = /^\/status\/(\d{3})/.exec(url);
    if (hold?.[1]) {
      const name = hold[1];
      this.held.set(name, res);
      this.maxHeld = Math.max(this.maxHeld, this.held.size);
      res.on('close', () => {
        if (!res.writableFinished) this.aborted.push(name);
        this.held.delete(name);
      });
      this.arrivals.push(name);
    } else if (status?.[1]) {
      res.writeHead(Number(status[1])).end();
    } else {
      res.writeHead(url.startsWith('/ok') ? 200 : 404).end();
    }
  });
  port = 0;

  async start(): Promise<void> {
    this.server.listen(0, '127.0.0.1');
    await once(this.server, 'listening');
    this.port = (this.server.address() as AddressInfo).port;
  }

  url(path: string): string {
    return `http://127.0.0.1:${this.port}${path}`;
  }

  release(name: string): void {
    const res = this.held.get(name);
    assert.ok(res, `no request to /hold/${name} is waiting`);
    this.held.delete(name);
    res.writeHead(200).end();
  }

  /** Answers whatever is held and forgets what this test saw, so a failed test cannot confuse the next. */
  reset(): void {
    for (const name of [...this.held.keys()]) this.release(name);
    this.hits = [];
    this.arrivals = new Inbox<string>();
    this.aborted = new Inbox<string>();
    this.maxHeld = 0;
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    this.server.close();
    await once(this.server, 'close');
  }
}

/** Every envelope on job-events, in order; until() waits for one that matches. */
class EventLog {
  readonly all: Envelope[] = [];
  private waiters: { match: (e: Envelope) => boolean; found: Deferred<Envelope> }[] = [];

  push = (envelope: Envelope): void => {
    this.all.push(envelope);
    for (const w of this.waiters.filter((w) => w.match(envelope))) w.found.resolve(envelope);
    this.waiters = this.waiters.filter((w) => !w.found.settled);
  };

  until(match: (e: Envelope) => boolean, what: string, ms?: number): Promise<Envelope> {
    const seen = this.all.find(match);
    if (seen) return Promise.resolve(seen);
    const found = deferred<Envelope>();
    this.waiters.push({ match, found });
    return within(found.promise, what, ms);
  }

  forJob(jobId: string): Envelope[] {
    return this.all.filter((e) => (e.body as { job_id?: string }).job_id === jobId);
  }

  started(jobId: string): Promise<Envelope<JobStartedMessage>> {
    return this.until(is(MESSAGE_TYPES.jobStarted, jobId), `job.started of ${jobId}`) as Promise<Envelope<JobStartedMessage>>;
  }

  finished(jobId: string, ms?: number): Promise<Envelope<JobFinishedMessage>> {
    return this.until(is(MESSAGE_TYPES.jobFinished, jobId), `job.finished of ${jobId}`, ms) as Promise<Envelope<JobFinishedMessage>>;
  }

  /** The n-th heartbeat (from 1) of the job. */
  async heartbeat(jobId: string, n: number): Promise<Envelope<JobHeartbeatMessage>> {
    const beats = (): Envelope[] => this.all.filter(is(MESSAGE_TYPES.jobHeartbeat, jobId));
    await this.until(() => beats().length >= n, `heartbeat ${n} of ${jobId}`);
    return beats()[n - 1] as Envelope<JobHeartbeatMessage>;
  }
}

function is(type: string, jobId: string): (e: Envelope) => boolean {
  return (e) => e.type === type && (e.body as { job_id?: string }).job_id === jobId;
}

/** A Bus that refuses to publish the first `failures` job.finished envelopes (a broker outage, as far as the runner can tell). */
class FlakyBus extends ForwardingBus {
  refused = 0;
  constructor(
    inner: Bus,
    private failures: number,
  ) {
    super(inner);
  }
  override async publish(queue: string, message: unknown, options?: PublishOptions): Promise<void> {
    if ((message as { type?: string }).type === MESSAGE_TYPES.jobFinished && this.failures > 0) {
      this.failures -= 1;
      this.refused += 1;
      throw new Error('broker unavailable');
    }
    return super.publish(queue, message, options);
  }
}

interface Harness {
  clock: TestClock;
  bus: MemoryBus;
  runner: Runner;
  runnerVerifier: EnvelopeVerifier;
  /** The runner's own bus: signs as 'runners'. */
  runnerBus: SignedBus;
  /** The test plays the scheduler: signs as 'scheduler', consumes job-events. */
  scheduler: SignedBus;
  events: EventLog;
  runJob(job: Partial<JobRunMessage> & { payload: string }): Promise<JobRunMessage>;
  stopJob(jobId: string, reason?: JobStopMessage['reason']): Promise<void>;
  close(): Promise<void>;
}

async function harness(
  options: Partial<RunnerOptions> & { wrapBus?: (bus: Bus) => Bus; start?: boolean } = {},
): Promise<Harness> {
  const { wrapBus, start = true, ...runnerOptions } = options;
  const clock = new TestClock();
  const bus = new MemoryBus({ logger });
  const verifier = (): EnvelopeVerifier => new EnvelopeVerifier({ publicKeys, policy: PRODUCER_POLICY, clock });
  const runnerVerifier = verifier();
  const runnerBus = new SignedBus({
    bus: wrapBus ? wrapBus(bus) : bus,
    messages: MESSAGES,
    logger,
    verifier: runnerVerifier,
    signer: new EnvelopeSigner({ role: 'runners', privateKey: keyPairs.runners.privateKey, clock }),
  });
  // Undecoded: the test checks the events as runners put them on the wire.
  const scheduler = new SignedBus({
    bus,
    logger,
    verifier: verifier(),
    signer: new EnvelopeSigner({ role: 'scheduler', privateKey: keyPairs.scheduler.privateKey, clock }),
  });
  const events = new EventLog();
  const eventsSub = await scheduler.consume(QUEUES.jobEvents, events.push, { prefetch: 100 });
  const runner = new Runner({
    bus: runnerBus,
    logger,
    clock,
    runnerId: `runner-${newId()}`,
    http: httpExecutor,
    leaseTtlMs: LEASE_TTL_MS,
    shutdownGraceMs: GRACE_MS,
    abortGraceMs: ABORT_GRACE_MS,
    ...runnerOptions,
  });
  if (start) await runner.start();
  return {
    clock,
    bus,
    runner,
    runnerVerifier,
    runnerBus,
    scheduler,
    events,
    async runJob(partial) {
      const job: JobRunMessage = { job_id: newId(), workflow_id: newId(), attempt: 1, kind: 'HEARTBEAT', log_retention: false, ...partial };
      await scheduler.publish(QUEUES.jobs, MESSAGE_TYPES.jobRun, job);
      return job;
    },
    async stopJob(jobId, reason = reasons.workflowTerminated()) {
      await scheduler.broadcast(TOPICS.jobControl, MESSAGE_TYPES.jobStop, { job_id: jobId, reason });
    },
    async close() {
      await within(runner.stop(), 'runner.stop() in cleanup');
      await eventsSub.cancel();
      await bus.close();
    },
  };
}

let httpExecutor: HttpCheckExecutor;
let target: Target;

function heartbeat(endpoint: string, extra: Record<string, unknown> = {}): string {
  return JSON.stringify({ endpoint, ...extra });
}

/** The default settings, as `orloj start` would read them from an empty environment. */
const testConfig = loadConfig({});

describe('runner role', () => {
  before(async () => {
    httpExecutor = new HttpCheckExecutor({ logger, allowTargets: ['127.0.0.0/8'] });
    target = new Target();
    await target.start();
  });

  after(async () => {
    await target.stop();
    await httpExecutor.close();
  });

  describe('Runner', () => {
    let h: Harness | undefined;

    afterEach(async () => {
      target.reset();
      await h?.close();
      h = undefined;
    });

    it('runs a HEARTBEAT job: job.started, then job.finished COMPLETED for the same attempt', async () => {
      h = await harness();
      const job = await h.runJob({ attempt: 2, payload: heartbeat(target.url('/ok')) });
      const finished = await h.events.finished(job.job_id);
      const started = await h.events.started(job.job_id);

      assert.equal(started.producer, 'runners');
      assert.deepEqual(started.body, { job_id: job.job_id, attempt: 2, runner_id: h.runner.runnerId, started_at: h.clock.now() });
      assert.deepEqual(finished.body, {
        job_id: job.job_id,
        attempt: 2,
        runner_id: h.runner.runnerId,
        status: 'COMPLETED',
        started_at: started.body.started_at,
        finished_at: h.clock.now(),
        check: { status_code: 200, response_time_ms: finished.body.check?.response_time_ms },
      });
      assert.ok(Number.isInteger(finished.body.check?.response_time_ms) && finished.body.check!.response_time_ms >= 0);
      assert.deepEqual(
        h.events.forJob(job.job_id).map((e) => e.type),
        [MESSAGE_TYPES.jobStarted, MESSAGE_TYPES.jobFinished],
      );
      assert.deepEqual(h.runner.metrics(), { ...h.runner.metrics(), running: 0, completed: 1, failed: 0, canceled: 0 });
    });

    it('fails a HEARTBEAT job whose endpoint answers another status with UNEXPECTED_STATUS_CODE', async () => {
      h = await harness();
      const job = await h.runJob({ payload: heartbeat(target.url('/status/503'), { expected_status_code: 204 }) });
      const finished = await h.events.finished(job.job_id);
      assert.equal(finished.body.status, 'FAILED');
      assert.deepEqual(finished.body.reason, reasons.unexpectedStatusCode(204, 503));
      assert.equal(finished.body.system_failure, undefined);
      assert.equal(finished.body.check?.status_code, 503);
      assert.equal(finished.body.check?.failure, 'status');
      assert.equal(h.runner.metrics().failed, 1);
    });

    it('fails a job whose payload is invalid, without a system failure', async () => {
      h = await harness();
      const job = await h.runJob({ payload: JSON.stringify({ endpoint: 'ftp://example.com/' }) });
      const finished = await h.events.finished(job.job_id);
      assert.equal(finished.body.status, 'FAILED');
      assert.deepEqual(finished.body.reason, reasons.failureUnavailable());
      assert.equal(finished.body.system_failure, undefined);
      assert.equal(finished.body.check, undefined, 'no request was sent');
    });

    it('sends heartbeats every leaseTtlMs/3 while a job runs, and none after it finished', async () => {
      h = await harness();
      const job = await h.runJob({ payload: heartbeat(target.url('/hold/slow')) });
      assert.equal(await target.arrivals.next('the slow request'), 'slow');

      for (let n = 1; n <= 3; n++) {
        const nextLoop = h.clock.nextSleep(HEARTBEAT_MS);
        h.clock.advance(HEARTBEAT_MS);
        const beat = await h.events.heartbeat(job.job_id, n);
        assert.equal(beat.producer, 'runners');
        assert.deepEqual(beat.body, { job_id: job.job_id, attempt: 1, runner_id: h.runner.runnerId });
        await nextLoop;
      }
      target.release('slow');
      const finished = await h.events.finished(job.job_id);
      assert.equal(finished.body.status, 'COMPLETED');
      h.clock.advance(HEARTBEAT_MS * 3);
      // A later job's events arrive after anything still pending for this one.
      const later = await h.runJob({ payload: heartbeat(target.url('/ok')) });
      await h.events.finished(later.job_id);
      assert.deepEqual(
        h.events.forJob(job.job_id).map((e) => e.type),
        [MESSAGE_TYPES.jobStarted, ...Array<string>(3).fill(MESSAGE_TYPES.jobHeartbeat), MESSAGE_TYPES.jobFinished],
      );
    });

    it('holds job.started back by startReportDelayMs: right before the result of a quick job, after the delay while a slow one runs', async () => {
      const delayMs = HEARTBEAT_MS / 4;
      h = await harness({ startReportDelayMs: delayMs });
      const quick = await h.runJob({ payload: heartbeat(target.url('/ok')) });
      const done = await h.events.finished(quick.job_id);
      const started = await h.events.started(quick.job_id);
      assert.deepEqual(started.body, { job_id: quick.job_id, attempt: 1, runner_id: h.runner.runnerId, started_at: done.body.started_at });
      assert.deepEqual(
        h.events.forJob(quick.job_id).map((e) => e.type),
        [MESSAGE_TYPES.jobStarted, MESSAGE_TYPES.jobFinished],
      );

      const slow = await h.runJob({ payload: heartbeat(target.url('/hold/slow')) });
      assert.equal(await target.arrivals.next('the slow request'), 'slow');
      h.clock.advance(delayMs);
      await h.events.started(slow.job_id);
      assert.deepEqual(h.events.forJob(slow.job_id).map((e) => e.type), [MESSAGE_TYPES.jobStarted]);
      target.release('slow');
      assert.equal((await h.events.finished(slow.job_id)).body.status, 'COMPLETED');
    });

    it('aborts a running job on job.stop and reports it CANCELED with the stop reason', async () => {
      h = await harness();
      const job = await h.runJob({ payload: heartbeat(target.url('/hold/stopme')) });
      await target.arrivals.next('the request to stop');
      await h.stopJob(job.job_id, reasons.workflowUpdated());
      const finished = await h.events.finished(job.job_id);
      assert.equal(finished.body.status, 'CANCELED');
      assert.deepEqual(finished.body.reason, reasons.workflowUpdated());
      assert.equal(finished.body.system_failure, undefined);
      assert.equal(await target.aborted.next('the aborted request'), 'stopme');
      assert.equal(h.runner.metrics().canceled, 1);
    });

    it('drops a job.run for a job that was stopped before it arrived', async () => {
      h = await harness();
      const stoppedId = newId();
      await h.stopJob(stoppedId);
      await waitFor(() => h?.runner.metrics().stoppedRemembered === 1, 'the runner to remember the stop');
      await h.runJob({ job_id: stoppedId, payload: heartbeat(target.url('/ok?stopped')) });
      const other = await h.runJob({ payload: heartbeat(target.url('/ok?other')) });
      await h.events.finished(other.job_id);
      await waitFor(() => h?.runner.metrics().dropped === 1, 'the stopped job to be dropped');
      assert.deepEqual(h.events.forJob(stoppedId), []);
      assert.ok(!target.hits.includes('/ok?stopped'), 'the stopped job was executed');
    });

    it('never has more than `concurrency` jobs started and not finished', async () => {
      h = await harness({ concurrency: 2 });
      const jobs = await Promise.all([1, 2, 3, 4, 5].map((i) => h!.runJob({ payload: heartbeat(target.url(`/hold/c${i}`)) })));
      const waiting = await target.arrivals.take(2, 'the first two requests');
      for (let released = 0; released < 5; released++) {
        target.release(waiting.shift()!);
        if (released < 3) waiting.push(await target.arrivals.next('the next request'));
      }
      for (const job of jobs) assert.equal((await h.events.finished(job.job_id)).body.status, 'COMPLETED');
      // job-events is one FIFO queue fed by the runner alone: its order is the runner's publish order.
      let outstanding = 0;
      let maxOutstanding = 0;
      for (const e of h.events.all) {
        if (e.type === MESSAGE_TYPES.jobStarted) maxOutstanding = Math.max(maxOutstanding, ++outstanding);
        if (e.type === MESSAGE_TYPES.jobFinished) outstanding -= 1;
      }
      assert.equal(maxOutstanding, 2);
      assert.equal(target.maxHeld, 2);
    });

    it('rejects a job.run signed by a runners key and never executes it', async () => {
      h = await harness();
      const forged: JobRunMessage = {
        job_id: newId(),
        workflow_id: newId(),
        attempt: 1,
        kind: 'HEARTBEAT',
        payload: heartbeat(target.url('/ok?forged')),
        log_retention: false,
      };
      await h.runnerBus.publish(QUEUES.jobs, MESSAGE_TYPES.jobRun, forged);
      const legit = await h.runJob({ payload: heartbeat(target.url('/ok?legit')) });
      await h.events.finished(legit.job_id);
      assert.equal(h.runnerVerifier.rejected.wrong_producer, 1);
      assert.deepEqual(h.events.forJob(forged.job_id), []);
      assert.ok(!target.hits.includes('/ok?forged'), 'the forged job was executed');
    });

    it("takes itself out after a few job messages in a row it cannot verify, and says why", async () => {
      const hh = (h = await harness());
      // Signed with a key that is not the scheduler's: what a runner with another installation's key sees of every job.
      const forged = () =>
        hh.runnerBus.publish(QUEUES.jobs, MESSAGE_TYPES.jobRun, { job_id: newId(), workflow_id: newId(), attempt: 1, kind: 'HEARTBEAT', payload: heartbeat(target.url('/ok?forged')), log_retention: false });
      await forged();
      await forged();
      assert.equal(h.runner.keyProblem, undefined, 'two refusals in a row are not yet a key problem');
      const legit = await h.runJob({ payload: heartbeat(target.url('/ok?before')) });
      await h.events.finished(legit.job_id);
      // A verified message starts the count over: three more refusals are needed.
      for (let i = 0; i < SIGNATURE_FAILURES_BEFORE_WITHDRAWAL; i++) await forged();
      await until(async () => hh.runner.keyProblem, (p) => p !== undefined, 'the runner names its key problem');
      assert.match(h.runner.keyProblem!, /ORLOJ_SCHEDULER_PUBLIC_KEY/);
      const after = await h.runJob({ payload: heartbeat(target.url('/ok?after')) });
      // Absence takes some waiting: long enough for an in-process delivery many times over.
      await new Promise((r) => setTimeout(r, 500)); // ruling out a hand-out: an absence announces nothing
      assert.deepEqual(h.events.forJob(after.job_id), [], 'a runner that took itself out takes no more jobs');
    });

    it('fails a CONTAINER job as a system failure when no container runtime is configured', async () => {
      h = await harness();
      const job = await h.runJob({ kind: 'CONTAINER', payload: JSON.stringify({ image: 'busybox:1', cmd: ['true'] }), log_retention: true });
      const finished = await h.events.finished(job.job_id);
      assert.equal(finished.body.status, 'FAILED');
      assert.deepEqual(finished.body.reason, reasons.runtimeUnavailable());
      assert.equal(finished.body.system_failure, true);
      assert.ok(h.events.forJob(job.job_id).some((e) => e.type === MESSAGE_TYPES.jobStarted));
    });

    it('answers build.run with ok:false and SYSTEM_ERROR when no container runtime is configured', async () => {
      h = await harness();
      const build: BuildRunMessage = { workflow_id: newId(), build_token: 7, image: 'busybox:1' };
      await h.scheduler.publish(QUEUES.builds, MESSAGE_TYPES.buildRun, build);
      const done = await h.events.until((e) => e.type === MESSAGE_TYPES.buildFinished, 'build.finished');
      assert.equal(done.producer, 'runners');
      assert.deepEqual(done.body, { workflow_id: build.workflow_id, build_token: 7, ok: false, reason: reasons.runtimeUnavailable() });
    });

    it('retries publishing job.finished with backoff until the bus takes it', async () => {
      let flaky: FlakyBus | undefined;
      h = await harness({ wrapBus: (bus) => (flaky = new FlakyBus(bus, 2)), resultRetry: { initialMs: 1000, maxMs: 4000 } });
      const job = await h.runJob({ payload: heartbeat(target.url('/ok')) });
      for (let i = 0; i < 2; i++) {
        const backoff = await h.clock.nextSleep((ms) => ms !== HEARTBEAT_MS, `backoff ${i + 1}`);
        assert.ok(backoff >= 500 * 2 ** i && backoff <= 1000 * 2 ** i, `backoff ${i + 1} was ${backoff} ms`);
        h.clock.advance(backoff);
      }
      const finished = await h.events.finished(job.job_id);
      assert.equal(finished.body.status, 'COMPLETED');
      assert.equal(flaky?.refused, 2);
      assert.equal(h.runner.metrics().running, 0);
    });

    it('frees a slot only once the result is published', async () => {
      h = await harness({ concurrency: 1, wrapBus: (bus) => new FlakyBus(bus, 1) });
      const first = await h.runJob({ payload: heartbeat(target.url('/ok?first')) });
      const second = await h.runJob({ payload: heartbeat(target.url('/ok?second')) });
      h.clock.advance(await h.clock.nextSleep((ms) => ms !== HEARTBEAT_MS, 'the retry backoff'));
      await h.events.finished(second.job_id);
      const order = h.events.all.map((e) => `${e.type} ${(e.body as { job_id: string }).job_id}`);
      assert.deepEqual(order, [
        `${MESSAGE_TYPES.jobStarted} ${first.job_id}`,
        `${MESSAGE_TYPES.jobFinished} ${first.job_id}`,
        `${MESSAGE_TYPES.jobStarted} ${second.job_id}`,
        `${MESSAGE_TYPES.jobFinished} ${second.job_id}`,
      ]);
    });

    describe('stop()', () => {
      it('stops taking work, waits for the running job, and returns the same promise twice', async () => {
        h = await harness({ concurrency: 1 });
        const running = await h.runJob({ payload: heartbeat(target.url('/hold/draining')) });
        await target.arrivals.next('the running request');
        // Delivered, but held unacked while it waits for the only slot.
        const queued = await h.runJob({ payload: heartbeat(target.url('/ok?queued')) });
        await waitFor(() => h?.runner.metrics().waiting === 1, 'the second job to wait for a slot');

        const graceStarted = h.clock.nextSleep(GRACE_MS);
        const stopping = h.runner.stop();
        assert.equal(h.runner.stop(), stopping);
        let stopped = false;
        void stopping.then(() => (stopped = true));
        await graceStarted;
        const late = await h.runJob({ payload: heartbeat(target.url('/ok?late')) });

        assert.equal(stopped, false);
        target.release('draining');
        assert.equal((await h.events.finished(running.job_id)).body.status, 'COMPLETED');
        await within(stopping, 'stop()');
        assert.equal(h.runner.metrics().running, 0);
        assert.deepEqual(h.events.forJob(queued.job_id), []);
        assert.deepEqual(h.events.forJob(late.job_id), []);
        assert.ok(!target.hits.some((hit) => hit === '/ok?queued' || hit === '/ok?late'));

        // Both are still on the queue for another runner; the waiting one was returned.
        const left = new Inbox<{ id: string; redelivered: boolean }>();
        const sub = await h.scheduler.consume(QUEUES.jobs, (e, d) => left.push({ id: (e.body as JobRunMessage).job_id, redelivered: d.redelivered }));
        assert.deepEqual(await left.take(2, 'the jobs left on the queue'), [
          { id: queued.job_id, redelivered: true },
          { id: late.job_id, redelivered: false },
        ]);
        await sub.cancel();
      });

      it('after the grace aborts running jobs and reports them FAILED as system failures', async () => {
        h = await harness();
        const job = await h.runJob({ payload: heartbeat(target.url('/hold/handback')) });
        await target.arrivals.next('the running request');
        const graceStarted = h.clock.nextSleep(GRACE_MS);
        const stopping = h.runner.stop();
        await graceStarted;
        h.clock.advance(GRACE_MS);

        const finished = await h.events.finished(job.job_id);
        assert.equal(finished.body.status, 'FAILED');
        assert.equal(finished.body.system_failure, true);
        assert.deepEqual(finished.body.reason, reasons.runnerShutdown());
        assert.equal(finished.body.reason?.code, 'SYSTEM_ERROR');
        assert.equal(await target.aborted.next('the aborted request'), 'handback');
        await within(stopping, 'stop()');
        assert.equal(h.runner.metrics().running, 0);
      });

      it('gives up on a result it cannot publish only when stop() runs out of time, and says so', async () => {
        h = await harness({ wrapBus: (bus) => new FlakyBus(bus, Infinity) });
        const job = await h.runJob({ payload: heartbeat(target.url('/ok')) });
        await h.clock.nextSleep((ms) => ms !== HEARTBEAT_MS, 'the first retry backoff');
        assert.equal(h.runner.metrics().running, 1);

        const graceStarted = h.clock.nextSleep(GRACE_MS);
        const stopping = h.runner.stop();
        await graceStarted;
        const abortGraceStarted = h.clock.nextSleep(ABORT_GRACE_MS);
        h.clock.advance(GRACE_MS);
        await abortGraceStarted;
        h.clock.advance(ABORT_GRACE_MS);
        await within(stopping, 'stop()');
        await waitFor(() => h?.runner.metrics().unreported === 1, 'the result to be given up');
        assert.equal(h.runner.metrics().running, 0);
        assert.deepEqual(h.events.forJob(job.job_id).map((e) => e.type), [MESSAGE_TYPES.jobStarted]);
      });
    });
  });

  describe('Runner with a real container runtime', function () {
    this.timeout(60_000);
    let dockerHost: string;
    let docker: Docker;
    let containers: ContainerExecutor;
    let h: Harness | undefined;

    before(async function () {
      dockerHost = needService(this, 'docker');
      docker = new Docker(dockerOptionsFromHost(dockerHost));
      containers = new ContainerExecutor({ dockerHost, logger });
      assert.equal(await containers.ping(), true, `the runtime at ${dockerHost} does not answer`);
      assert.deepEqual(await containers.ensureImage(IMAGE), { ok: true }, `${IMAGE} is missing: run scripts/container-runtime.sh ensure`);
    });

    afterEach(async () => {
      if (!h) return;
      const runnerId = h.runner.runnerId;
      await h.close();
      h = undefined;
      const left = await docker.listContainers({ all: true, filters: { label: [`${RUNNER_ID_LABEL}=${runnerId}`] } });
      for (const c of left) await docker.getContainer(c.Id).remove({ force: true });
      assert.deepEqual(left.map((c) => c.Names), [], 'a container was left behind');
    });

    /** Records captured lines; `first` resolves with the first one. */
    function recordingSink(): LogSink & { lines: CapturedLine[]; closed: number; counts: number[]; first: Promise<CapturedLine> } {
      const first = deferred<CapturedLine>();
      const sink = {
        lines: [] as CapturedLine[],
        closed: 0,
        counts: [] as number[],
        first: first.promise,
        open: () => ({
          write: (line: CapturedLine) => {
            sink.lines.push(line);
            if (!first.settled) first.resolve(line);
          },
          close: async (options?: { lineCount?: number }) => {
            sink.closed += 1;
            if (options?.lineCount !== undefined) sink.counts.push(options.lineCount);
          },
        }),
      };
      return sink;
    }

    function container(cmd: string[]): string {
      return JSON.stringify({ image: IMAGE, cmd, timeout: '30s' });
    }

    it('runs a CONTAINER job end to end, passing its lines to the log sink in one sequence', async () => {
      const sink = recordingSink();
      h = await harness({ containers, logSink: sink });
      const job = await h.runJob({ kind: 'CONTAINER', log_retention: true, payload: container(['sh', '-c', 'echo hello; echo oops >&2; echo bye']) });
      const finished = await h.events.finished(job.job_id, 30_000);
      assert.equal(finished.body.status, 'COMPLETED');
      assert.match(finished.body.container_id ?? '', /^[0-9a-f]{64}$/);
      assert.deepEqual(sink.lines.map((l) => l.sequence_num), [0, 1, 2]);
      assert.deepEqual(
        sink.lines.filter((l) => l.stream === 'stdout').map((l) => l.message),
        ['hello', 'bye'],
      );
      assert.deepEqual(
        sink.lines.filter((l) => l.stream === 'stderr').map((l) => l.message),
        ['oops'],
      );
      assert.equal(sink.closed, 1);
      assert.equal(h.runner.metrics().logLines, 3);
    });

    it('applies the image policy: a network that is off, a registry not allowed, and the log cap with its count', async () => {
      const sink = recordingSink();
      const limits = { ...testConfig.containers, registries: ['localhost'], maxLogLines: 5 };
      h = await harness({ containers, logSink: sink, imagePolicy: new ImagePolicy({ limits }) });
      const bridged = await h.runJob({ kind: 'CONTAINER', payload: JSON.stringify({ image: IMAGE, cmd: ['true'], network: 'bridge' }) });
      const refused = await h.events.finished(bridged.job_id, 30_000);
      assert.deepEqual([refused.body.status, refused.body.reason, refused.body.container_id], ['FAILED', reasons.networkNotAllowed(), undefined]);
      const hub = await h.runJob({ kind: 'CONTAINER', payload: JSON.stringify({ image: 'alpine:3', cmd: ['true'] }) });
      assert.deepEqual((await h.events.finished(hub.job_id, 30_000)).body.reason, reasons.registryNotAllowed());
      const chatty = await h.runJob({ kind: 'CONTAINER', log_retention: true, payload: container(['sh', '-c', 'for i in 1 2 3 4 5 6 7 8 9; do echo $i; done']) });
      const finished = await h.events.finished(chatty.job_id, 30_000);
      assert.equal(finished.body.status, 'COMPLETED');
      assert.equal(finished.body.log_truncated, true);
      assert.deepEqual(sink.lines.map((l) => l.message).slice(0, 5), ['1', '2', '3', '4', '5']);
      assert.equal(sink.lines.length, 6);
      assert.match(sink.lines[5]!.message, /^\[orloj\] log limit reached/);
      assert.deepEqual(sink.counts, [9], 'close() gets the printed count');
    });

    it('reports a non-zero exit as FAILED NON_ZERO_EXIT', async () => {
      h = await harness({ containers });
      const job = await h.runJob({ kind: 'CONTAINER', payload: container(['sh', '-c', 'exit 3']) });
      const finished = await h.events.finished(job.job_id, 30_000);
      assert.equal(finished.body.status, 'FAILED');
      assert.deepEqual(finished.body.reason, reasons.nonZeroExit(3));
      assert.equal(finished.body.system_failure, undefined);
    });

    it('stops a running container on job.stop and reports CANCELED', async () => {
      const sink = recordingSink();
      h = await harness({ containers, logSink: sink });
      const job = await h.runJob({ kind: 'CONTAINER', payload: container(['sh', '-c', 'echo ready; sleep 60']) });
      assert.equal((await within(sink.first, 'the container to say ready', 30_000)).message, 'ready');
      await h.stopJob(job.job_id);
      const finished = await h.events.finished(job.job_id, 30_000);
      assert.equal(finished.body.status, 'CANCELED');
      assert.deepEqual(finished.body.reason, reasons.workflowTerminated());
      assert.match(finished.body.container_id ?? '', /^[0-9a-f]{64}$/);
    });

    it('answers build.run with ok:true for a present image and IMAGE_PULL_FAILED for a missing one', async () => {
      h = await harness({ containers });
      const present: BuildRunMessage = { workflow_id: newId(), build_token: 1, image: IMAGE };
      const missing: BuildRunMessage = { workflow_id: newId(), build_token: 2, image: `localhost/orloj-test/missing-${newId().slice(-12)}:1` };
      await h.scheduler.publish(QUEUES.builds, MESSAGE_TYPES.buildRun, present);
      await h.scheduler.publish(QUEUES.builds, MESSAGE_TYPES.buildRun, missing);
      const forWorkflow = (id: string) => (e: Envelope) => e.type === MESSAGE_TYPES.buildFinished && (e.body as BuildFinishedMessage).workflow_id === id;
      const ok = await h.events.until(forWorkflow(present.workflow_id), 'build.finished (present)', 30_000);
      const failed = await h.events.until(forWorkflow(missing.workflow_id), 'build.finished (missing)', 30_000);
      assert.deepEqual(ok.body, { workflow_id: present.workflow_id, build_token: 1, ok: true });
      assert.deepEqual(failed.body, { workflow_id: missing.workflow_id, build_token: 2, ok: false, reason: reasons.imagePullFailed() });
    });

    it('removes containers left behind by a previous run of the same runner id on start', async () => {
      h = await harness({ containers, start: false });
      const labels = { [MANAGED_LABEL]: 'true', [RUNNER_ID_LABEL]: h.runner.runnerId };
      const mine = await docker.createContainer({ Image: IMAGE, Cmd: ['sleep', '60'], Labels: labels, HostConfig: { NetworkMode: 'none' } });
      await mine.start();
      const foreign = await docker.createContainer({
        Image: IMAGE,
        Cmd: ['true'],
        Labels: { ...labels, [RUNNER_ID_LABEL]: `${h.runner.runnerId}-other` },
        HostConfig: { NetworkMode: 'none' },
      });
      try {
        await h.runner.start();
        const ids = (await docker.listContainers({ all: true })).map((c) => c.Id);
        assert.ok(!ids.includes(mine.id), 'the leftover container is still there');
        assert.ok(ids.includes(foreign.id), "another runner's container was removed");
      } finally {
        await foreign.remove({ force: true });
      }
    });
  });
});
