/**
 * Issue 26 in a real browser against a real `orloj start` with real
 * scheduling: a HEARTBEAT check with the alert policy "down after 2 failed
 * runs" fails once (no incident), twice (an incident opens); the bell's
 * drawer lists it first, where it is acknowledged and snoozed; the workflow
 * page lists it and, after the next completed run, shows it closed as
 * recovered. A CONTAINER workflow whose image cannot be pulled shows why its
 * build failed, and the analytics page reports reliability with a CSV
 * download. axe-core must find each view clean in light and dark.
 * Screenshots land in artifacts/screenshots/ (dashboard/README.md).
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { chromium, type Browser, type Page } from 'playwright-core';
import { requireServices, services } from '@orloj/common/test-support';
import { axeViolations } from './support/axe.js';
import { CHROMIUM, CHROMIUM_ARGS, DASHBOARD_DIST, callApi, pollUntil, saveScreenshot, startOrloj, stopOrloj, watchedPage, type RunningOrloj } from './support/orloj.js';

const WAIT = Number(process.env.E2E_WAIT) || 90_000;
function missing(): string | undefined {
  if (!fs.existsSync(CHROMIUM)) return `no Chromium at ${CHROMIUM} (scripts/test.sh installs Debian's chromium)`;
  if (!fs.existsSync(path.join(DASHBOARD_DIST, 'index.html'))) return 'the dashboard is not built (npm run build)';
  return undefined;
}

describe('dashboard: incidents in the inbox and on the workflow page, a failed build says why, in a real browser', function () {
  this.timeout(4 * WAIT);
  let orloj: RunningOrloj | undefined;
  let dataDir: string | undefined;
  let browser: Browser | undefined;
  let page: Page;
  let base: string;
  let target: http.Server | undefined;
  let targetUp = false;
  let email: string;
  let checkId: string;
  const problems: string[] = [];

  const api = (method: 'GET' | 'POST', route: string, body?: unknown): Promise<any> => callApi(page, base, method, route, body);
  const until = <T>(what: string, read: () => Promise<T>, done: (v: T) => boolean): Promise<T> => pollUntil(WAIT, what, read, done);
  async function runNow(workflowId: string): Promise<{ status: string }> {
    const { id } = (await api('POST', `/workflows/${workflowId}/jobs/schedule`)) as { id: string };
    return until('the run to finish', () => api('GET', `/workflows/${workflowId}/jobs/${id}`), (j) => ['COMPLETED', 'FAILED', 'CANCELED'].includes(j.status));
  }
  async function axeClean(what: string, shot: string): Promise<void> {
    for (const scheme of ['light', 'dark'] as const) {
      await page.emulateMedia({ colorScheme: scheme });
      assert.deepEqual(await axeViolations(page), [], `${what} in ${scheme}`);
      await saveScreenshot(page, `${shot}-${scheme}`);
    }
    await page.emulateMedia({ colorScheme: 'light' });
  }

  before(async function () {
    const why = missing();
    if (why) {
      if (requireServices) throw new Error(`REQUIRE_SERVICES=1 but ${why}`);
      this.skip();
    }
    target = http.createServer((_req, res) => {
      res.statusCode = targetUp ? 200 : 500;
      res.end(targetUp ? 'ok' : 'broken');
    });
    await new Promise<void>((r) => target!.listen(0, '127.0.0.1', r));
    const endpoint = `http://127.0.0.1:${(target.address() as AddressInfo).port}/`;
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'orloj-dashboard-incidents-'));
    orloj = await startOrloj({
      DATA_DIR: dataDir,
      PORT: '0',
      DASHBOARD_DIR: DASHBOARD_DIST,
      RUNNER_ALLOW_TARGETS: '127.0.0.0/8',
      RATE_LIMIT_ENABLED: 'false',
      ...(services.docker ? { DOCKER_HOST: services.docker } : {}),
    });
    base = `http://127.0.0.1:${orloj.port}`;
    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
    page = await watchedPage(browser, base, WAIT, problems);
    email = `incidents-${Date.now()}@example.com`;
    await api('POST', '/auth/register', { email, password: 'correct horse battery' });
    ({ id: checkId } = (await api('POST', '/workflows', {
      name: 'flaky check',
      kind: 'HEARTBEAT',
      payload: JSON.stringify({ endpoint, timeout: '5s' }),
      interval: 600,
      max_consecutive_job_failures_allowed: 10,
      alert_after_failures: 2,
    })) as { id: string });
    await until('the check built', () => api('GET', `/workflows/${checkId}`), (w) => w.build_status === 'COMPLETED');
    assert.equal((await runNow(checkId)).status, 'FAILED');
    assert.deepEqual((await api('GET', '/incidents')).incidents, [], 'one failure of two: no incident yet');
    assert.equal((await runNow(checkId)).status, 'FAILED');
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

  it('lists the open incident first in the inbox, acknowledges and snoozes it there', async () => {
    await page.goto('/workflows');
    const bell = page.getByRole('button', { name: /, 1 open incident$/ });
    await bell.waitFor();
    await bell.click();
    const drawer = page.getByRole('dialog', { name: 'Notifications' });
    const section = drawer.getByRole('region', { name: /^Open incidents/ });
    const incident = section.locator('li.incident');
    await incident.waitFor();
    assert.equal(await section.getByRole('heading').textContent(), 'Open incidents (1)');
    assert.equal(await incident.locator('strong').textContent(), 'flaky check is down');
    assert.match((await incident.locator('p').first().textContent()) ?? '', /^2 failed runs, down for .+ First failure: The endpoint answered with status 500; expected 200\.$/);
    // Open incidents come before the notifications.
    const order = await drawer.locator('li.incident, li.notification').evaluateAll((els) => els.map((e) => (e.classList.contains('incident') ? 'incident' : 'notification')));
    assert.equal(order[0], 'incident');
    await axeClean('the inbox with an open incident', '30-inbox-incident');

    await incident.getByRole('button', { name: 'Acknowledge' }).click();
    await incident.getByText(`Acknowledged by ${email}`).waitFor();
    await incident.getByRole('button', { name: 'Snooze 1 h' }).click();
    await incident.getByText(/^Snoozed until /).waitFor();
    assert.ok((await api('GET', '/incidents?status=open')).incidents[0].snoozed);
    await page.keyboard.press('Escape');
    // Acknowledged and snoozed: no longer counted on the bell.
    await page.getByRole('button', { name: /^Notifications, (?!.*open incident)/ }).waitFor();
  });

  it('lists the incident on the workflow page, and shows it recovered after the next completed run', async () => {
    await page.goto(`/workflows/${checkId}`);
    const table = page.getByRole('table', { name: 'Incidents' });
    await table.waitFor();
    const row = table.locator('tbody tr');
    assert.equal(await row.count(), 1);
    assert.match((await row.textContent()) ?? '', /open.*2.*status 500/);
    await page.getByText('down after 2 failed runs in a row, up after 1 completed').waitFor();
    await axeClean('the workflow page with an open incident', '31-workflow-incidents');

    targetUp = true;
    assert.equal((await runNow(checkId)).status, 'COMPLETED');
    await until('the incident closed', () => api('GET', `/workflows/${checkId}/incidents`), (p) => p.incidents[0].status === 'closed');
    await page.reload();
    await table.locator('tbody tr').getByText('recovered').waitFor();
  });

  it('says why a build failed on the workflow page', async () => {
    const { id } = (await api('POST', '/workflows', {
      name: 'unpullable',
      kind: 'CONTAINER',
      payload: JSON.stringify({ image: 'docker.io/acme/does-not-exist:1.0' }),
      interval: 60,
      max_consecutive_job_failures_allowed: 3,
    })) as { id: string };
    const w = await until('the build failed', () => api('GET', `/workflows/${id}`), (x) => x.build_status === 'FAILED');
    assert.ok(w.build_error, 'the api says why');
    if (services.docker) assert.equal(w.build_error, 'The container image could not be found or pulled.');
    await page.goto(`/workflows/${id}`);
    const callout = page.getByRole('region', { name: 'The build failed' });
    await callout.waitFor();
    assert.equal(await callout.locator('.build-error').textContent(), w.build_error);
    await axeClean('a failed build with its reason', '32-build-failed-reason');
  });

  it('reports reliability over a period on the analytics page, with a CSV download', async () => {
    await page.goto('/analytics');
    const table = page.getByRole('table', { name: 'Reliability per workflow' });
    const row = table.locator('tbody tr', { hasText: 'flaky check' });
    await row.waitFor();
    // F F C: one of three runs completed; one incident, now closed.
    assert.match((await row.textContent()) ?? '', /33\.33 %/);
    await page.getByLabel('Period').selectOption('7d');
    await page.getByRole('link', { name: 'Download CSV' }).and(page.locator('[download="orloj-reliability-7d.csv"]')).waitFor();
    await axeClean('the reliability report', '33-reliability-report');
    const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('link', { name: 'Download CSV' }).click()]);
    const csv = fs.readFileSync((await download.path())!, 'utf8').split('\r\n');
    assert.equal(csv[0], 'workflow_id,workflow_name,runs,failures,uptime_percent,p50_ms,p95_ms,p99_ms,incidents,downtime_ms');
    assert.match(csv.find((l) => l.includes('"flaky check"')) ?? '', new RegExp(`^"${checkId}","flaky check",3,2,33\\.333,`));
  });
});
