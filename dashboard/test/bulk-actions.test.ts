/**
 * Bulk actions on the workflow list in a real browser against a real `orloj
 * start` (issue 25), with the api's rate limit on: select three of four
 * workflows, pause them and see them Paused; pause again and see it reported
 * harmless; run now twice and get one run each; terminate behind the confirm,
 * and again from the Terminated only view (already so); axe-clean in light and dark.
 */
import assert from 'node:assert/strict';
import type { Page } from 'playwright-core';
import { axeViolations } from './support/axe.js';
import { browserSuite, pollUntil, saveScreenshot } from './support/orloj.js';

const WAIT = Number(process.env.E2E_WAIT) || 90_000;
const NAMES = ['bulk-1', 'bulk-2', 'bulk-3', 'bulk-4'];

describe('dashboard: bulk actions on the workflow list, in a real browser', function () {
  this.timeout(6 * WAIT);
  // The api's rate limit stays on.
  const suite = browserSuite('bulk', WAIT);
  const ids: string[] = [];
  let page: Page;

  const api = (method: 'GET' | 'POST', route: string, body?: unknown): Promise<any> => suite.api(method, route, body);
  const table = () => page.getByRole('table', { name: 'Workflows' });
  const row = (name: string) => table().getByRole('row').filter({ has: page.getByRole('link', { name, exact: true }) });
  const status = () => page.locator('.bulk [role="status"]');
  const results = () => page.getByRole('table', { name: 'Bulk action results' });
  const selected = () => ids.slice(0, 3);

  async function selectFirstThree(): Promise<void> {
    await table().waitFor();
    // By keyboard for the first (Space toggles a focused checkbox), by click for the others.
    await page.getByRole('checkbox', { name: 'Select bulk-1' }).focus();
    await page.keyboard.press('Space');
    await page.getByRole('checkbox', { name: 'Select bulk-2' }).check();
    await page.getByRole('checkbox', { name: 'Select bulk-3' }).check();
    await page.getByText('3 selected').waitFor();
  }

  before(async () => {
    page = suite.page;
    await api('POST', '/auth/register', { email: `bulk-${Date.now()}@example.com`, password: 'correct horse battery' });
    for (const name of NAMES) {
      const body = { name, kind: 'HEARTBEAT', payload: JSON.stringify({ endpoint: suite.endpoint }), interval: 600, max_consecutive_job_failures_allowed: 3 };
      ids.push(((await api('POST', '/workflows', body)) as { id: string }).id);
    }
    for (const id of ids) await pollUntil(WAIT, 'the build', () => api('GET', `/workflows/${id}`), (w) => w.build_status === 'COMPLETED');
  });

  it('pauses the three selected workflows, shows them Paused, and reports a repeated click as harmless', async () => {
    await page.goto('/workflows');
    await selectFirstThree();
    await page.getByRole('region', { name: 'Bulk actions' }).getByRole('button', { name: 'Pause' }).click();
    await status().getByText('Pause: 3 done, 0 already so, 0 refused.').waitFor();
    for (const name of NAMES.slice(0, 3)) await row(name).locator('.state', { hasText: 'Paused' }).waitFor();
    const pausedAt = await Promise.all(selected().map(async (id) => (await api('GET', `/workflows/${id}`)).paused_at as string));
    assert.ok(pausedAt.every(Boolean));
    assert.equal((await api('GET', `/workflows/${ids[3]}`)).paused_at, null);
    await saveScreenshot(page, '50-bulk-paused');

    await page.getByRole('region', { name: 'Bulk actions' }).getByRole('button', { name: 'Pause' }).click();
    await status().getByText('Pause: 0 done, 3 already so, 0 refused.').waitFor();
    assert.match((await results().getByRole('row', { name: /^bulk-1/ }).textContent()) ?? '', /already so — already paused by an earlier click/);
    const again = await Promise.all(selected().map(async (id) => (await api('GET', `/workflows/${id}`)).paused_at as string));
    assert.deepEqual(again, pausedAt);
  });

  it('runs each selected workflow now once, however often Run now is clicked', async () => {
    await page.getByRole('button', { name: 'Run now' }).click();
    await status().getByText('Run now: 3 done, 0 already so, 0 refused.').waitFor();
    await page.getByRole('button', { name: 'Run now' }).click();
    await status().getByText('Run now: 0 done, 3 already so, 0 refused.').waitFor();
    for (const id of selected()) {
      const { jobs } = (await api('GET', `/workflows/${id}/jobs?trigger=MANUAL`)) as { jobs: unknown[] };
      assert.equal(jobs.length, 1, `manual jobs of ${id}`);
    }
    const { jobs } = (await api('GET', `/workflows/${ids[3]}/jobs?trigger=MANUAL`)) as { jobs: unknown[] };
    assert.equal(jobs.length, 0);
  });

  it('has no axe-core violations with a selection, its results and the terminate confirm, in light and dark', async () => {
    const found: string[] = [];
    for (const scheme of ['light', 'dark'] as const) {
      await page.emulateMedia({ colorScheme: scheme });
      await results().waitFor();
      for (const v of await axeViolations(page)) found.push(`selection and results (${scheme}): ${v}`);
      await page.getByRole('button', { name: 'Terminate', exact: true }).click();
      await page.getByRole('alertdialog').waitFor();
      for (const v of await axeViolations(page)) found.push(`terminate confirm (${scheme}): ${v}`);
      await saveScreenshot(page, `51-${scheme}-bulk-terminate-confirm`);
      await page.keyboard.press('Escape');
      await page.getByRole('button', { name: 'Terminate', exact: true }).waitFor();
      // A phone: compact rows with the checkbox at each card's corner, nothing wider than the screen.
      await page.setViewportSize({ width: 390, height: 844 });
      await page.getByRole('checkbox', { name: 'Select bulk-1' }).waitFor();
      const overflow = await page.evaluate<number>('document.documentElement.scrollWidth - document.documentElement.clientWidth');
      assert.ok(overflow <= 0, `sideways scroll on a phone (${scheme}): ${overflow} px`);
      for (const v of await axeViolations(page)) found.push(`phone (${scheme}): ${v}`);
      await saveScreenshot(page, `52-phone-${scheme}-bulk`);
      await page.setViewportSize({ width: 1440, height: 900 });
    }
    await page.emulateMedia({ colorScheme: 'light' });
    assert.deepEqual(found, []);
  });

  it('terminates the selection only after the confirm, and a second terminate is reported as already so', async () => {
    await page.getByRole('button', { name: 'Terminate', exact: true }).click();
    const confirm = page.getByRole('alertdialog', { name: /^Terminate 3 workflows\?/ });
    await confirm.waitFor();
    assert.equal((await api('GET', `/workflows/${ids[0]}`)).terminated_at, undefined);
    await confirm.getByRole('button', { name: 'Yes, terminate' }).click();
    await status().getByText('Terminate: 3 done, 0 already so, 0 refused.').waitFor();
    for (const id of selected()) assert.ok((await api('GET', `/workflows/${id}`)).terminated_at, `terminated_at of ${id}`);
    assert.equal((await api('GET', `/workflows/${ids[3]}`)).terminated_at, undefined);
    // The default view leaves out what its owner terminated: they leave the list, and the selection.
    await row('bulk-1').waitFor({ state: 'detached' });
    await page.getByText('Select workflows to act on several at once.').waitFor();

    await page.goto('/workflows?show=terminated');
    await table().waitFor();
    await page.getByRole('checkbox', { name: 'Select all on this page' }).check();
    await page.getByText('3 selected').waitFor();
    await page.getByRole('button', { name: 'Terminate', exact: true }).click();
    await page.getByRole('button', { name: 'Yes, terminate' }).click();
    await status().getByText('Terminate: 0 done, 3 already so, 0 refused.').waitFor();
    await page.getByRole('region', { name: 'Bulk actions' }).getByRole('button', { name: 'Pause' }).click();
    await status().getByText('Pause: 0 done, 0 already so, 3 refused.').waitFor();
    assert.match((await results().getByRole('row', { name: /^bulk-2/ }).textContent()) ?? '', /refused — Precondition Failed: The workflow is terminated/);
    // Chromium logs each 4xx answer on the console: the six 412s asked for here are expected, nothing else.
    const asked = (p: string) => p.includes('status of 412 (Precondition Failed)') && selected().some((id) => p.includes(`/api/workflows/${id}`));
    await pollUntil(WAIT, 'the six refusals on the console', async () => suite.problems.filter(asked).length, (n) => n >= 6);
    assert.equal(suite.problems.filter(asked).length, 6);
    suite.problems.splice(0, suite.problems.length, ...suite.problems.filter((p) => !asked(p)));
  });
});
