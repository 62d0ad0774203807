import crypto from 'node:crypto';
import { systemClock, type Clock } from '@orloj/common/core';
import { silentLogger } from '@orloj/common/logging';
import { MESSAGE_TYPES, QUEUES, type LogBatchMessage, type LogLineMessage } from '@orloj/common/messages';
import { roleBus, type ProducerRole, type RoleKeys, type SignedBus } from '@orloj/common/envelope';
import { AmqpBus, createBus, type Bus } from '@orloj/common/bus';
import type { Store } from '@orloj/common/store';
import type { LogJob } from '@orloj/common/test-support';
export { generateKeys, insertLogJob, until } from '@orloj/common/test-support';

/** The in-process bus, or RabbitMQ under a random prefix (deleted by close()). */
export async function openBus(amqpUrl?: string): Promise<{ bus: Bus; prefix: string; close(): Promise<void> }> {
  const prefix = `orloj-test-${crypto.randomBytes(4).toString('hex')}.`;
  const bus = await createBus(amqpUrl ?? 'memory:', { logger: silentLogger, prefix });
  return { bus, prefix, close: () => (bus instanceof AmqpBus ? bus.destroy() : bus.close()) };
}

export function busFor(bus: Bus, role: ProducerRole, keys: RoleKeys, clock: Clock = systemClock): SignedBus {
  return roleBus({ bus, role, keys, clock, logger: silentLogger });
}

export type TestJob = LogJob;

export function lines(from: number, to: number, text: (i: number) => string = (i) => `line ${i}`): LogLineMessage[] {
  const out: LogLineMessage[] = [];
  for (let i = from; i < to; i++) out.push({ sequence_num: i, stream: i % 3 === 0 ? 'stderr' : 'stdout', message: text(i), timestamp: 1767225600000 + i });
  return out;
}

export function publishBatch(
  runners: SignedBus,
  job: TestJob,
  batchLines: LogLineMessage[],
  extra: Partial<LogBatchMessage> = {},
): Promise<unknown> {
  const body: LogBatchMessage = { job_id: job.jobId, workflow_id: job.workflowId, attempt: 1, retain: true, lines: batchLines, ...extra };
  return runners.publish(QUEUES.logs, MESSAGE_TYPES.logBatch, body, { ttlMs: 60 * 60_000 });
}

export interface StoredLine {
  sequence_num: number;
  stream: string;
  message: string;
  timestamp: number;
}

export async function storedLines(store: Store, jobId: string, attempt = 1): Promise<StoredLine[]> {
  return store.db
    .selectFrom('job_logs')
    .select(['sequence_num', 'stream', 'message', 'timestamp'])
    .where('job_id', '=', jobId)
    .where('attempt', '=', attempt)
    .orderBy('sequence_num')
    .execute();
}

export async function rowCount(store: Store, jobId: string): Promise<number> {
  const row = await store.db.selectFrom('job_logs').select((eb) => eb.fn.countAll<number | string>().as('n')).where('job_id', '=', jobId).executeTakeFirstOrThrow();
  return Number(row.n);
}
