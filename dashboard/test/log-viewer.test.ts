/**
 * The log viewer with a big log, in a real browser against a real `orloj
 * start` (SQLite, the real container runtime): a container prints 200,000
 * lines, which go the whole way (runner capture, bus, log-ingest, store); the
 * page must open the finished log at its end, reach its start, jump to a line,
 * open a search hit in context, and keep the page's rows and the JS heap
 * bounded while it scrolls through the whole log. A second job checks that
 * the end of a live tail keeps the reader's place. Screenshots land in
 * artifacts/screenshots/ (dashboard/README.md); axe-core checks each view in
 * light and dark.
 *
 * What is asserted are bounds (rows in the page, heap growth), never timings:
 * the machine is shared.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium, type Browser, type BrowserContext, type CDPSession, type Page } from 'playwright-core';
import { services } from '@orloj/common/test-support';
import { axeViolations } from './support/axe.js';
import { CHROMIUM, CHROMIUM_ARGS, DASHBOARD_DIST, SCREENSHOTS, callApi, containerWorkflow, pollUntil, startOrloj, stopOrloj, type RunningOrloj, needBrowser, watchedPage } from './support/orloj.js';

const WAIT = Number(process.env.E2E_WAIT) || 120_000;
const LINES = 200_000;
/** Most rows the page may hold at once: a screenful and the virtualizer's overscan, nowhere near the log. */
const MAX_ROWS = 150;
/** Most the JS heap may grow (after a garbage collection) by scrolling through the whole log. */
const MAX_HEAP_GROWTH = 24 * 1024 * 1024;

/** 200,000 numbered lines, every 1,000th a JSON object, printed by awk (one process, no shell loop). */
const BIG_SCRIPT = `awk 'BEGIN { for (i = 0; i < ${LINES}; i++) { if (i % 1000 == 0) printf "{\\"line\\":%d,\\"level\\":\\"info\\"}\\n", i; else printf "line %06d of the big log, some text to make it look real\\n", i } }'`;
/** 300 lines, a pause to scroll the live tail, then the end. */
const LIVE_SCRIPT = `awk 'BEGIN { for (i = 0; i < 300; i++) printf "live %03d\\n", i }'; sleep 10; echo done`;

