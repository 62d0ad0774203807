// The run's broker, seen from outside: consumers and ready messages per queue
// (how the harness knows every process is up), and the deletion of the run's
// queues and exchanges at the end.
import { spawnSync } from 'node:child_process';
import amqp, { type Channel, type ChannelModel } from 'amqplib';
import { QUEUES, TOPICS } from '@orloj/common/messages';
import { DEAD_LETTER_SUFFIX } from '@orloj/common/bus';

export interface QueueProbe {
  /** Consumers attached to the queue; 0 when it is not declared (or the broker is unreachable). */
  count(queue: string): Promise<number>;
  /** Ready messages in the queue; 0 when it is not declared (or the broker is unreachable). */
  depth(queue: string): Promise<number>;
  /** Ready messages, or undefined when the queue does not exist or the broker cannot be asked. */
  messages(queue: string): Promise<number | undefined>;
  close(): Promise<void>;
}

/** The QueueProbe of a run without a broker (embedded): no queues. */
export const NO_QUEUES: QueueProbe = {
  count: () => Promise.resolve(0),
  depth: () => Promise.resolve(0),
  messages: () => Promise.resolve(undefined),
  close: () => Promise.resolve(),
};

/**
 * Consumers attached to a queue: every runner consumes QUEUES.jobs and every
 * scheduler QUEUES.jobEvents, so the counts tell when all processes are up
 * (their signal handlers are installed by then, and a SIGKILLed process's
 * consumer goes away with its connection). A lost connection (a broker
 * restart) is opened again on the next check.
 */
export async function openConsumerCounter(amqpUrl: string): Promise<QueueProbe> {
  const connect = async () => {
    const c = await amqp.connect(amqpUrl);
    c.on('error', () => {});
    c.on('close', () => {
      if (conn === c) {
        conn = undefined;
        channel = undefined;
      }
    });
    return c;
  };
  let conn: ChannelModel | undefined = await connect();
  let channel: Channel | undefined;
  let closed = false;
  const check = async (queue: string) => {
    try {
      conn ??= await connect();
      if (!channel) {
        channel = await conn.createChannel();
        channel.on('error', () => {});
      }
      return await channel.checkQueue(queue);
    } catch {
      channel = undefined; // not declared yet: the failed check closed the channel
      return undefined;
    }
  };
  return {
    count: async (queue) => (await check(queue))?.consumerCount ?? 0,
    depth: async (queue) => (await check(queue))?.messageCount ?? 0,
    messages: async (queue) => (closed ? undefined : (await check(queue))?.messageCount),
    close: async () => {
      closed = true;
      const c = conn;
      conn = undefined;
      await c?.close().catch(() => undefined);
    },
  };
}

export async function deleteBusNames(amqpUrl: string, prefix: string): Promise<number> {
  const queues = new Set<string>();
  for (const q of Object.values(QUEUES)) {
    queues.add(prefix + q);
    queues.add(prefix + q + DEAD_LETTER_SUFFIX);
  }
  // Anything else under the prefix, when rabbitmqctl can list queues here.
  const listed = spawnSync('rabbitmqctl', ['-s', 'list_queues', 'name'], { encoding: 'utf8', timeout: 20_000 });
  if (listed.status === 0) {
    for (const line of listed.stdout.split('\n')) if (line.trim().startsWith(prefix)) queues.add(line.trim());
  }
  const conn = await amqp.connect(amqpUrl);
  conn.on('error', () => {});
  let deleted = 0;
  try {
    let channel = await conn.createChannel();
    channel.on('error', () => {});
    const attempt = async (op: (ch: Channel) => Promise<unknown>) => {
      try {
        await op(channel);
        return true;
      } catch {
        // A failed operation closes the channel: continue on a new one.
        channel = await conn.createChannel();
        channel.on('error', () => {});
        return false;
      }
    };
    for (const q of queues) {
      // checkQueue first: deleting a queue that never existed is not an error on every broker version.
      if ((await attempt((ch) => ch.checkQueue(q))) && (await attempt((ch) => ch.deleteQueue(q)))) deleted += 1;
    }
    for (const t of Object.values(TOPICS)) {
      if ((await attempt((ch) => ch.checkExchange(prefix + t))) && (await attempt((ch) => ch.deleteExchange(prefix + t)))) deleted += 1;
    }
  } finally {
    await conn.close().catch(() => undefined);
  }
  return deleted;
}
