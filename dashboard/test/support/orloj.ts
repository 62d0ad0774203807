/** What the browser suites share: a real `orloj start` from sources, and where its screenshots go. */
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser, type Page } from 'playwright-core';
import { requireServices, services, stopChild, until } from '@orloj/common/test-support';
import { OrlojProcess } from '@orloj/server/test-support';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
export const BIN = path.join(ROOT, 'server/src/bin.ts');
export const DASHBOARD_DIST = path.join(ROOT, 'dashboard/dist');
export const SCREENSHOTS = path.join(ROOT, 'artifacts/screenshots');
export const CHROMIUM = process.env.TEST_CHROMIUM || '/usr/bin/chromium';
export const CHROMIUM_ARGS = ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];

/** What a browser suite needs beyond Chromium and the dashboard build. */
export interface BrowserNeeds {
  /** The container runtime (TEST_DOCKER_HOST). */
  docker?: boolean;
  /** PostgreSQL and RabbitMQ (TEST_DATABASE_URL, TEST_AMQP_URL). */
  postgresAndAmqp?: boolean;
}

/** What a browser suite needs that is missing, or undefined. */
export function missingForBrowser(needs: BrowserNeeds = {}): string | undefined {
  if (!fs.existsSync(CHROMIUM)) return `no Chromium at ${CHROMIUM} (scripts/test.sh installs Debian's chromium)`;
  if (needs.docker && !services.docker) return 'no container runtime (TEST_DOCKER_HOST)';
  if (needs.postgresAndAmqp && (!services.postgres || !services.amqp)) return 'no PostgreSQL or RabbitMQ (TEST_DATABASE_URL, TEST_AMQP_URL)';
  if (!fs.existsSync(path.join(DASHBOARD_DIST, 'index.html'))) return 'the dashboard is not built (npm run build)';
  return undefined;
}

/** In a suite's `before`: skips the suite when something it needs is missing, or fails it where every service is required. */
export function needBrowser(ctx: Mocha.Context, needs: BrowserNeeds = {}): void {
  const why = missingForBrowser(needs);
  if (!why) return;
  if (requireServices) throw new Error(`REQUIRE_SERVICES=1 but ${why}`);
  ctx.skip();
}

export interface RunningOrloj {
  child: ChildProcess;
  port: number;
  output: () => string;
}

/**
 * `orloj start` from sources (the kit's OrlojProcess); resolves with its port once it prints that it runs.
 * On any free port unless `env` names one: 8080, orloj's default, may be another suite's or another program's.
 */
export async function startOrloj(env: Record<string, string>): Promise<RunningOrloj> {
  const orloj = new OrlojProcess([], { LOG_LEVEL: 'warn', PORT: '0', ...env });
  const child = orloj.spawn();
  const running = /orloj is running .*listening on [^:]+:(\d+)\)/;
  // Generous: a cold tsx compile of every role on a busy machine.
  await orloj.waitFor(running, 180_000);
  return { child, port: Number(running.exec(orloj.output)![1]), output: () => orloj.output };
}

/** Stops it with SIGTERM and waits for the exit. */
export async function stopOrloj(orloj: RunningOrloj | undefined): Promise<void> {
  await stopChild(orloj?.child, 'SIGTERM');
}

/** Calls the api as the page's signed-in user (its cookies), with a fresh Idempotency-Key; asserts a 2xx answer and returns its JSON. */
export async function callApi(page: Page, base: string, method: 'GET' | 'POST', route: string, body?: unknown): Promise<any> {
  const res = await page.request.fetch(`${base}/api${route}`, {
    method,
    headers: { 'idempotency-key': crypto.randomUUID(), 'content-type': 'application/json' },
    ...(body === undefined ? {} : { data: JSON.stringify(body) }),
  });
  assert.ok(res.ok(), `${method} ${route}: ${res.status()} ${await res.text()}`);
  return res.status() === 204 ? undefined : res.json();
}

/** Polls (no fixed sleep) until `done` holds of what `read` returns, for at most `wait` ms. */
export function pollUntil<T>(wait: number, what: string, read: () => Promise<T>, done: (v: T) => boolean): Promise<T> {
  return until(read, done, what, wait, { everyMs: 200 });
}

/** Runs the workflow now through the page's session, and waits (up to `wait` ms) for the run to finish; the job as read last. */
export async function runNow(page: Page, base: string, workflowId: string, wait: number): Promise<any> {
  const { id } = (await callApi(page, base, 'POST', `/workflows/${workflowId}/jobs/schedule`)) as { id: string };
  const job = () => callApi(page, base, 'GET', `/workflows/${workflowId}/jobs/${id}`);
  return pollUntil(wait, 'the run to finish', job, (j) => ['COMPLETED', 'FAILED', 'CANCELED'].includes(j.status));
}

/** The busybox image scripts/container-runtime.sh puts in the test runtime's local store. */
export const TEST_IMAGE = 'localhost/orloj-test/busybox:1';

/** A CONTAINER workflow of the signed-in user running `sh -c script` (weekly, its log kept); its id once its image is checked. */
export async function containerWorkflow(api: (method: 'GET' | 'POST', route: string, body?: unknown) => Promise<any>, wait: number, name: string, script: string): Promise<string> {
  const { id } = (await api('POST', '/workflows', {
    name,
    kind: 'CONTAINER',
    payload: JSON.stringify({ image: TEST_IMAGE, cmd: ['sh', '-c', script], timeout: '5m' }),
    interval: 10080,
    max_consecutive_job_failures_allowed: 3,
    log_retention: true,
  })) as { id: string };
  await pollUntil(wait, `${name} built`, () => api('GET', `/workflows/${id}`), (w) => w.build_status === 'COMPLETED');
  return id;
}

