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
import { services } from '@orloj/common/test-support';
import { assertAxeCleanInBothSchemes } from './support/axe.js';
import { browserSuite, pollUntil, runNow as runJobNow, saveScreenshot } from './support/orloj.js';

const WAIT = Number(process.env.E2E_WAIT) || 90_000;

describe('dashboard: incidents in the inbox and on the workflow page, a failed build says why, in a real browser', function () {
  this.timeout(4 * WAIT);
  /** The target answers 500 until this is set. */
  let targetUp = false;
  const suite = browserSuite('incidents', WAIT, { RATE_LIMIT_ENABLED: 'false', ...(services.docker ? { DOCKER_HOST: services.docker } : {}) }, () => (targetUp ? 200 : 500));
  const { api } = suite;
  let email: string;
  let checkId: string;

  const until = <T>(what: string, read: () => Promise<T>, done: (v: T) => boolean): Promise<T> => pollUntil(WAIT, what, read, done);
  const runNow = (workflowId: string): Promise<{ status: string }> => runJobNow(suite.page, suite.base, workflowId, WAIT);
  const axeClean = (what: string, shot: string) => assertAxeCleanInBothSchemes(suite.page, what, shot, saveScreenshot);

  before(async () => {
    email = `incidents-${Date.now()}@example.com`;
    await api('POST', '/auth/register', { email, password: 'correct horse battery' });
    ({ id: checkId } = (await api('POST', '/workflows', {
      name: 'flaky check',
      kind: 'HEARTBEAT',
      payload: JSON.stringify({ endpoint: suite.endpoint, timeout: '5s' }),
      interval: 600,
      max_consecutive_job_failures_allowed: 10,
      alert_after_failures: 2,
    })) as { id: string });
    await until('the check built', () => api('GET', `/workflows/${checkId}`), (w) => w.build_status === 'COMPLETED');
    assert.equal((await runNow(checkId)).status, 'FAILED');
    assert.deepEqual((await api('GET', '/incidents')).incidents, [], 'one failure of two: no incident yet');
    assert.equal((await runNow(checkId)).status, 'FAILED');
  });

  it('lists the open incident first in the inbox, acknowledges and snoozes it there', async () => {
    const { page } = suite;
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
    const { page } = suite;
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
    const { page } = suite;
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
    const { page } = suite;
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
