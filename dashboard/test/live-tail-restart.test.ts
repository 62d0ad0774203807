/**
 * A live tail that survives the server, in a real browser: the api role in a
 * process of its own (PostgreSQL, RabbitMQ), the scheduler, runners,
 * log-ingest and notifier in another with the real container runtime. A
 * CONTAINER job prints a numbered line every 250 ms; its job page follows it
 * live while the api process is stopped and started again on the same port.
 * The container keeps printing meanwhile (its lines are stored by
 * log-ingest), so the tail must resume where it stopped — with
 * `Last-Event-ID` — and go on live, every line once, in order, none lost.
 * What the page received is read over the DevTools protocol (each
 * server-sent event with its id), beside what it shows. Then (issue 26) a
 * restart that changes the attempt: the workers crash (SIGKILL) while the api
 * restarts, the job's attempt is found lost and runs again as attempt 2, and
 * the page must start attempt 2 at its line 0 and say so, never splicing it
 * onto attempt 1; after a reload both attempts' lines are reachable.
 * Screenshots land in artifacts/screenshots/ (dashboard/README.md).
 */
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { chromium, type Browser, type Page } from 'playwright-core';
import { axeViolations } from './support/axe.js';
import { createTestDatabase, deleteBusObjects, RoleProcess, services, type TestDatabase } from '@orloj/common/test-support';
import { CHROMIUM, CHROMIUM_ARGS, DASHBOARD_DIST, callApi, containerWorkflow, outlastRetryRound, pollUntil, saveScreenshot, watchedPage, needBrowser } from './support/orloj.js';

const WAIT = Number(process.env.E2E_WAIT) || 90_000;
/**
 * Lines the job prints, one every 250 ms: 100 s, to outlive a stop and a restart of the api.
 * The job must still run when the api is back, and on two cores shared by three test lanes a
 * restart took most of 40 s (CI, issue 24); the test waits for every line, so this is its length.
 */
const LINES = 400;

async function freePort(): Promise<number> {
  const probe = http.createServer();
  await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r));
  const port = (probe.address() as AddressInfo).port;
  await new Promise((r) => probe.close(r));
  return port;
}

/** A server-sent event as the page received it (CDP Network.eventSourceMessageReceived). */
interface Received {
  requestId: string;
  eventName: string;
  eventId: string;
  data: string;
}

/** A tail's open request, with the Last-Event-ID it was sent with. */
interface TailOpen {
  requestId: string;
  url: string;
  lastEventId?: string;
}

/** Every server-sent event the page receives, and every request that opens a tail, with its headers (over CDP). */
async function watchEvents(page: Page): Promise<{ received: Received[]; opens: TailOpen[] }> {
  const cdp = await page.context().newCDPSession(page);
  const received: Received[] = [];
  const opens: TailOpen[] = [];
  const lastEventIdOf = (headers: Record<string, string>) => Object.entries(headers).find(([k]) => k.toLowerCase() === 'last-event-id')?.[1];
  cdp.on('Network.eventSourceMessageReceived', (e: Received) => received.push(e));
  cdp.on('Network.requestWillBeSent', (e: { requestId: string; request: { url: string; headers: Record<string, string> } }) => {
    if (/\/jobs\/[0-9a-f-]+\/events/.test(e.request.url)) opens.push({ requestId: e.requestId, url: e.request.url });
  });
  // The headers as sent (Last-Event-ID is added by the network stack, after requestWillBeSent).
  cdp.on('Network.requestWillBeSentExtraInfo', (e: { requestId: string; headers: Record<string, string> }) => {
    const header = lastEventIdOf(e.headers);
    if (header === undefined) return;
    const open = opens.find((o) => o.requestId === e.requestId);
    if (open) open.lastEventId = header;
    else opens.push({ requestId: e.requestId, url: '', lastEventId: header });
  });
  await cdp.send('Network.enable');
  return { received, opens };
}

/** A CONTAINER workflow whose job prints `line 1` … `line <lines>`, one every 250 ms; its id once its image is checked. */
function countingWorkflow(api: (method: 'GET' | 'POST', route: string, body?: unknown) => Promise<any>, name: string, lines: number): Promise<string> {
  return containerWorkflow(api, WAIT, name, `i=0; while [ $i -lt ${lines} ]; do i=$((i+1)); echo "line $i"; sleep 0.25; done`);
}

