/**
 * Issue 26, "attention at any size", in a real browser against a real `orloj
 * start`: one HEARTBEAT check fails for real (down by its alert policy), then
 * 1,000 healthy workflows newer than it are written straight to the server's
 * database (as fast as a test can have them). The list, ordered by the server,
 * must show the failing one first, on the first screen; the state buttons count
 * over all 1,001 and filter to the one that is down. axe-core must find the
 * page clean in light and dark. Screenshots land in artifacts/screenshots/.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { newWorkflow } from '@orloj/common/domain';
import { openDatabase, Store } from '@orloj/common/store';
import { assertAxeCleanInBothSchemes } from './support/axe.js';
import { browserSuite, pollUntil, saveScreenshot } from './support/orloj.js';

const WAIT = Number(process.env.E2E_WAIT) || 90_000;
const HEALTHY = 1_000;

/** The user's `count` built, healthy HEARTBEAT workflows, written straight into the server's SQLite file: history no test could wait for. */
async function insertHealthyWorkflows(dataDir: string, email: string, count: number): Promise<void> {
  const db = openDatabase(`sqlite:${path.join(dataDir, 'orloj.db')}`);
  try {
    const store = Store.fromHandle(db);
    const user = await store.db.selectFrom('users').select('id').where('email', '=', email).executeTakeFirstOrThrow();
    const now = Date.now();
    await store.transaction(async (tx) => {
      for (let i = 0; i < count; i++) {
        const w = newWorkflow(
          { userId: user.id, name: `healthy ${String(i).padStart(6, '0')}`, kind: 'HEARTBEAT', payload: JSON.stringify({ endpoint: 'http://127.0.0.1:9/' }), intervalMinutes: 60, maxConsecutiveJobFailuresAllowed: 3 },
          now + i,
        );
        await tx.workflows.insert({ ...w, buildStatus: 'COMPLETED', buildCompletedAt: now });
      }
    });
  } finally {
    await db.close();
  }
}

describe('dashboard: the failing workflow first among 1,000, in a real browser', function () {
  this.timeout(4 * WAIT);
  const suite = browserSuite('attention', WAIT, { RATE_LIMIT_ENABLED: 'false' }, () => 500);
  const { api } = suite;
  const until = <T>(what: string, read: () => Promise<T>, done: (v: T) => boolean): Promise<T> => pollUntil(WAIT, what, read, done);

  before(async () => {
    const email = `attention-${Date.now()}@example.com`;
    await api('POST', '/auth/register', { email, password: 'correct horse battery' });
    const { id } = (await api('POST', '/workflows', {
      name: 'failing check',
      kind: 'HEARTBEAT',
      payload: JSON.stringify({ endpoint: suite.endpoint, timeout: '5s' }),
      interval: 600,
      max_consecutive_job_failures_allowed: 10,
    })) as { id: string };
    await until('the check built', () => api('GET', `/workflows/${id}`), (w) => w.build_status === 'COMPLETED');
    const { id: jobId } = (await api('POST', `/workflows/${id}/jobs/schedule`)) as { id: string };
    await until('its run failed', () => api('GET', `/workflows/${id}/jobs/${jobId}`), (j) => j.status === 'FAILED');
    await until('it is down', () => api('GET', `/workflows/${id}`), (w) => w.attention === 'down');
    await insertHealthyWorkflows(suite.dataDir, email, HEALTHY);
  });

  it('shows the failing one first, on the first screen, with counts over all of them', async () => {
    const { page } = suite;
    await page.goto('/workflows');
    const table = page.getByRole('table', { name: 'Workflows' });
    const first = table.locator('tbody tr').first();
    await first.getByRole('link', { name: 'failing check' }).waitFor();
    await first.locator('.state', { hasText: 'Down' }).waitFor();
    const box = await first.boundingBox();
    assert.ok(box && box.y + box.height <= 900, `the failing row is on the first screen (at y = ${box?.y})`);

    const states = page.getByRole('group', { name: 'Workflows by state' });
    await states.getByRole('button', { name: /^Down\s*1$/ }).waitFor();
    await states.getByRole('button', { name: new RegExp(`^Healthy\\s*${HEALTHY.toLocaleString('en-US').replace(',', '[,.\\s\\u00a0\\u202f]?')}$`) }).waitFor();
    await assertAxeCleanInBothSchemes(page, 'the list of 1,001', '40-attention-1000', saveScreenshot);

    await states.getByRole('button', { name: /^Down/ }).click();
    await until('only the down one listed', () => table.locator('tbody tr').count(), (n) => n === 1);
    assert.equal(await states.getByRole('button', { name: /^Down/ }).getAttribute('aria-pressed'), 'true');
    assert.match(page.url(), /attention=down/);
  });
});
