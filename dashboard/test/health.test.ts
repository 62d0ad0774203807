/**
 * The workflow list at a glance, in a real browser against a real `orloj
 * start` with real scheduling: HEARTBEAT workflows run against a local target
 * (one healthy, one failing, one failing until the failure limit terminates
 * it), then the list must show the failing one down and first, call out the
 * auto-terminated one, and keep terminated ones reachable. Screenshots land in
 * artifacts/screenshots/ (dashboard/README.md).
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { chromium, type Browser, type Page } from 'playwright-core';
import { openDatabase, Store } from '@orloj/common/store';
import { axeViolations } from './support/axe.js';
import { CHROMIUM, CHROMIUM_ARGS, DASHBOARD_DIST, SCREENSHOTS, callApi, outlastRetryRound, pollUntil, startOrloj, stopOrloj, watchedPage, type RunningOrloj, needBrowser, runNow as runJobNow } from './support/orloj.js';

const WAIT = Number(process.env.E2E_WAIT) || 90_000;
/** /ok answers 200 after a few milliseconds, /fail answers 500. */
async function target(): Promise<{ server: http.Server; base: string }> {
  const server = http.createServer((req, res) => {
    if (req.url?.startsWith('/fail')) {
      res.statusCode = 500;
      res.end('broken');
      return;
    }
    setTimeout(() => res.end('ok'), 15); // a target that takes time to answer: the chart has a response time to show
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, base: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

describe('dashboard: workflows at a glance, in a real browser', function () {
  this.timeout(6 * WAIT);
  let orloj: RunningOrloj | undefined;
  let dataDir: string | undefined;
  let browser: Browser | undefined;
  let page: Page;
  let base: string;
  let http0: { server: http.Server; base: string } | undefined;
  const problems: string[] = [];
  const ids: Record<string, string> = {};
  let orlojEnv: Record<string, string> = {};
  /** While the server is down on purpose, the browser's failed requests are expected. */
  let serverDown = false;

  const shot = async (name: string) => {
    fs.mkdirSync(SCREENSHOTS, { recursive: true });
    await page.screenshot({ path: path.join(SCREENSHOTS, `${name}.png`), fullPage: true });
  };

  const api = (method: 'GET' | 'POST', route: string, body?: unknown): Promise<any> => callApi(page, base, method, route, body);
  const until = <T>(what: string, read: () => Promise<T>, done: (v: T) => boolean): Promise<T> => pollUntil(WAIT, what, read, done);

  async function createCheck(name: string, endpoint: string, maxFailures: number): Promise<string> {
    const { id } = (await api('POST', '/workflows', {
      name,
      kind: 'HEARTBEAT',
      payload: JSON.stringify({ endpoint, timeout: '5s' }),
      interval: 600,
      max_consecutive_job_failures_allowed: maxFailures,
    })) as { id: string };
    await until(`${name} built`, () => api('GET', `/workflows/${id}`), (w) => w.build_status === 'COMPLETED');
    return id;
  }

  /** Runs the workflow now, and waits for the run to finish. */
  const runNow = (workflowId: string) => runJobNow(page, base, workflowId, WAIT);

  before(async function () {
    needBrowser(this);
    http0 = await target();
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'orloj-dashboard-health-'));
    // A fixed free port: the last step stops this server and starts it again where the page expects it.
    const probe = http.createServer();
    await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r));
    const port = (probe.address() as AddressInfo).port;
    await new Promise((r) => probe.close(r));
    orlojEnv = {
      DATA_DIR: dataDir,
      PORT: String(port),
      DASHBOARD_DIR: DASHBOARD_DIST,
      RUNNER_ALLOW_TARGETS: '127.0.0.0/8',
      RATE_LIMIT_ENABLED: 'false',
    };
    orloj = await startOrloj(orlojEnv);
    base = `http://127.0.0.1:${orloj.port}`;
    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
    page = await watchedPage(browser, base, WAIT, problems, () => serverDown);

    await api('POST', '/auth/register', { email: `glance-${Date.now()}@example.com`, password: 'correct horse battery' });
    ids.doomed = await createCheck('doomed check', `${http0.base}/fail?doomed`, 3);
    ids.failing = await createCheck('failing check', `${http0.base}/fail`, 10);
    ids.healthy = await createCheck('healthy check', `${http0.base}/ok`, 3);
    for (let i = 0; i < 3; i++) await runNow(ids.doomed);
    await runNow(ids.failing);
    for (let i = 0; i < 2; i++) await runNow(ids.healthy);
    await until('doomed terminated automatically', () => api('GET', `/workflows/${ids.doomed}?include=health`), (w) => w.health?.auto_terminated === true);
    // Missed runs take an interval of downtime (a minute at least) to happen for real: recorded here as the
    // scheduler records them (recordSkippedSlots), through a second connection to the server's own database.
    const db = openDatabase(`sqlite:${path.join(dataDir, 'orloj.db')}`);
    try {
      await Store.fromHandle(db).workflows.recordSkippedSlots([{ id: ids.healthy, skipped: 3, at: Date.now() - 5 * 60_000 }]);
    } finally {
      await db.close();
    }
  });

  afterEach(function () {
    if (problems.length) assert.fail(problems.splice(0).join('\n'));
  });

  after(async () => {
    await browser?.close();
    await stopOrloj(orloj);
    http0?.server.close();
    if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('shows a failing check down and first, and calls out the auto-terminated one', async () => {
    await page.goto('/workflows');
    const table = page.getByRole('table', { name: 'Workflows' });
    const rows = table.locator('tbody tr');
    await table.getByRole('link', { name: 'healthy check' }).waitFor();
    assert.deepEqual(
      (await rows.locator('td[data-label="Name"] a').allTextContents()).slice(0, 2).sort(),
      ['doomed check', 'failing check'],
      'the two down workflows come first',
    );
    const failing = rows.filter({ has: page.getByRole('link', { name: 'failing check' }) });
    await failing.locator('.state', { hasText: 'Down' }).waitFor();
    const doomed = rows.filter({ has: page.getByRole('link', { name: 'doomed check' }) });
    await doomed.getByText('terminated automatically').waitFor();
    const callout = page.getByRole('region', { name: 'Terminated automatically' });
    await callout.getByRole('link', { name: 'doomed check' }).waitFor();
    assert.equal(await callout.getByRole('link', { name: 'failing check' }).count(), 0);

    const healthy = rows.filter({ has: page.getByRole('link', { name: 'healthy check' }) });
    await healthy.locator('.state', { hasText: 'Up' }).waitFor();
    await healthy.getByRole('img', { name: 'Last 2 runs: 0 failed; latest completed' }).waitFor();
    await healthy.getByText('100 %').waitFor();
    const lastRun = healthy.locator('td[data-label="Last run"] time');
    assert.match((await lastRun.textContent()) ?? '', /ago|now/);
    assert.match((await lastRun.getAttribute('title')) ?? '', /\d{4}.*\d:\d\d/, 'the absolute time on hover');
    assert.match((await healthy.locator('td[data-label="Next run"] time').textContent()) ?? '', /^in /);
    // The missed runs of the last 24 hours: a compact mark, the absolute time with its zone on hover.
    const mark = healthy.locator('.missed-mark');
    assert.match((await mark.textContent()) ?? '', /^missed \d+ min\.? ago$/);
    assert.match((await mark.getAttribute('title')) ?? '', /^3 missed runs\./);
    assert.match((await mark.locator('time').getAttribute('title')) ?? '', /\d{4}.*\d:\d\d:\d\d.*(UTC|GMT)/, 'the absolute time and its zone on hover');
    assert.equal(await rows.locator('.missed-mark').count(), 1, 'only the workflow that missed runs is marked');
    await shot('20-workflows-at-a-glance');
  });

  it('puts the state changes on the bell and at the top of the drawer, routine notifications one click away', async () => {
    await page.goto('/workflows');
    // Two workflows went down (the first failure of each) and one was terminated automatically: three state changes.
    // The doomed one's second and third failures, 2 completions and 3 builds are routine.
    const bell = page.getByRole('button', { name: /^Notifications, 3 alerts, \d+ unread(, \d+ open incidents?)?$/ });
    await bell.waitFor();
    assert.equal(await page.getByTestId('unread-count').textContent(), '3');
    await bell.click();
    const drawer = page.getByRole('dialog', { name: 'Notifications' });
    assert.equal(await drawer.getByRole('button', { name: 'State changes' }).getAttribute('aria-pressed'), 'true');
    const items = drawer.locator('li.notification');
    await items.first().waitFor();
    assert.equal(await items.count(), 3);
    assert.deepEqual((await items.locator('strong').allTextContents()).sort(), ['Job failed', 'Job failed', 'Workflow terminated automatically']);
    assert.deepEqual((await items.locator('.notification-tag').allTextContents()).sort(), ['down', 'down', 'terminated']);
    await shot('24-notifications-alerts');
    await drawer.getByRole('button', { name: 'Everything else' }).click();
    await drawer.locator('li.notification strong', { hasText: 'Job completed' }).first().waitFor();
    // Every failure keeps its notification: those of a workflow already down are routine.
    assert.equal(await drawer.locator('li.notification strong', { hasText: 'Job failed' }).count(), 2);
    assert.equal(await drawer.locator('li.notification .notification-tag').count(), 0);
    await page.keyboard.press('Escape');
  });

  it('keeps terminated workflows reachable: All, and Terminated only', async () => {
    await page.goto('/workflows');
    const table = page.getByRole('table', { name: 'Workflows' });
    await table.getByRole('link', { name: 'healthy check' }).waitFor();
    await page.getByLabel('Show').selectOption('terminated');
    await table.getByRole('link', { name: 'doomed check' }).waitFor();
    await table.getByRole('link', { name: 'healthy check' }).waitFor({ state: 'detached' });
    await page.getByLabel('Show').selectOption('all');
    await table.getByRole('link', { name: 'healthy check' }).waitFor();
    assert.equal(await table.locator('tbody tr').count(), 3);
    await page.getByLabel('Order').selectOption('newest');
    // The server orders (issue 26): the new order comes with the next response.
    await until(
      'the newest first',
      () => table.locator('tbody tr td[data-label="Name"] a').allTextContents(),
      (names) => JSON.stringify(names) === JSON.stringify(['healthy check', 'failing check', 'doomed check']),
    );
  });

  it("shows a HEARTBEAT workflow's request, response-time chart and uptime, and each job's response", async () => {
    await page.goto(`/workflows/${ids.healthy}`);
    await page.getByRole('heading', { level: 1, name: 'healthy check' }).waitFor();
    await page.locator('.page-head .target', { hasText: `GET ${http0!.base}/ok` }).waitFor();
    await page.locator('.page-head .state', { hasText: 'Up' }).waitFor();
    const chart = page.getByRole('img', { name: /^Response time of the last 2 checks: median \d+ ms/ });
    await chart.waitFor();
    assert.equal(await page.locator('.response-chart circle.chart-point').count(), 2, 'one point per check');
    const label = (await chart.getAttribute('aria-label')) ?? '';
    const slowest = Number(/slowest (\d+) ms/.exec(label)?.[1]);
    assert.ok(slowest >= 15, `the target answers after 15 ms; the chart says ${label}`);
    const health = page.getByRole('group', { name: 'Health' }).or(page.locator('dl[aria-label="Health"]'));
    await health.getByText('100 %').waitFor();
    const missed = health.locator('.missed');
    assert.match((await missed.textContent()) ?? '', /^3 missed, the last \d+ min\.? ago$/);
    assert.match((await missed.locator('time').getAttribute('title')) ?? '', /\d{4}.*\d:\d\d:\d\d.*(UTC|GMT)/);
    const definition = page.locator('dl[aria-label="Definition"]');
    await definition.getByText(`${http0!.base}/ok`).waitFor();
    await definition.getByText('Expected status').waitFor();
    await shot('22-heartbeat-workflow');

    await page.goto(`/workflows/${ids.failing}`);
    await page.getByRole('table', { name: 'Jobs' }).getByText(/HTTP 500 in \d+ ms/).waitFor();
    await page.locator('.response-chart rect.chart-point-bad').first().waitFor();
    await page.getByRole('table', { name: 'Jobs' }).getByRole('link').first().click();
    await page.getByRole('heading', { level: 1, name: 'Job' }).waitFor();
    await page.locator('dl').getByText(/^HTTP 500 in \d+ ms$/).waitFor();
    await page.locator('dl').getByText(`GET ${http0!.base}/fail`).waitFor();
    await shot('23-heartbeat-job-failed');
  });

  it('shows every error of a form with several bad fields at once, without sending it', async () => {
    await page.goto('/workflows/new');
    await page.getByRole('heading', { level: 1, name: 'New workflow' }).waitFor();
    await page.getByLabel('Interval (minutes)').fill('0');
    await page.getByLabel('Failures before terminating').fill('1000');
    await page.getByLabel('Endpoint URL').fill('not a url');
    await page.getByLabel('Expected status code').fill('999');
    await page.getByLabel('Timeout').fill('10 minutes');
    let posted = 0;
    const count = (req: { method(): string; url(): string }) => {
      if (req.method() === 'POST' && req.url().endsWith('/api/workflows')) posted++;
    };
    page.on('request', count);
    await page.getByRole('button', { name: 'Create workflow' }).click();
    const expected: [string, string][] = [
      ['name', 'must not be empty'],
      ['interval', 'must be at least 1'],
      ['maxFailures', 'must be at most 100'],
      ['endpoint', 'must be an absolute http or https URL'],
      ['expectedStatus', 'must be at most 599'],
      ['timeout', 'must be a positive duration such as "10s" or "1m30s"'],
    ];
    for (const [field, message] of expected) await page.locator(`#wf-${field}-error`, { hasText: message }).waitFor();
    assert.equal(await page.locator('.field-error').count(), expected.length);
    assert.equal(await page.evaluate<string>('document.activeElement.id'), 'wf-name', 'the first field in error has the focus');
    page.off('request', count);
    assert.equal(posted, 0);
    await shot('25-workflow-new-every-error');
  });

  it('has no axe-core violations (WCAG 2.1 AA) on any page, in light and dark', async () => {
    const failingJob = ((await api('GET', `/workflows/${ids.failing}/jobs`)) as { jobs: { id: string }[] }).jobs[0]!.id;
    const pages: [name: string, path: string, ready: (p: Page) => Promise<void>][] = [
      ['workflows', '/workflows', (p) => p.getByRole('table', { name: 'Workflows' }).getByRole('link', { name: 'healthy check' }).waitFor()],
      ['workflows-all', '/workflows?show=all', (p) => p.getByRole('table', { name: 'Workflows' }).getByRole('link', { name: 'doomed check' }).waitFor()],
      ['workflow', `/workflows/${ids.healthy}`, (p) => p.locator('.response-chart svg').waitFor()],
      ['workflow-terminated', `/workflows/${ids.doomed}`, (p) => p.getByRole('table', { name: 'Jobs' }).waitFor()],
      ['job', `/workflows/${ids.failing}/jobs/${failingJob}`, (p) => p.locator('dl').getByText(/^HTTP 500/).waitFor()],
      ['new-workflow', '/workflows/new', (p) => p.getByRole('heading', { level: 1, name: 'New workflow' }).waitFor()],
      ['edit-workflow', `/workflows/${ids.healthy}/edit`, (p) => p.getByLabel('Endpoint URL').waitFor()],
      ['profile', '/profile', (p) => p.getByRole('heading', { level: 1, name: 'Profile' }).waitFor()],
      ['analytics', '/analytics', (p) => p.getByRole('heading', { level: 1, name: 'Analytics' }).waitFor()],
    ];
    const found: string[] = [];
    for (const scheme of ['light', 'dark'] as const) {
      await page.emulateMedia({ colorScheme: scheme });
      for (const [name, route, ready] of pages) {
        await page.goto(route);
        await ready(page);
        for (const v of await axeViolations(page)) found.push(`${name} (${scheme}): ${v}`);
        await shot(`30-desktop-${scheme}-${name}`);
      }
      await page.goto('/workflows');
      await page.getByRole('button', { name: /^Notifications/ }).click();
      await page.getByRole('dialog', { name: 'Notifications' }).locator('li.notification').first().waitFor();
      for (const v of await axeViolations(page)) found.push(`notifications (${scheme}): ${v}`);
      await shot(`30-desktop-${scheme}-notifications`);
      await page.keyboard.press('Escape');

      // Signed out: a context of its own.
      const anonymous = await browser!.newContext({ baseURL: base, colorScheme: scheme });
      const signIn = await anonymous.newPage();
      await signIn.goto('/');
      await signIn.getByRole('heading', { level: 1, name: 'Sign in to orloj' }).waitFor();
      for (const v of await axeViolations(signIn)) found.push(`sign-in (${scheme}): ${v}`);
      await signIn.getByRole('link', { name: 'Create an account' }).click();
      await signIn.getByRole('button', { name: 'Sign up' }).waitFor();
      for (const v of await axeViolations(signIn)) found.push(`sign-up (${scheme}): ${v}`);
      await anonymous.close();
    }
    await page.emulateMedia({ colorScheme: 'light' });
    assert.deepEqual(found, []);
  });

  it('shows compact rows on a phone, in light and dark', async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    for (const scheme of ['light', 'dark'] as const) {
      await page.emulateMedia({ colorScheme: scheme });
      await page.goto('/workflows');
      await page.getByRole('table', { name: 'Workflows' }).getByRole('link', { name: 'healthy check' }).waitFor();
      const overflow = await page.evaluate<number>('document.documentElement.scrollWidth - document.documentElement.clientWidth');
      assert.ok(overflow <= 0, `the list (${scheme}) scrolls sideways by ${overflow}px`);
      await shot(`21-workflows-at-a-glance-phone-${scheme}`);
      await page.goto(`/workflows/${ids.healthy}`);
      await page.locator('.response-chart svg').waitFor();
      const pageOverflow = await page.evaluate<number>('document.documentElement.scrollWidth - document.documentElement.clientWidth');
      assert.ok(pageOverflow <= 0, `the workflow page (${scheme}) scrolls sideways by ${pageOverflow}px`);
      await shot(`31-phone-${scheme}-workflow`);
    }
    await page.setViewportSize({ width: 1440, height: 900 });
    await page.emulateMedia({ colorScheme: 'light' });
  });

  it('keeps an open job page through a server restart, saying it is disconnected until it is back', async () => {
    const job = ((await api('GET', `/workflows/${ids.healthy}/jobs`)) as { jobs: { id: string }[] }).jobs[0]!.id;
    await page.goto(`/workflows/${ids.healthy}/jobs/${job}`);
    const response = page.locator('dl').getByText(/^HTTP 200 in \d+ ms$/);
    await response.waitFor();
    serverDown = true;
    await stopOrloj(orloj);
    const banner = page.getByRole('status').filter({ hasText: 'Disconnected — retrying' });
    await banner.waitFor();
    await outlastRetryRound(page);
    assert.equal(await response.count(), 1, 'what was on screen stays');
    assert.equal(await page.getByText('The server cannot be reached').count(), 0);
    await shot('26-job-disconnected');
    orloj = await startOrloj(orlojEnv);
    await banner.waitFor({ state: 'detached' });
    serverDown = false;
    await response.waitFor();
    await page.getByRole('link', { name: 'healthy check' }).click();
    await page.getByRole('heading', { level: 1, name: 'healthy check' }).waitFor();
  });

  it('keeps the Analytics page through a server restart, its totals and charts under the disconnected banner', async () => {
    await page.goto('/analytics');
    await page.getByRole('heading', { level: 1, name: 'Analytics' }).waitFor();
    const chart = page.getByRole('img', { name: /^Jobs per kind/ });
    await chart.waitFor();
    const totals = page.locator('dl[aria-label="Totals"]');
    const shown = await totals.textContent();
    assert.match(shown ?? '', /Jobs run\s*6/, 'the runs of the three checks');
    serverDown = true;
    await stopOrloj(orloj);
    const banner = page.getByRole('status').filter({ hasText: 'Disconnected — retrying' });
    await banner.waitFor();
    await outlastRetryRound(page);
    assert.equal(await totals.textContent(), shown, 'the totals stay as they were');
    assert.equal(await chart.count(), 1, 'the charts stay');
    assert.equal(await page.getByText('The server cannot be reached').count(), 0);
    assert.equal(await page.locator('.error-text').count(), 0);
    for (const scheme of ['light', 'dark'] as const) {
      await page.emulateMedia({ colorScheme: scheme });
      assert.deepEqual(await axeViolations(page), [], `the banner over Analytics in ${scheme}`);
    }
    await page.emulateMedia({ colorScheme: 'light' });
    await shot('28-analytics-disconnected');
    orloj = await startOrloj(orlojEnv);
    await banner.waitFor({ state: 'detached' });
    serverDown = false;
    await chart.waitFor();
    assert.equal(await totals.textContent(), shown);
  });
});