/**
 * While the server is down: waits for a round of the disconnected banner's
 * retries to fail (it asks again every query on screen, the session check
 * included), then asserts the page was not replaced by "orloj is not
 * reachable" — what was on screen must stay.
 */
export async function outlastRetryRound(page: Page): Promise<void> {
  await page.waitForEvent('requestfailed', { predicate: (r) => r.url().endsWith('/api/auth/validate') });
  assert.equal(await page.getByRole('heading', { name: 'orloj is not reachable' }).count(), 0, 'a failed session check took the page down');
}

/** Saves a full-page screenshot as artifacts/screenshots/<name>.png. */
export async function saveScreenshot(page: Page, name: string): Promise<void> {
  fs.mkdirSync(SCREENSHOTS, { recursive: true });
  await page.screenshot({ path: path.join(SCREENSHOTS, `${name}.png`), fullPage: true });
}

/**
 * A page at 1440×900 in light mode, in a context of its own on `base`, whose
 * problems — a request to another host, a console error (but the 401 of the
 * signed-out session check, a request the host's network change aborted, and
 * while `down()` says the server is away on purpose, its refused requests), an
 * uncaught page error — are pushed onto
 * `problems` for the suite to fail on.
 */
export async function watchedPage(browser: Browser, base: string, wait: number, problems: string[], down: () => boolean = () => false): Promise<Page> {
  const context = await browser.newContext({ baseURL: base, viewport: { width: 1440, height: 900 }, colorScheme: 'light' });
  context.setDefaultTimeout(wait);
  context.on('request', (req) => {
    const url = new URL(req.url());
    if (url.origin !== base && url.protocol !== 'data:') problems.push(`request to another host: ${req.url()}`);
  });
  const page = await context.newPage();
  page.on('console', (msg) => {
    if (down() && /ERR_CONNECTION_REFUSED|ERR_CONNECTION_RESET|ERR_EMPTY_RESPONSE|Failed to load resource|EventSource/.test(msg.text())) return;
    // Chromium aborts the requests in flight when the host's network interfaces change: another
    // lane's compose suite adding or removing a bridge network (tier system-deploy). The page
    // asks again, as it would for a user whose network changed; what it then shows is tested.
    if (/net::ERR_NETWORK_CHANGED/.test(msg.text())) return;
    if (msg.type() === 'error' && !(/status of 401/.test(msg.text()) && msg.location().url.endsWith('/api/auth/validate'))) {
      problems.push(`console error: ${msg.text()} (${msg.location().url})`);
    }
  });
  page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
  return page;
}

/** A browser suite's teardown: the browser, the server, a local target and the data folder, whichever were started. */
export async function tearDown(parts: { browser?: Browser; orloj?: RunningOrloj; target?: { close(): unknown }; dataDir?: string }): Promise<void> {
  await parts.browser?.close();
  await stopOrloj(parts.orloj);
  parts.target?.close();
  if (parts.dataDir) fs.rmSync(parts.dataDir, { recursive: true, force: true });
}

/** The parts of a browser suite that `browserSuite` starts; read them in tests and in the suite's own hooks. */
export interface BrowserSuite {
  page: Page;
  /** The server's origin, `http://127.0.0.1:<port>`. */
  base: string;
  /** A local HTTP target answering `targetStatus()` (200 `ok` unless told), for HTTP checks (RUNNER_ALLOW_TARGETS covers it). */
  endpoint: string;
  /** What the watched page reported; a test that expects some removes them before its end. */
  problems: string[];
  /** `callApi` through the page's session. */
  api: (method: 'GET' | 'POST', route: string, body?: unknown) => Promise<any>;
  /** The server's DATA_DIR (its SQLite database is `orloj.db` there), for history a test cannot wait for. */
  dataDir: string;
}

/**
 * Registers, in the calling describe, the hooks most browser suites repeat: in
 * `before`, a local target (answering `targetStatus()`, 200 unless told),
 * `orloj start` on a fresh data folder (`env` added),
 * Chromium and a watched page; after each test, a failure for what the page
 * reported; in `after`, the teardown. The suite's own `before` runs after it.
 */
export function browserSuite(name: string, wait: number, env: Record<string, string> = {}, targetStatus: () => number = () => 200): BrowserSuite {
  const suite = { problems: [] as string[] } as BrowserSuite;
  const parts: { orloj?: RunningOrloj; dataDir?: string; browser?: Browser; target?: http.Server } = {};
  suite.api = (method, route, body) => callApi(suite.page, suite.base, method, route, body);
  before(async function () {
    needBrowser(this);
    parts.target = http.createServer((_req, res) => {
      res.statusCode = targetStatus();
      res.end(res.statusCode < 400 ? 'ok' : 'broken');
    });
    await new Promise<void>((r) => parts.target!.listen(0, '127.0.0.1', r));
    suite.endpoint = `http://127.0.0.1:${(parts.target.address() as AddressInfo).port}/ok`;
    parts.dataDir = suite.dataDir = fs.mkdtempSync(path.join(os.tmpdir(), `orloj-dashboard-${name}-`));
    parts.orloj = await startOrloj({ DATA_DIR: parts.dataDir, DASHBOARD_DIR: DASHBOARD_DIST, RUNNER_ALLOW_TARGETS: '127.0.0.0/8', ...env });
    suite.base = `http://127.0.0.1:${parts.orloj.port}`;
    parts.browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
    suite.page = await watchedPage(parts.browser, suite.base, wait, suite.problems);
  });
  afterEach(function () {
    if (suite.problems.length) assert.fail(suite.problems.splice(0).join('\n'));
  });
  after(() => tearDown(parts));
  return suite;
}
