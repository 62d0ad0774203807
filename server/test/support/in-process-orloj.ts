import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startOrloj, type RunningOrloj } from '@orloj/server';
import { createTestDatabase, deleteBusObjects, needService, services, type TestDatabase } from '@orloj/common/test-support';

/** The two installations the in-process suites run on. */
export const INSTALLATIONS = [
  { name: 'SQLite + in-process bus', engine: 'sqlite', amqp: false },
  { name: 'PostgreSQL + RabbitMQ', engine: 'postgres', amqp: true },
] as const;
export type Installation = (typeof INSTALLATIONS)[number];

type StartOptions = Parameters<typeof startOrloj>[0];

/**
 * orloj in this process (`startOrloj`, the first way in docs/testing.md) on
 * `installation`: its own database, DATA_DIR and bus prefix, made in the
 * suite's `before`; in its `after`, orloj stopped first, then all of them
 * removed. `start` takes startOrloj's options; their `env` adds to the
 * installation's variables (a free port, no rate limit) or overrides them.
 */
export function inProcessOrloj(installation: Installation, tag: string) {
  let db: TestDatabase | undefined;
  let dataDir: string | undefined;
  let orloj: RunningOrloj | undefined;
  const busPrefix = `orloj-${tag}-${crypto.randomBytes(4).toString('hex')}.`;
  before(async function () {
    if (installation.amqp) needService(this, 'amqp');
    db = await createTestDatabase(installation.engine, this);
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), `orloj-${tag}-`));
  });
  after(async () => {
    await orloj?.stop();
    if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
    await db?.drop();
    if (installation.amqp && services.amqp) await deleteBusObjects(services.amqp, busPrefix);
  });
  return {
    async start(options: StartOptions): Promise<RunningOrloj> {
      orloj = await startOrloj({
        ...options,
        env: {
          DATA_DIR: dataDir!,
          DATABASE_URL: db!.url,
          BUS_URL: installation.amqp ? services.amqp! : 'memory:',
          BUS_PREFIX: busPrefix,
          PORT: '0',
          RATE_LIMIT_ENABLED: 'false',
          ...options.env,
        },
      });
      return orloj;
    },
  };
}