describe('dashboard: the log viewer with a 200,000-line log, in a real browser', function () {
  this.timeout(5 * WAIT);
  let orloj: RunningOrloj | undefined;
  let dataDir: string | undefined;
  let browser: Browser | undefined;
  let context: BrowserContext;
  let page: Page;
  let cdp: CDPSession;
  let base: string;
  let workflowId: string;
  let bigJob: string;
  const problems: string[] = [];

  const shot = async (name: string) => {
    fs.mkdirSync(SCREENSHOTS, { recursive: true });
    await page.screenshot({ path: path.join(SCREENSHOTS, `${name}.png`) });
  };

  const api = (method: 'GET' | 'POST', route: string, body?: unknown): Promise<any> => callApi(page, base, method, route, body);
  const until = <T>(what: string, read: () => Promise<T>, done: (v: T) => boolean): Promise<T> => pollUntil(WAIT, what, read, done);

  const newContainerWorkflow = (name: string, script: string) => containerWorkflow(api, WAIT, name, script);

  const log = () => page.getByLabel('Log', { exact: true });
  /** The row numbers in the page, and whether every one of them has its line (none still loading). */
  const rows = () =>
    log().evaluate((box) => {
      const lis = [...box.querySelectorAll('li.log-line')];
      const top = box.getBoundingClientRect().top;
      const firstVisible = lis.find((li) => li.getBoundingClientRect().bottom > top + 1);
      return {
        count: lis.length,
        pending: box.querySelectorAll('li.log-pending').length,
        first: Number(firstVisible?.querySelector('.log-seq')?.textContent),
        last: Number(lis[lis.length - 1]?.querySelector('.log-seq')?.textContent),
      };
    });
  const settled = () => until('the rows in view to be loaded', rows, (r) => r.count > 0 && r.pending === 0);
  /** axe-core (WCAG 2.1 A/AA) on the page as it is, in light and dark; a screenshot of each. */
  async function accessible(name: string): Promise<void> {
    const found: string[] = [];
    for (const scheme of ['light', 'dark'] as const) {
      await page.emulateMedia({ colorScheme: scheme });
      for (const v of await axeViolations(page)) found.push(`${name} (${scheme}): ${v}`);
      await shot(`${name}-${scheme}`);
    }
    await page.emulateMedia({ colorScheme: 'light' });
    assert.deepEqual(found, [], found.join('\n\n'));
  }

  async function heap(): Promise<number> {
    await cdp.send('HeapProfiler.collectGarbage');
    const { metrics } = await cdp.send('Performance.getMetrics');
    return metrics.find((m) => m.name === 'JSHeapUsedSize')!.value;
  }

  before(async function () {
    needBrowser(this, { docker: true });
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'orloj-dashboard-logs-'));
    orloj = await startOrloj({
      DATA_DIR: dataDir,
      PORT: '0',
      DASHBOARD_DIR: DASHBOARD_DIST,
      DOCKER_HOST: services.docker!,
      CONTAINER_REGISTRIES: 'docker.io,localhost',
      RATE_LIMIT_ENABLED: 'false',
      // The default keeps 100,000 lines a job.
      JOB_LOG_MAX_LINES: String(LINES),
    });
    base = `http://127.0.0.1:${orloj.port}`;
    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
    page = await watchedPage(browser, base, WAIT, problems);
    context = page.context();
    cdp = await context.newCDPSession(page);
    await cdp.send('Performance.enable');

    await api('POST', '/auth/register', { email: `logs-${Date.now()}@example.com`, password: 'correct horse battery' });
    workflowId = await newContainerWorkflow('big log', BIG_SCRIPT);
    bigJob = ((await api('POST', `/workflows/${workflowId}/jobs/schedule`)) as { id: string }).id;
    const job = await until('the big job to finish', () => api('GET', `/workflows/${workflowId}/jobs/${bigJob}`), (j) => ['COMPLETED', 'FAILED', 'CANCELED'].includes(j.status));
    assert.equal(job.status, 'COMPLETED', JSON.stringify(job));
    await until('every line stored', () => api('GET', `/workflows/${workflowId}/jobs/${bigJob}/logs/lines?from=${LINES - 1}&limit=1`), (r) => r.total === LINES);
  });

  afterEach(function () {
    if (problems.length) assert.fail(problems.splice(0).join('\n'));
  });

  after(async () => {
    await browser?.close();
    await stopOrloj(orloj);
    if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('opens the finished log at its end, reaches its start and jumps to a line, with a bounded number of rows', async () => {
    await page.goto(`/workflows/${workflowId}/jobs/${bigJob}`);
    await log().getByText(`line ${String(LINES - 1).padStart(6, '0')} of the big log`, { exact: false }).waitFor();
    await page.getByText('200,000 lines', { exact: false }).waitFor();
    let r = await settled();
    assert.equal(r.last, LINES - 1, 'opens at the last line');
    assert.ok(r.count <= MAX_ROWS, `${r.count} rows in the page`);
    await accessible('logs-01-big-end');

    await page.getByRole('button', { name: 'Start', exact: true }).click();
    await log().getByText('{"line":0,"level":"info"}').waitFor();
    r = await settled();
    assert.equal(r.first, 0);
    assert.ok(r.count <= MAX_ROWS, `${r.count} rows in the page`);
    // A JSON line expands in place.
    await log().getByRole('button', { name: 'Expand JSON' }).first().click();
    await log().locator('pre.log-json', { hasText: '"level": "info"' }).waitFor();
    await accessible('logs-02-big-start');

    // End and Home keys on the focused log.
    await log().focus();
    await page.keyboard.press('End');
    await until('the end after End', rows, (x) => x.pending === 0 && x.last === LINES - 1);
    await page.keyboard.press('Home');
    await until('the start after Home', rows, (x) => x.pending === 0 && x.first === 0);

    await page.getByLabel('Line', { exact: true }).fill('123456');
    await page.getByRole('button', { name: 'Go', exact: true }).click();
    const marked = log().locator('li[aria-current="true"]');
    await marked.getByText('line 123456 of the big log', { exact: false }).waitFor();
    r = await settled();
    assert.ok(r.first < 123456 && r.last > 123456, JSON.stringify(r));
  });

  it('scrolls through all 200,000 lines with the rows and the heap bounded', async () => {
    await page.getByRole('button', { name: 'Start', exact: true }).click();
    await until('the start', rows, (x) => x.pending === 0 && x.first === 0);
    const before = await heap();
    let most = 0;
    // Forty stops from start to end, each waited for until its lines are in, then wheel turns in between.
    const stops = 40;
    for (let i = 1; i <= stops; i++) {
      await log().evaluate((box, f) => (box.scrollTop = f * (box.scrollHeight - box.clientHeight)), i / stops);
      const r = await settled();
      most = Math.max(most, r.count);
      await log().hover();
      await page.mouse.wheel(0, 2000);
    }
    const r = await settled();
    assert.equal(r.last, LINES - 1, 'scrolled to the end');
    const after = await heap();
    assert.ok(most <= MAX_ROWS, `at most ${MAX_ROWS} rows in the page, saw ${most}`);
    assert.ok(after - before < MAX_HEAP_GROWTH, `the heap grew by ${((after - before) / 1048576).toFixed(1)} MiB (from ${(before / 1048576).toFixed(1)} MiB)`);
  });

  it('opens a search hit in context: the lines around it, in the same scroll', async () => {
    await page.getByLabel('Search', { exact: true }).fill('LINE 150002 OF');
    await page.getByRole('button', { name: 'Search', exact: true }).click();
    const results = page.getByLabel('Matching log lines');
    await results.locator('mark').first().waitFor();
    assert.equal(await results.locator('.log-line').count(), 1);
    await accessible('logs-03-search');
    await results.getByRole('button', { name: 'Show line 150002 in context' }).click();
    const hit = log().locator('li[aria-current="true"]');
    await hit.getByText('line 150002 of the big log', { exact: false }).waitFor();
    await log().getByText('line 150001', { exact: false }).waitFor();
    await log().getByText('line 150003', { exact: false }).waitFor();
    assert.equal(await page.getByRole('button', { name: 'Clear' }).count(), 0, 'the search is closed');
    // The term stays in the box, and the bar above the log says it is the search the line came from.
    assert.equal(await page.getByLabel('Search', { exact: true }).inputValue(), 'LINE 150002 OF');
    await page.getByRole('status').filter({ hasText: 'Line 150002 in context, from the search for “LINE 150002 OF”.' }).waitFor();
    await accessible('logs-04-search-in-context');
    await page.getByRole('button', { name: 'Back to results' }).click();
    await results.getByRole('button', { name: 'Show line 150002 in context' }).waitFor();
    assert.equal(await page.getByLabel('Search', { exact: true }).inputValue(), 'LINE 150002 OF');
    await page.getByRole('button', { name: 'Clear' }).click();
    await log().waitFor();
    assert.equal(await page.getByLabel('Search', { exact: true }).inputValue(), '');
  });

  it('keeps the reader where they were when a live tail ends', async () => {
    const id = await newContainerWorkflow('live log', LIVE_SCRIPT);
    await page.goto(`/workflows/${id}`);
    await page.getByRole('button', { name: 'Run now' }).click();
    await page.waitForURL(/\/jobs\/[0-9a-f-]{36}$/);
    const live = page.getByLabel('Live log');
    await live.getByText('live 299', { exact: true }).waitFor();
    // Scroll the live tail up to line 100 while the job sleeps: near it first (rows are virtualized), then exactly.
    await live.evaluate((box) => (box.scrollTop = box.scrollHeight / 3));
    await live.locator('li.log-line .log-seq', { hasText: /^100$/ }).waitFor();
    await live.evaluate((box) => {
      const row = [...box.querySelectorAll('li.log-line')].find((li) => li.querySelector('.log-seq')?.textContent === '100')!;
      box.scrollTop += row.getBoundingClientRect().top - box.getBoundingClientRect().top;
    });
    await page.locator('.page-head .badge', { hasText: 'completed' }).waitFor();
    await log().getByText('live 100', { exact: true }).waitFor();
    const r = await settled();
    assert.ok(Math.abs(r.first - 100) <= 2, `the finished log opened at line ${r.first}, not where the reader was (100)`);
    await shot('logs-05-after-live');
  });
});
