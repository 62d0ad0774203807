/**
 * Schedules in a real browser against a real `orloj start` (issue 25): the
 * form's cron fields and their preview of the next runs, pause and resume on
 * the workflow page, Paused in the list's filter, the slot timeline; axe-clean
 * in light and dark.
 */
import assert from 'node:assert/strict';
import type { Page } from 'playwright-core';
import { axeViolations } from './support/axe.js';
import { browserSuite, pollUntil, saveScreenshot } from './support/orloj.js';

const WAIT = Number(process.env.E2E_WAIT) || 90_000;

describe('dashboard: schedules, in a real browser', function () {
  this.timeout(6 * WAIT);
  const suite = browserSuite('schedules', WAIT, { RATE_LIMIT_ENABLED: 'false' });
  let page: Page;
  let endpoint: string;
  let workflowId = '';

  const shot = (name: string) => saveScreenshot(page, name);
  const api = (method: 'GET' | 'POST', route: string, body?: unknown): Promise<any> => suite.api(method, route, body);

  before(async () => {
    ({ page, endpoint } = suite);
    await api('POST', '/auth/register', { email: `schedules-${Date.now()}@example.com`, password: 'correct horse battery' });
  });

  it('creates a cron workflow in a time zone, after previewing its next five runs there and in the viewer’s zone', async () => {
    await page.goto('/workflows/new');
    await page.getByRole('heading', { level: 1, name: 'New workflow' }).waitFor();
    await page.getByLabel('Name').fill('every minute in Adelaide');
    await page.getByLabel('Endpoint URL').fill(endpoint);
    await page.getByLabel('Runs').selectOption('cron');
    await page.getByLabel('Cron expression').fill('* * * * *');
    await page.getByLabel('Time zone').fill('Australia/Adelaide');
    const preview = page.getByRole('table', { name: 'Next runs' });
    await preview.waitFor();
    assert.equal(await preview.locator('tbody tr').count(), 5);
    assert.match((await preview.locator('thead').textContent()) ?? '', /In Australia\/Adelaide/);
    assert.match((await preview.locator('tbody tr td').first().textContent()) ?? '', /GMT\+10:30|GMT\+9:30|ACDT|ACST/);
    await shot('40-workflow-new-cron-preview');
    await page.getByRole('button', { name: 'Create workflow' }).click();
    await page.getByRole('heading', { level: 1, name: 'every minute in Adelaide' }).waitFor();
    workflowId = page.url().split('/').pop()!;
    const facts = page.locator('dl.details');
    await facts.getByText('* * * * * (Australia/Adelaide)').waitFor();
  });

  it('pauses and resumes from the workflow page; the list shows it under the Paused state, counted by the server', async () => {
    await page.goto(`/workflows/${workflowId}`);
    await page.getByRole('button', { name: 'Pause' }).click();
    await page.locator('.page-head').getByText('paused', { exact: true }).waitFor();
    await page.locator('dl.details dt', { hasText: 'Paused' }).waitFor();
    const read = await api('GET', `/workflows/${workflowId}`);
    assert.ok(read.paused_at);
    await page.goto('/workflows');
    const paused = page.getByRole('group', { name: 'Workflows by state' }).getByRole('button', { name: /^Paused/ });
    await paused.getByText('1', { exact: true }).waitFor();
    await paused.click();
    await page.waitForURL(/attention=paused/);
    const table = page.getByRole('table', { name: 'Workflows' });
    await table.getByRole('link', { name: 'every minute in Adelaide' }).waitFor();
    await table.locator('.state', { hasText: 'Paused' }).waitFor();
    await page.goto(`/workflows/${workflowId}`);
    await page.getByRole('button', { name: 'Resume' }).click();
    await page.getByRole('button', { name: 'Pause' }).waitFor();
    assert.equal((await api('GET', `/workflows/${workflowId}`)).paused_at, null);
  });

  it('shows the slot timeline: the next slots upcoming, then a slot that ran', async () => {
    await pollUntil(WAIT, 'the build', () => api('GET', `/workflows/${workflowId}`), (w) => w.build_status === 'COMPLETED');
    await page.goto(`/workflows/${workflowId}`);
    const timeline = page.getByRole('list', { name: 'Slots, oldest first' });
    await timeline.waitFor();
    await timeline.locator('li.slot-upcoming').first().waitFor();
    await pollUntil(WAIT, 'a slot that ran', () => api('GET', `/workflows/${workflowId}/slots`), (s) => s.slots.some((x: { fate: string }) => x.fate === 'ran'));
    await page.reload();
    await timeline.locator('li.slot-ran').first().waitFor();
    assert.match((await timeline.locator('li.slot-ran').first().getAttribute('title')) ?? '', /: ran, \d+ s late$/);
    await shot('41-workflow-slot-timeline');
  });

  it('has no axe-core violations on the schedule form, the paused workflow and its list, in light and dark', async () => {
    const found: string[] = [];
    await api('POST', `/workflows/${workflowId}/pause`);
    for (const scheme of ['light', 'dark'] as const) {
      await page.emulateMedia({ colorScheme: scheme });
      await page.goto('/workflows/new');
      await page.getByLabel('Runs').selectOption('cron');
      await page.getByLabel('Cron expression').fill('0 9 * * MON-FRI');
      await page.getByLabel('Time zone').fill('Asia/Kolkata');
      await page.getByRole('table', { name: 'Next runs' }).waitFor();
      for (const v of await axeViolations(page)) found.push(`new cron workflow (${scheme}): ${v}`);
      await page.goto(`/workflows/${workflowId}`);
      await page.getByRole('list', { name: 'Slots, oldest first' }).waitFor();
      await page.getByRole('button', { name: 'Resume' }).waitFor();
      for (const v of await axeViolations(page)) found.push(`paused workflow (${scheme}): ${v}`);
      await shot(`42-${scheme}-paused-workflow`);
      await page.goto('/workflows?show=paused');
      await page.getByRole('table', { name: 'Workflows' }).getByRole('link', { name: 'every minute in Adelaide' }).waitFor();
      for (const v of await axeViolations(page)) found.push(`paused list (${scheme}): ${v}`);
    }
    await page.emulateMedia({ colorScheme: 'light' });
    assert.deepEqual(found, []);
  });
});
