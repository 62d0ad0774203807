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
import { assertAxeCleanInBothSchemes, axeViolations } from './support/axe.js';
import { browserSuite, pollUntil, runNow as runJobNow, saveScreenshot } from './support/orloj.js';

const WAIT = Number(process.env.E2E_WAIT) || 90_000;
describe('dashboard: a recovery on the bell, in a real browser', function () {
  this.timeout(4 * WAIT);
  /** The target answers 500 until this is set. */
  let targetUp = false;
  const suite = browserSuite('recovered', WAIT, { RATE_LIMIT_ENABLED: 'false' }, () => (targetUp ? 200 : 500));
  const { api } = suite;
  const until = <T>(what: string, read: () => Promise<T>, done: (v: T) => boolean): Promise<T> => pollUntil(WAIT, what, read, done);

  /** Runs the workflow now, and waits for the run to finish. */
  const runNow = (workflowId: string) => runJobNow(suite.page, suite.base, workflowId, WAIT);

  before(async () => {
    await api('POST', '/auth/register', { email: `recovered-${Date.now()}@example.com`, password: 'correct horse battery' });
    const { id } = (await api('POST', '/workflows', {
      name: 'flapping check',
      kind: 'HEARTBEAT',
      payload: JSON.stringify({ endpoint: suite.endpoint, timeout: '5s' }),
      interval: 600,
      max_consecutive_job_failures_allowed: 5,
    })) as { id: string };
    await until('the check built', () => api('GET', `/workflows/${id}`), (w) => w.build_status === 'COMPLETED');
    assert.equal((await runNow(id)).status, 'FAILED');
    targetUp = true;
    assert.equal((await runNow(id)).status, 'COMPLETED');
    assert.equal((await runNow(id)).status, 'COMPLETED', 'a second success is no second recovery');
  });

  it('names the recovery on the bell and lists it, tagged, with the failure it ended', async () => {
    const { page } = suite;
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

    await assertAxeCleanInBothSchemes(page, 'the drawer', '27-notifications-recovered', saveScreenshot);

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
