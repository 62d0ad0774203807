/**
 * Gaps after downtime in a real browser against a real `orloj start` (issue
 * 26): the slots a workflow missed show as gaps in its slot strip, those
 * missed while orloj itself was down as plain gaps with a notice ("orloj was
 * down 04:35–04:39"), and its missed-runs count holds only what was the
 * workflow's; axe-clean in light and dark. Twenty minutes of history cannot
 * be waited for: the test writes them as the server would have (the
 * workflow built half an hour ago, an earlier period of the leader's uptime
 * record) through a second connection to the server's own database.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import type { Page } from 'playwright-core';
import { openDatabase } from '@orloj/common/store';
import { axeViolations } from './support/axe.js';
import { browserSuite, pollUntil, saveScreenshot } from './support/orloj.js';

const WAIT = Number(process.env.E2E_WAIT) || 90_000;
const MINUTE = 60_000;

describe('dashboard: gaps after downtime, in a real browser', function () {
  this.timeout(4 * WAIT);
  const suite = browserSuite('downtime', WAIT, { RATE_LIMIT_ENABLED: 'false' });
  let page: Page;
  let workflowId = '';
  const api = (method: 'GET' | 'POST', route: string, body?: unknown): Promise<any> => suite.api(method, route, body);

  before(async () => {
    page = suite.page;
    await api('POST', '/auth/register', { email: `downtime-${Date.now()}@example.com`, password: 'correct horse battery' });
    ({ id: workflowId } = (await api('POST', '/workflows', { name: 'every minute', kind: 'HEARTBEAT', payload: JSON.stringify({ endpoint: suite.endpoint }), interval: 1, max_consecutive_job_failures_allowed: 3 })) as { id: string });
    await pollUntil(WAIT, 'the workflow built', () => api('GET', `/workflows/${workflowId}`), (w) => w.build_status === 'COMPLETED');
    // orloj ran until 20 minutes ago, then not until this server started; the workflow was built 30 minutes ago and is
    // due since its first slot: the leader's next pass runs its latest slot and counts the ones it missed.
    const now = Date.now();
    const builtAt = now - 30 * MINUTE - 30_000;
    const db = openDatabase(`sqlite:${path.join(suite.dataDir, 'orloj.db')}`);
    try {
      await db.db.insertInto('orloj_uptime').values({ started_at: now - 60 * MINUTE, last_seen_at: now - 20 * MINUTE }).execute();
      await db.db.updateTable('workflows').set({ build_completed_at: builtAt, next_due_at: builtAt + MINUTE }).where('id', '=', workflowId).execute();
    } finally {
      await db.close();
    }
    await pollUntil(WAIT, 'the missed slots counted', () => api('GET', `/workflows/${workflowId}`), (w) => w.skipped_slots > 0);
  });

  it('shows the missed slots as gaps, those of orloj\'s downtime with a notice, and counts only the workflow\'s own as its missed runs', async () => {
    await page.goto(`/workflows/${workflowId}`);
    const notice = page.getByRole('note').filter({ hasText: 'orloj was down' });
    await notice.waitFor();
    // The period is clock times today, with the day when it began or ends on another (a run near midnight).
    const clock = String.raw`(\p{L}{3} \d{1,2} )?\d{1,2}:\d{2}(\s?[AP]M)?`;
    assert.match((await notice.textContent()) ?? '', new RegExp(`orloj was down ${clock}\\s?–\\s?${clock}`, 'u'));
    const strip = page.getByRole('list', { name: 'Slots, oldest first' });
    await strip.locator('.slot-ran').waitFor();
    // About 19 slots came while orloj was down (from 20 minutes ago until it started), about 10 before it, while it ran.
    const down = await strip.locator('.slot-down').count();
    const missed = await strip.locator('.slot-gap:not(.slot-down)').count();
    assert.ok(down >= 17, `${down} slots missed while orloj was down`);
    assert.ok(missed >= 8, `${missed} slots missed while orloj ran`);
    assert.match((await strip.locator('.slot-down').first().getAttribute('title')) ?? '', /skipped \(orloj was down\)/);
    // The workflow's missed runs are the gaps it caused, not orloj's: no amber mark for a restart.
    const w = await api('GET', `/workflows/${workflowId}`);
    assert.equal(w.skipped_slots, missed, `${w.skipped_slots} missed runs counted, ${missed} shown as the workflow's, ${down} as orloj's`);
    for (const scheme of ['light', 'dark'] as const) {
      await page.emulateMedia({ colorScheme: scheme });
      assert.deepEqual(await axeViolations(page), [], `the workflow page with its downtime, ${scheme}`);
      await saveScreenshot(page, `62-workflow-downtime-gaps-${scheme}`);
    }
    await page.emulateMedia({ colorScheme: 'light' });
  });
});
