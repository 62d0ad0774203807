/**
 * A recovery on the bell, in a real browser against a real `orloj start` with
 * real scheduling: a HEARTBEAT check fails against a local target, the target
 * comes back and the next run completes; the bell must then name the
 * recovery next to the failure, the drawer must open on both (the state
 * changes) with the recovery tagged "recovered", and axe-core must find the
 * drawer clean in light and dark. Screenshots land in artifacts/screenshots/
 * (dashboard/README.md).
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { chromium, type Browser, type Page } from 'playwright-core';
import { axeViolations } from './support/axe.js';
import { CHROMIUM, CHROMIUM_ARGS, DASHBOARD_DIST, SCREENSHOTS, callApi, pollUntil, startOrloj, stopOrloj, type RunningOrloj, needBrowser, runNow as runJobNow, watchedPage } from './support/orloj.js';

const WAIT = Number(process.env.E2E_WAIT) || 90_000;
describe('dashboard: a recovery on the bell, in a real browser', function () {
  this.timeout(4 * WAIT);
  let orloj: RunningOrloj | undefined;
  let dataDir: string | undefined;
  let browser: Browser | undefined;
  let page: Page;
  let base: string;
  let target: http.Server | undefined;
  /** The target answers 500 until this is set. */
  let targetUp = false;
  const problems: string[] = [];

  const shot = async (name: string) => {
    fs.mkdirSync(SCREENSHOTS, { recursive: true });
    await page.screenshot({ path: path.join(SCREENSHOTS, `${name}.png`), fullPage: true });
  };
  const api = (method: 'GET' | 'POST', route: string, body?: unknown): Promise<any> => callApi(page, base, method, route, body);
  const until = <T>(what: string, read: () => Promise<T>, done: (v: T) => boolean): Promise<T> => pollUntil(WAIT, what, read, done);

  /** Runs the workflow now, and waits for the run to finish. */
  const runNow = (workflowId: string) => runJobNow(page, base, workflowId, WAIT);

  before(async function () {
    needBrowser(this);
    target = http.createServer((_req, res) => {
      res.statusCode = targetUp ? 200 : 500;
      res.end(targetUp ? 'ok' : 'broken');
    });
    await new Promise<void>((r) => target!.listen(0, '127.0.0.1', r));
    const endpoint = `http://127.0.0.1:${(target.address() as AddressInfo).port}/`;
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'orloj-dashboard-recovered-'));
    orloj = await startOrloj({ DATA_DIR: dataDir, PORT: '0', DASHBOARD_DIR: DASHBOARD_DIST, RUNNER_ALLOW_TARGETS: '127.0.0.0/8', RATE_LIMIT_ENABLED: 'false' });
    base = `http://127.0.0.1:${orloj.port}`;
    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
    page = await watchedPage(browser, base, WAIT, problems);

    await api('POST', '/auth/register', { email: `recovered-${Date.now()}@example.com`, password: 'correct horse battery' });
    const { id } = (await api('POST', '/workflows', {
      name: 'flapping check',
      kind: 'HEARTBEAT',
      payload: JSON.stringify({ endpoint, timeout: '5s' }),
      interval: 600,
      max_consecutive_job_failures_allowed: 5,
    })) as { id: string };
    await until('the check built', () => api('GET', `/workflows/${id}`), (w) => w.build_status === 'COMPLETED');
    assert.equal((await runNow(id)).status, 'FAILED');
    targetUp = true;
    assert.equal((await runNow(id)).status, 'COMPLETED');
    assert.equal((await runNow(id)).status, 'COMPLETED', 'a second success is no second recovery');
  });

  afterEach(function () {
    if (problems.length) assert.fail(problems.splice(0).join('\n'));
  });

  after(async () => {
    await browser?.close();
    await stopOrloj(orloj);
    target?.close();
    if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('names the recovery on the bell and lists it, tagged, with the failure it ended', async () => {
    await page.goto('/workflows');
    // The failure is still unread: the counter stays red with it, the label names both.
    const bell = page.getByRole('button', { name: /^Notifications, 1 alert, 1 recovered, \d+ unread(, \d+ open incidents?)?$/ });
    await bell.waitFor();
    assert.equal(await page.getByTestId('unread-count').textContent(), '1');
    await bell.click();
    const drawer = page.getByRole('dialog', { name: 'Notifications' });
    const items = drawer.locator('li.notification');
    await drawer.locator('li.notification-recovered').waitFor();
    assert.deepEqual((await items.locator('strong').allTextContents()).sort(), ['Job failed', 'Workflow recovered']);
    const recovered = drawer.locator('li.notification-recovered');
    assert.equal(await recovered.locator('.notification-tag').textContent(), 'recovered');
    // The failure before it turned the check down: a state change too, tagged so.
    assert.equal(await drawer.locator('li.notification-error .notification-tag').textContent(), 'down');
    assert.match((await recovered.locator('p').textContent()) ?? '', /"flapping check" is up again: a job completed after 1 consecutive failed job\./);

    for (const scheme of ['light', 'dark'] as const) {
      await page.emulateMedia({ colorScheme: scheme });
      assert.deepEqual(await axeViolations(page), [], `the drawer in ${scheme}`);
      await shot(`27-notifications-recovered-${scheme}`);
    }
    await page.emulateMedia({ colorScheme: 'light' });

    // Read the failure: the recovery alone is counted, in green.
    await drawer.locator('li.notification-error').getByRole('button', { name: 'Mark read' }).click();
    await page.keyboard.press('Escape');
    const green = page.getByRole('button', { name: /^Notifications, 1 recovered, \d+ unread(, \d+ open incidents?)?$/ });
    await green.waitFor();
    assert.match((await page.getByTestId('unread-count').getAttribute('class')) ?? '', /bell-count-recovered/);
    for (const scheme of ['light', 'dark'] as const) {
      await page.emulateMedia({ colorScheme: scheme });
      assert.deepEqual(await axeViolations(page), [], `the bell's green counter in ${scheme}`);
    }
    await page.emulateMedia({ colorScheme: 'light' });
  });
});
