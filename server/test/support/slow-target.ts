import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Store } from '@orloj/common/store';
import { workflowFixture } from '@orloj/common/test-support';

/** A local HEARTBEAT target that answers after `delayMs`: jobs against it keep runner slots busy. */
export async function slowTarget(delayMs: number): Promise<{ server: http.Server; url: string; close(): void }> {
  const server = http.createServer((_req, res) => setTimeout(() => res.end('ok'), delayMs).unref()); // a target slow on purpose: jobs stay RUNNING that long
  server.listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  return {
    server,
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`,
    close() {
      server.close();
      server.closeAllConnections();
    },
  };
}

/** `count` built one-minute HEARTBEAT workflows of `userId` against `url`, due at `now`. */
export async function insertDueWorkflows(store: Store, userId: string, url: string, now: number, count: number): Promise<void> {
  for (let i = 0; i < count; i++) {
    await store.workflows.insert(
      workflowFixture(userId, {
        name: `slow ${i}`,
        payload: JSON.stringify({ endpoint: url }),
        buildStatus: 'COMPLETED',
        buildCompletedAt: now - 1,
        nextDueAt: now,
        maxConsecutiveJobFailuresAllowed: 100,
        createdAt: now,
        updatedAt: now,
      }),
    );
  }
}
