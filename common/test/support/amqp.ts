import amqp from 'amqplib';
import { QUEUES, TOPICS } from '@orloj/common/messages';
import { entryExchange } from '@orloj/common/bus';

/**
 * Deletes every queue and exchange orloj declares under `prefix` — for tests
 * whose bus lives inside a server they started and stopped.
 */
export async function deleteBusObjects(url: string, prefix: string): Promise<void> {
  const connection = await amqp.connect(url);
  try {
    for (const name of Object.values(QUEUES)) {
      for (const queue of [`${prefix}${name}`, `${prefix}${name}.dead`]) {
        const ch = await connection.createChannel();
        await ch.deleteQueue(queue).catch(() => undefined);
        await ch.close().catch(() => undefined);
        const exchangeChannel = await connection.createChannel();
        await exchangeChannel.deleteExchange(entryExchange(queue)).catch(() => undefined);
        await exchangeChannel.close().catch(() => undefined);
      }
    }
    for (const name of Object.values(TOPICS)) {
      const ch = await connection.createChannel();
      await ch.deleteExchange(`${prefix}${name}`).catch(() => undefined);
      await ch.close().catch(() => undefined);
    }
  } finally {
    await connection.close();
  }
}
