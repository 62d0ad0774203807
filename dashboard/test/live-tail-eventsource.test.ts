/**
 * The live tail against a browser's own EventSource, in Debian's Chromium
 * (driven by playwright-core) and a real `orloj start` on SQLite: a client
 * that does not close its EventSource on `end` has the stream held open for
 * it (keep-alive comments) until the hold is over (LIVE_TAIL_HOLD_AFTER_END,
 * 60 s by default, 1 s here), sees the server close it then and reconnects
 * with the last id, the `end`'s. orloj answers that reconnect with 204, which
 * makes EventSource stop, instead of replaying the log and `end` in a loop
 * (docs/api.md, "Live tail").
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { openDatabase, Store, type DatabaseHandle } from '@orloj/common/store';
import { insertJob, workflowFixture, requireServices } from '@orloj/common/test-support';
import { TestClient } from '@orloj/api/test-support';
import { OrlojProcess } from '@orloj/server/test-support';

const CHROMIUM = process.env.TEST_CHROMIUM || '/usr/bin/chromium';
const LINES = 12;

interface Seen {
  events: { type: string; id: string }[];
  errors: number;
  readyState: number;
}

describe('live tail with a real EventSource in Chromium', function () {
  this.timeout(180_000);
  let dataDir: string;
  let orloj: OrlojProcess | undefined;
  let browser: Browser | undefined;
  let database: DatabaseHandle | undefined;

  before(function () {
    if (!fs.existsSync(CHROMIUM)) {
      if (requireServices) throw new Error(`REQUIRE_SERVICES=1 but there is no Chromium at ${CHROMIUM}`);
      this.skip();
    }
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'orloj-eventsource-'));
  });

  after(async () => {
    await browser?.close();
    await orloj?.stop('SIGTERM');
    await database?.close();
    if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('gets the log and end once, and no replay loop when the client does not close on end', async () => {
    orloj = new OrlojProcess([], { DATA_DIR: dataDir, PORT: '0', LOG_LEVEL: 'warn', DOCKER_HOST: 'unix:///nonexistent.sock', LIVE_TAIL_HOLD_AFTER_END: '1s' });
    orloj.spawn();
    await orloj.waitFor(/orloj is running/);
    const port = Number(/listening on [^:]+:(\d+)\)/.exec(orloj.output)?.[1]);
    const base = `http://127.0.0.1:${port}`;

    const client = new TestClient(base);
    const email = `tail-${Date.now()}@example.com`;
    const registered = await client.post('/auth/register', { email, password: 'correct horse' });
    assert.equal(registered.status, 201, registered.text);

    // A finished CONTAINER job with its lines, written where the server reads them.
    database = openDatabase(`sqlite:${path.join(dataDir, 'orloj.db')}`);
    const store = Store.fromHandle(database);
    const user = await store.users.findByEmail(email);
    assert.ok(user);
    const now = Date.now();
    const workflow = workflowFixture(user.id, {
      name: 'tail',
      kind: 'CONTAINER',
      payload: JSON.stringify({ image: 'busybox:1' }),
      logRetention: true,
      createdAt: now,
      updatedAt: now,
    });
    await store.workflows.insert(workflow);
    const job = await insertJob(store, workflow.id, 'COMPLETED');
    await store.logs.insertBatch(
      job.id,
      job.attempts,
      Array.from({ length: LINES }, (_, i) => ({ sequence_num: i, stream: 'stdout' as const, message: `line ${i}`, timestamp: now + i })),
    );

    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
    const context = await browser.newContext();
    await context.addCookies([...client.cookies].map(([name, value]) => ({ name, value, url: base })));
    const page = await context.newPage();
    // A page of this origin whose policy lets it connect back (the dashboard's CSP: connect-src 'self');
    // API answers carry default-src 'none', under which the browser would refuse the EventSource itself.
    await page.goto(`${base}/`);
    // The page keeps the EventSource open (as a careless client would) and records everything.
    await page.evaluate((url) => {
      const seen: Seen = { events: [], errors: 0, readyState: 0 };
      (globalThis as unknown as { seen: Seen }).seen = seen;
      const source = new EventSource(url);
      for (const type of ['connected', 'log', 'end']) {
        source.addEventListener(type, (e) => seen.events.push({ type, id: (e as MessageEvent).lastEventId }));
      }
      source.onerror = () => {
        seen.errors += 1;
        seen.readyState = source.readyState;
      };
    }, `/workflows/${workflow.id}/jobs/${job.id}/events`);

    // The hold over, the server closes the stream; EventSource reconnects (Chromium waits about 3 s), gets 204 and gives up: CLOSED.
    await page.waitForFunction(() => (globalThis as unknown as { seen: Seen }).seen.readyState === EventSource.CLOSED, undefined, { timeout: 60_000 });
    const seen = await page.evaluate(() => (globalThis as unknown as { seen: Seen }).seen);
    const types = seen.events.map((e) => e.type);
    assert.deepEqual(types, ['connected', ...Array<string>(LINES).fill('log'), 'end'], 'one pass of the log, no replay');
    assert.equal(seen.events.at(-1)?.id, String(LINES - 1), 'end carries the last line id');
  });
});
