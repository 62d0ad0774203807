/**
 * A finished job's page opens with its log's last line in view, without
 * scrolling, on a laptop screen (1440×900) and on a phone (390×844), in a real
 * browser against a real `orloj start` (SQLite, the real container runtime);
 * axe-clean in light and dark (issue 26, point 8: the header and the log's
 * controls took about 550 px above the log, and on a phone the log started
 * at y = 971).
 */
import assert from 'node:assert/strict';
import type { Page } from 'playwright-core';
import { services } from '@orloj/common/test-support';
import { axeViolations } from './support/axe.js';
import { browserSuite, containerWorkflow, needBrowser, pollUntil, runNow, saveScreenshot } from './support/orloj.js';

const WAIT = Number(process.env.E2E_WAIT) || 120_000;
const LINES = 60;

describe('dashboard: a finished log’s last line on the first screen, in a real browser', function () {
  this.timeout(6 * WAIT);
  const suite = browserSuite('job-fold', WAIT, { RATE_LIMIT_ENABLED: 'false', DOCKER_HOST: services.docker ?? '', CONTAINER_REGISTRIES: 'docker.io,localhost' });
  let page: Page;
  let jobPath = '';
  const api = (method: 'GET' | 'POST', route: string, body?: unknown): Promise<any> => suite.api(method, route, body);
  const until = <T>(what: string, read: () => Promise<T>, done: (v: T) => boolean): Promise<T> => pollUntil(WAIT, what, read, done);

  before(async function () {
    needBrowser(this, { docker: true });
    page = suite.page;
    await api('POST', '/auth/register', { email: `fold-${Date.now()}@example.com`, password: 'correct horse battery' });
    const id = await containerWorkflow(api, WAIT, 'nightly export', `awk 'BEGIN { for (i = 1; i <= ${LINES}; i++) printf "exported batch %d\\n", i }'`);
    const job = await runNow(page, suite.base, id, WAIT);
    assert.equal(job.status, 'COMPLETED', JSON.stringify(job));
    await until('every line stored', () => api('GET', `/workflows/${id}/jobs/${job.id}/logs/lines?from=0&limit=1`), (r) => r.total === LINES);
    jobPath = `/workflows/${id}/jobs/${job.id}`;
  });

  /** Where the last line is once the log has opened at its end, in the page's own coordinates, and how far the page is scrolled. */
  async function lastLine(): Promise<{ top: number; bottom: number; viewport: number; scrolled: number; logTop: number }> {
    await page.goto(jobPath);
    const last = page.getByLabel('Log', { exact: true }).locator('li.log-line', { hasText: `exported batch ${LINES}` });
    await last.waitFor();
    return last.evaluate((li) => {
      const box = li.getBoundingClientRect();
      const log = li.closest('.log-box')!.getBoundingClientRect();
      const view = globalThis as unknown as { innerHeight: number; scrollY: number };
      return { top: box.top, bottom: box.bottom, viewport: view.innerHeight, scrolled: view.scrollY, logTop: log.top };
    });
  }

  for (const [device, size] of [
    ['a laptop (1440×900)', { width: 1440, height: 900 }],
    ['a phone (390×844)', { width: 390, height: 844 }],
  ] as const) {
    it(`shows the last line without scrolling on ${device}, axe-clean in light and dark`, async () => {
      await page.setViewportSize(size);
      const at = await lastLine();
      await saveScreenshot(page, `job-fold-${size.width}`);
      assert.equal(at.scrolled, 0);
      assert.ok(at.top >= 0 && at.bottom <= at.viewport, `the last line is at ${Math.round(at.top)}–${Math.round(at.bottom)} px of ${at.viewport} (the log starts at ${Math.round(at.logTop)})`);
      const found: string[] = [];
      for (const scheme of ['light', 'dark'] as const) {
        await page.emulateMedia({ colorScheme: scheme });
        for (const v of await axeViolations(page)) found.push(`${scheme}: ${v}`);
        await saveScreenshot(page, `job-fold-${size.width}-${scheme}`);
      }
      await page.emulateMedia({ colorScheme: 'light' });
      assert.deepEqual(found, [], found.join('\n\n'));
    });
  }

  it('keeps the search, downloads and time format one button away on a phone', async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    await lastLine();
    const search = page.getByRole('searchbox', { name: 'Search' });
    assert.equal(await search.isVisible(), false);
    const more = page.getByRole('button', { name: 'Search and downloads' });
    await more.click();
    assert.equal(await page.getByRole('button', { name: 'Hide search and downloads' }).getAttribute('aria-expanded'), 'true');
    await search.fill('batch 42');
    await search.press('Enter');
    await page.getByLabel('Matching log lines').locator('li.log-line', { hasText: 'exported batch 42' }).waitFor();
    await page.setViewportSize({ width: 1440, height: 900 });
  });
});