describe('dashboard: a live tail through a restart of the api, in a real browser', function () {
  this.timeout(6 * WAIT);
  let db: TestDatabase | undefined;
  let dataDir: string | undefined;
  const prefix = `orloj-tail-${crypto.randomBytes(4).toString('hex')}.`;
  let apiProcess: RoleProcess | undefined;
  let workers: RoleProcess | undefined;
  let browser: Browser | undefined;
  let page: Page;
  let base: string;
  const problems: string[] = [];
  /** While the api is down on purpose, the browser's failed requests are expected. */
  let apiDown = false;

  const api = (method: 'GET' | 'POST', route: string, body?: unknown): Promise<any> => callApi(page, base, method, route, body);

  before(async function () {
    needBrowser(this, { docker: true, postgresAndAmqp: true });
    db = await createTestDatabase('postgres', this);
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'orloj-dashboard-tail-'));
    const port = await freePort();
    const env = { databaseUrl: db.url, amqpUrl: services.amqp!, busPrefix: prefix, dataDir };
    // The api on a fixed port: the page must find it there again after the restart.
    // The test image is local: both the api (which checks payloads) and the runners allow its registry.
    const shared = { CONTAINER_REGISTRIES: 'docker.io,localhost', LOG_LEVEL: 'warn' };
    apiProcess = new RoleProcess('api', env, { ...shared, PORT: String(port), DASHBOARD_DIR: DASHBOARD_DIST, RATE_LIMIT_ENABLED: 'false' });
    // Short leases: after the workers crash, their job's attempt is found lost within seconds of the restart (the second test).
    workers = new RoleProcess('scheduler,runners,log-ingest,notifier', env, { ...shared, DOCKER_HOST: services.docker!, JOB_LEASE_TTL: '10s', LEADER_LEASE_TTL: '3s' });
    // The keys are made once into DATA_DIR/keys (RoleProcess.start), before the processes share it.
    await apiProcess.start();
    await workers.start();
    base = `http://127.0.0.1:${port}`;
    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
    page = await watchedPage(browser, base, WAIT, problems, () => apiDown);
    // The page's user, for every test here (each may run alone).
    await api('POST', '/auth/register', { email: `tail-${Date.now()}@example.com`, password: 'correct horse battery' });
  });

  afterEach(function () {
    if (this.currentTest?.state === 'failed') {
      this.currentTest.err!.message += `\n--- api output (last 2 KiB):\n${apiProcess?.output.slice(-2048) ?? ''}\n--- workers output (last 2 KiB):\n${workers?.output.slice(-2048) ?? ''}`;
    }
    if (problems.length) assert.fail(problems.splice(0).join('\n'));
  });

  after(async function () {
    this.timeout(120_000);
    await browser?.close();
    await apiProcess?.stop('SIGTERM');
    await workers?.stop('SIGTERM');
    await db?.drop();
    if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
    if (services.amqp) await deleteBusObjects(services.amqp, prefix).catch(() => undefined);
  });

  it('resumes the tail of a running CONTAINER job with Last-Event-ID, every line once, none lost', async () => {
    const workflowId = await countingWorkflow(api, 'counting container', LINES);

    const { received, opens } = await watchEvents(page);

    const { id: jobId } = (await api('POST', `/workflows/${workflowId}/jobs/schedule`)) as { id: string };
    await page.goto(`/workflows/${workflowId}/jobs/${jobId}`);
    const live = page.getByLabel('Live log');
    await live.getByText('line 8', { exact: true }).waitFor();
    const logs = () => received.filter((e) => e.eventName === 'log');
    const beforeStop = logs().length;
    assert.ok(beforeStop >= 8 && beforeStop < LINES, `${beforeStop} lines before the stop`);

    apiDown = true;
    await apiProcess!.stop('SIGTERM');
    const banner = page.getByRole('status').filter({ hasText: 'Disconnected — retrying' });
    await banner.waitFor();
    const lastSeen = logs().at(-1)!.eventId;
    await outlastRetryRound(page);
    await live.getByText(`line ${Number(lastSeen) + 1}`, { exact: true }).waitFor();
    assert.equal(await page.getByText('The server cannot be reached').count(), 0, 'the page keeps what it showed');
    await saveScreenshot(page, '29-job-live-disconnected');
    // The container goes on printing while the api is away: log-ingest stores its lines.
    await pollUntil(WAIT, 'lines stored while the api is down', () => db!.store.db.selectFrom('job_logs').select(({ fn }) => fn.countAll<string>().as('n')).where('job_id', '=', jobId).executeTakeFirstOrThrow(), (r) => Number(r.n) >= Number(lastSeen) + 12);
    await outlastRetryRound(page);

    await apiProcess!.start();
    await banner.waitFor({ state: 'detached' });
    apiDown = false;
    // Back live, before the job ends: later lines arrive as they are printed.
    const resumedAt = logs().length;
    await pollUntil(WAIT, 'a line printed after the restart, live', async () => logs().length, (n) => n > resumedAt + 4);
    const job = (await api('GET', `/workflows/${workflowId}/jobs/${jobId}`)) as { status: string };
    assert.equal(job.status, 'RUNNING', 'the tail went on live while the job still ran');
    await saveScreenshot(page, '29-job-live-resumed');

    // The page closes its tail once it sees the job finished (its `end` event may come first, or not at all).
    await pollUntil(WAIT, 'every line at the page', async () => ({ lines: logs().length, last: logs().at(-1)?.eventId }), (r) => r.lines >= LINES);
    await page.locator('.page-head .badge', { hasText: 'completed' }).waitFor();

    // What the page got: every line once, in order, across at least two connections.
    const ids = logs().map((e) => Number(e.eventId));
    const perConnection = [...new Set(received.map((e) => e.requestId))].map((id) => {
      const got = received.filter((e) => e.requestId === id && e.eventName === 'log');
      return { ...opens.find((o) => o.requestId === id), lines: got.length, first: got[0]?.eventId, last: got.at(-1)?.eventId };
    });
    assert.deepEqual(ids, Array.from({ length: LINES }, (_, i) => i), `every line once, in order; by connection: ${JSON.stringify(perConnection)}; opened: ${JSON.stringify(opens)}`);
    assert.deepEqual(logs().map((e) => (JSON.parse(e.data) as { message: string }).message), Array.from({ length: LINES }, (_, i) => `line ${i + 1}`));
    const connections = new Set(logs().map((e) => e.requestId));
    assert.ok(connections.size >= 2, `the lines came over ${connections.size} connection(s)`);
    // The resumed connection asked for the lines after the last one seen, and got exactly those.
    const resumed = opens.slice(1);
    assert.ok(resumed.length >= 1, `tail requests: ${JSON.stringify(opens)}`);
    const resumes = resumed.map((o) => o.lastEventId ?? new URL(o.url).searchParams.get('since') ?? new URL(o.url).searchParams.get('lastEventId'));
    assert.ok(resumes.includes(lastSeen), `resumed from ${JSON.stringify(resumes)}, the last line seen was ${lastSeen}`);
    assert.ok(resumed.some((o) => o.lastEventId === lastSeen), `the browser resumed with the Last-Event-ID header: ${JSON.stringify(resumed)}`);
    const firstAfter = logs().find((e) => e.requestId !== logs()[0]!.requestId)!;
    assert.equal(Number(firstAfter.eventId), Number(lastSeen) + 1, 'the resumed stream starts right after the last line seen');

    // And what it shows: the finished log, opened at its end, without a line twice.
    const log = page.getByLabel('Log', { exact: true });
    await log.getByText(`line ${LINES}`, { exact: true }).waitFor();
    const shown = await log.locator('.log-line:not(.log-pending) .log-message').allTextContents();
    assert.equal(new Set(shown).size, shown.length, `a line shown twice: ${JSON.stringify(shown)}`);
    await saveScreenshot(page, '29-job-live-after-restart');
  });
  it('starts the new attempt at its line 0 and says so when a restart changes the attempt; both attempts stay readable after a reload', async () => {
    const PER_ATTEMPT = 160;
    const workflowId = await countingWorkflow(api, 'counting container, crashed', PER_ATTEMPT);
    const { received } = await watchEvents(page);
    const { id: jobId } = (await api('POST', `/workflows/${workflowId}/jobs/schedule`)) as { id: string };
    await page.goto(`/workflows/${workflowId}/jobs/${jobId}`);
    const live = page.getByLabel('Live log');
    await live.getByText('line 8', { exact: true }).waitFor();
    const attemptOf = (e: Received) => Number((JSON.parse(e.data) as { event_id: string }).event_id.split(':')[1]);
    const logsOf = (attempt: number) => received.filter((e) => e.eventName === 'log' && attemptOf(e) === attempt);

    // The api restarts while the workers crash: the job's runner is gone, its lease runs out, it runs again as attempt 2.
    apiDown = true;
    await Promise.all([apiProcess!.stop('SIGTERM'), workers!.stop('SIGKILL')]);
    const banner = page.getByRole('status').filter({ hasText: 'Disconnected — retrying' });
    await banner.waitFor();
    await workers!.start();
    await apiProcess!.start();
    await banner.waitFor({ state: 'detached' });
    apiDown = false;

    await page.getByRole('status').filter({ hasText: 'Attempt 2 started: its log starts at line 0' }).waitFor();
    // What it shows: attempt 2 alone, from its first line (the restart may have taken long enough for it to print many).
    await live.evaluate((el) => el.scrollTo({ top: 0 }));
    await live.getByText('line 1', { exact: true }).waitFor();
    const shown = await live.locator('.log-line:not(.log-pending) .log-message').allTextContents();
    assert.equal(shown[0], 'line 1', `the live log starts with attempt 2's first line: ${JSON.stringify(shown.slice(0, 5))}`);
    assert.ok(shown.every((m, i) => m === `line ${i + 1}`), `no line of attempt 1 spliced in: ${JSON.stringify(shown)}`);
    await saveScreenshot(page, '60-job-attempt-switched');
    // What it received: attempt 2 from its line 0, every line once, in order, nothing skipped for the lines attempt 1 had shown.
    await pollUntil(WAIT, "attempt 2's lines at the page", async () => logsOf(2).length, (n) => n >= 12);
    const second = logsOf(2).map((e) => Number(e.eventId));
    assert.deepEqual(second, Array.from({ length: second.length }, (_, i) => i), `attempt 2's lines as received: ${JSON.stringify(second)}`);

    // The attempts, and after a reload each attempt's own log.
    const attempts = page.getByRole('table', { name: 'Attempts, oldest first' });
    await attempts.locator('tbody tr').nth(1).waitFor();
    const first = attempts.locator('tbody tr').first();
    await first.getByText('retried').waitFor();
    await first.getByText(/its runner stopped responding/).waitFor();
    await page.reload();
    const firstLines = ((await api('GET', `/workflows/${workflowId}/jobs/${jobId}/attempts`)) as { attempts: { log_lines: number }[] }).attempts[0]!.log_lines;
    assert.ok(firstLines >= 8, `attempt 1 kept ${firstLines} lines`);
    await attempts.getByRole('link', { name: /Attempt 1's log/ }).click();
    await page.getByRole('note').filter({ hasText: 'The log of attempt 1 of 2' }).waitFor();
    await page.getByLabel('Log', { exact: true }).getByText(`line ${firstLines}`, { exact: true }).waitFor();
    for (const scheme of ['light', 'dark'] as const) {
      await page.emulateMedia({ colorScheme: scheme });
      assert.deepEqual(await axeViolations(page), [], `the job page with its attempts, ${scheme}`);
      await saveScreenshot(page, `61-job-attempt-1-log-${scheme}`);
    }
    await page.emulateMedia({ colorScheme: 'light' });
    await page.getByRole('link', { name: "Show the current attempt's log" }).click();
    // Attempt 2 runs to its end (the workers stop gracefully after the suite only once no job runs).
    await page.locator('.page-head .badge', { hasText: 'completed' }).waitFor();
    await page.getByLabel('Log', { exact: true }).getByText(`line ${PER_ATTEMPT}`, { exact: true }).waitFor();
  });
});
