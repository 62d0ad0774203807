import { ManualClock } from '@orloj/common/core';
import type { Job, Workflow } from '@orloj/common/domain';
import { silentLogger } from '@orloj/common/logging';
import { MESSAGE_TYPES, QUEUES, TOPICS, type JobFinishedMessage, type JobRunMessage, type JobStopMessage, type BuildRunMessage } from '@orloj/common/messages';
import { roleBus, type Envelope, type RoleKeys, type SignedBus } from '@orloj/common/envelope';
import { createBus, MemoryBus, type Bus } from '@orloj/common/bus';
import type { Store } from '@orloj/common/store';
import { newId } from '@orloj/common/core';
import { deleteBusObjects, generateKeys, needService, workflowFixture } from '@orloj/common/test-support';

export { insertUser } from '@orloj/common/test-support';

export { generateKeys };

/**
 * The runners' side of the protocol, played by the test: it collects the job
 * and build messages the scheduler sends and answers with signed events.
 */
export class FakeRunners {
  readonly jobs: JobRunMessage[] = [];
  readonly builds: BuildRunMessage[] = [];
  readonly stops: JobStopMessage[] = [];
  private waiters: (() => void)[] = [];

  constructor(readonly bus: SignedBus) {}

  async start(): Promise<void> {
    await this.bus.consume(QUEUES.jobs, (e: Envelope) => this.push(this.jobs, e.body as JobRunMessage), { prefetch: 100 });
    await this.bus.consume(QUEUES.builds, (e: Envelope) => this.push(this.builds, e.body as BuildRunMessage), { prefetch: 100 });
    await this.bus.subscribe(TOPICS.jobControl, (e: Envelope) => this.push(this.stops, e.body as JobStopMessage));
  }

  private push<T>(list: T[], item: T): void {
    list.push(item);
    for (const w of this.waiters.splice(0)) w();
  }

  /** Resolves once `predicate` holds, re-checked whenever a message arrives. */
  async until(predicate: () => boolean, what: string): Promise<void> {
    const deadline = Date.now() + 5_000;
    while (!predicate()) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise<void>((resolve) => {
        this.waiters.push(resolve);
        setTimeout(resolve, 20); // poll interval, in case a message comes by a path that does not wake the waiters
      });
    }
  }

  started(job: JobRunMessage, at: number): Promise<unknown> {
    return this.bus.publish(QUEUES.jobEvents, MESSAGE_TYPES.jobStarted, { job_id: job.job_id, attempt: job.attempt, runner_id: 'r1', started_at: at });
  }

  heartbeat(job: JobRunMessage): Promise<unknown> {
    return this.bus.publish(QUEUES.jobEvents, MESSAGE_TYPES.jobHeartbeat, { job_id: job.job_id, attempt: job.attempt, runner_id: 'r1' });
  }

  finished(job: JobRunMessage, status: JobFinishedMessage['status'], at: { started: number; finished: number }, extra: Partial<JobFinishedMessage> = {}): Promise<unknown> {
    const body: JobFinishedMessage = {
      job_id: job.job_id,
      attempt: job.attempt,
      runner_id: 'r1',
      status,
      started_at: at.started,
      finished_at: at.finished,
      ...(status === 'FAILED' ? { reason: { code: 'NON_ZERO_EXIT' as const, message: 'The container exited with code 1.' } } : {}),
      ...extra,
    };
    return this.bus.publish(QUEUES.jobEvents, MESSAGE_TYPES.jobFinished, body);
  }

  buildFinished(build: BuildRunMessage, ok: boolean): Promise<unknown> {
    return this.bus.publish(QUEUES.jobEvents, MESSAGE_TYPES.buildFinished, { workflow_id: build.workflow_id, build_token: build.build_token, ok });
  }
}

export interface Rig {
  clock: ManualClock;
  bus: MemoryBus | Bus;
  keys: RoleKeys;
  schedulerBus: SignedBus;
  runners: FakeRunners;
}

/** The in-process bus, or `bus` (a RabbitMQ one) when given. */
export async function rig(start = Date.UTC(2026, 0, 1, 12), bus: Bus = new MemoryBus({ logger: silentLogger })): Promise<Rig> {
  const clock = new ManualClock(start);
  const keys = generateKeys();
  const schedulerBus = roleBus({ bus, role: 'scheduler', keys, clock, logger: silentLogger });
  const runners = new FakeRunners(roleBus({ bus, role: 'runners', keys, clock, logger: silentLogger }));
  await runners.start();
  return { clock, bus, keys, schedulerBus, runners };
}

export async function insertWorkflow(store: Store, userId: string, now: number, overrides: Partial<Workflow> = {}): Promise<Workflow> {
  const w = workflowFixture(userId, {
    payload: JSON.stringify({ endpoint: 'http://127.0.0.1:9/' }),
    createdAt: now,
    updatedAt: now,
    ...overrides,
  });
  await store.workflows.insert(w);
  return w;
}

/** The workflow's jobs, oldest first. */
export async function jobsOf(store: Store, workflowId: string): Promise<Job[]> {
  return (await store.jobs.list({ workflowId, limit: 1000 })).reverse();
}

/**
 * The clock moves on `ms` while orloj runs (the leader's uptime beat every few
 * seconds, docs/adr/0021) without creating jobs, as when the runners are behind:
 * the slots missed meanwhile are the workflow's, not orloj's downtime.
 */
export async function ranWithoutJobs(store: Store, clock: ManualClock, ms: number): Promise<void> {
  for (let left = ms; left > 0; left -= 5_000) {
    clock.advance(Math.min(5_000, left));
    await store.uptime.beat(clock.now(), 17_000);
  }
}

/** The buses a suite runs over: the in-process one, or RabbitMQ under a prefix of its own (deleted after by `done`). */
export const TEST_BUSES: readonly [name: string, open: (ctx: Mocha.Context) => Promise<{ bus?: Bus; done: () => Promise<void> }>][] = [
  ['the in-process bus', () => Promise.resolve({ done: () => Promise.resolve() })],
  [
    'RabbitMQ',
    async (ctx) => {
      const url = needService(ctx, 'amqp');
      const prefix = `test-scheduler-${newId()}.`;
      return { bus: await createBus(url, { logger: silentLogger, prefix }), done: () => deleteBusObjects(url, prefix) };
    },
  ],
];
