/**
 * The dashboard in a real browser against a real `orloj start`: Debian's
 * Chromium driven by playwright-core, the server as a child process on a
 * fresh SQLite DATA_DIR with the real container runtime. Every step waits
 * for what the user would see (no sleeps, no timed assertions). Screenshots
 * of each page land in artifacts/screenshots/ (see dashboard/README.md).
 *
 * The run fails on any console error or uncaught page error, and on any
 * request to a host other than the server.
 */
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { chromium, type Browser, type BrowserContext, type ConsoleMessage, type Page } from 'playwright-core';
import { services } from '@orloj/common/test-support';
import { axeViolations } from './support/axe.js';
import { CHROMIUM, DASHBOARD_DIST, SCREENSHOTS, TEST_IMAGE, startOrloj, needBrowser } from './support/orloj.js';

/** Generous: a shared two-core machine builds, pulls and runs containers while the browser renders (E2E_WAIT shortens it when debugging a failure). */
const WAIT = Number(process.env.E2E_WAIT) || 90_000;

// Twenty lines a second apart (long enough to be watched live), one line on
// stderr, and one that would be markup if it were ever rendered as HTML.
const SCRIPT = [
  'i=0',
  'while [ $i -lt 20 ]; do i=$((i+1)); echo "tick $i"; sleep 1; done',
  'echo "needle on stderr" >&2',
  "echo '<b>bold</b><img src=x onerror=alert(1)>'",
  'echo done',
].join('; ');

/** Why the browser suite cannot run here, or undefined when it can. */
/** A local HEARTBEAT target that records the requests it gets. */
function heartbeatTarget() {
  const seen: http.IncomingHttpHeaders[] = [];
  const server = http.createServer((req, res) => {
    seen.push(req.headers);
    res.end('ok');
  });
  return {
    seen,
    server,
    async url() {
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      return `http://127.0.0.1:${(server.address() as AddressInfo).port}/health`;
    },
  };
}

describe('dashboard in a real browser', function () {
  this.timeout(4 * WAIT);
  let orloj: { child: ChildProcess; port: number; output: () => string } | undefined;
  let dataDir: string;
  let browser: Browser | undefined;
  let context: BrowserContext;
  let page: Page;
  let base: string;
  const problems: string[] = [];
  /** The last few 4xx/5xx answers with their bodies, for the message of a failed step. */
  const refusals: string[] = [];
  /** Refusals a step provokes on purpose: Chromium logs every 4xx answer as a console error. */
  const expectedRefusals: { path: string; status: number }[] = [];
  const target = heartbeatTarget();
  let targetUrl: string;
  let workflowUrl: string;
  let jobId: string;
  let heartbeatJobUrl = '/workflows';

  const shot = async (name: string) => {
    fs.mkdirSync(SCREENSHOTS, { recursive: true });
    await page.screenshot({ path: path.join(SCREENSHOTS, `${name}.png`), fullPage: true });
  };
  const heading = (name: string | RegExp) => page.getByRole('heading', { level: 1, name });
  const badge = () => page.locator('.page-head .badge').first();

  before(async function () {
    needBrowser(this, { docker: true });
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'orloj-dashboard-e2e-'));
    targetUrl = await target.url();
    orloj = await startOrloj({
      DATA_DIR: dataDir,
      PORT: '0',
      DASHBOARD_DIR: DASHBOARD_DIST,
      DOCKER_HOST: services.docker!,
      RUNNER_ALLOW_TARGETS: '127.0.0.0/8',
      CONTAINER_REGISTRIES: 'docker.io,localhost',
      // The browser polls several lists at once; the limits have their own tests.
      RATE_LIMIT_ENABLED: 'false',
    });
    base = `http://127.0.0.1:${orloj.port}`;

    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
    context = await browser.newContext({ baseURL: base, viewport: { width: 1280, height: 860 }, acceptDownloads: true, colorScheme: 'light' });
    context.setDefaultTimeout(WAIT);
    context.on('request', (req) => {
      const url = new URL(req.url());
      if (url.origin !== base && url.protocol !== 'data:' && url.protocol !== 'blob:') problems.push(`request to another host: ${req.url()}`);
    });
    context.on('response', (res) => {
      if (res.status() < 400) return;
      void res
        .text()
        .catch(() => '(no body)')
        .then((body) => {
          refusals.push(`${res.request().method()} ${new URL(res.url()).pathname} ${res.status()}: ${body.slice(0, 400)}`);
          refusals.splice(0, refusals.length - 5);
        });
    });
    page = await context.newPage();
    page.on('console', (msg: ConsoleMessage) => {
      if (msg.type() !== 'error') return;
      // Signed out, the session bootstrap is answered 401: that is how the app learns it (the cookies are HttpOnly).
      if (/status of 401/.test(msg.text()) && msg.location().url.endsWith('/api/auth/validate')) return;
      const at = expectedRefusals.findIndex((r) => msg.text().includes(`status of ${r.status}`) && msg.location().url === `${base}${r.path}`);
      if (at >= 0) {
        expectedRefusals.splice(at, 1);
        return;
      }
      problems.push(`console error: ${msg.text()} (${msg.location().url})`);
    });
    page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
    page.on('dialog', (d) => {
      problems.push(`unexpected dialog: ${d.message()}`);
      void d.dismiss();
    });
  });

  afterEach(async function () {
    // A failed step says what the page showed and what the server said meanwhile (warnings and errors
    // only), in its own error: CI reports keep the failure summary, not the log above it.
    const failed = this.currentTest?.state === 'failed' ? this.currentTest.err : undefined;
    if (failed) {
      const seen = await page
        .evaluate<string>(
          `[location.pathname, ...[...document.querySelectorAll('h1, .field-error, .form-errors, .toasts, .error-text')].map((e) => (e.className || e.tagName) + ': ' + e.textContent), ...[...document.querySelectorAll('form input, form select, form textarea')].map((e) => e.id + ' = ' + JSON.stringify(e.value))].join('\\n')`,
        )
        .catch((err: unknown) => `(the page could not be read: ${String(err)})`);
      await shot(`failed-${this.currentTest!.title.replace(/[^a-z0-9]+/gi, '-').slice(0, 60)}`).catch(() => undefined);
      failed.message += `\n--- the page showed:\n${seen}\n--- the last refusals:\n${refusals.join('\n') || '(none)'}\n--- orloj output (last 2 KiB):\n${orloj?.output().slice(-2048) ?? '(not started)'}`;
    }
    // Reported at the step that caused it.
    if (expectedRefusals.length) problems.push(`refusals that never came: ${JSON.stringify(expectedRefusals.splice(0))}`);
    if (problems.length) assert.fail(problems.splice(0).join('\n'));
  });

  after(async () => {
    await browser?.close();
    if (orloj && orloj.child.exitCode === null) {
      orloj.child.kill('SIGTERM');
      await new Promise((r) => orloj!.child.once('exit', r));
    }
    target.server.close();
    if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('signs up from the sign-in page and lands on an empty workflow list', async () => {
    await page.goto('/');
    await heading('Sign in to orloj').waitFor();
    await shot('01-login');
    await page.getByRole('link', { name: 'Create an account' }).click();
    await page.getByLabel('Email').fill(`e2e-${Date.now()}@example.com`);
    await page.getByLabel('Password').fill('correct horse battery');
    await shot('02-signup');
    await page.getByRole('button', { name: 'Sign up' }).click();
    await heading('Workflows').waitFor();
    await page.getByText('No workflows yet').waitFor();
    await shot('03-workflows-empty');
  });

  it('creates a CONTAINER workflow, after showing the form\'s validation errors at their fields', async () => {
    await page.getByRole('link', { name: 'New workflow' }).click();
    // React Router renders a navigation as a transition: until it commits, the list stays on
    // screen, and its "Search by name" would take the name. Fill the form once it is there.
    await heading('New workflow').waitFor();
    await page.getByLabel('Name', { exact: true }).fill('e2e container');
    await page.getByLabel('Kind').selectOption('CONTAINER');
    await page.getByLabel('Interval (minutes)').fill('600');
    // first with values the form itself refuses, every one at once, before anything is sent
    await page.getByLabel('Image').fill('Not An Image!');
    await page.getByLabel('Timeout').fill('2h');
    await page.getByRole('button', { name: 'Create workflow' }).click();
    await page.locator('#wf-image-error', { hasText: 'must be a valid image reference' }).waitFor();
    await page.locator('#wf-timeout-error', { hasText: 'must be at most' }).waitFor();
    assert.equal(await page.getByLabel('Image').getAttribute('aria-invalid'), 'true');
    await shot('04-workflow-new-invalid');
    await page.getByLabel('Image').fill(TEST_IMAGE);
    await page.getByLabel('Command').fill(['sh', '-c', SCRIPT].join('\n'));
    await page.getByLabel('Environment').fill('GREETING=hello');
    await page.getByLabel('Timeout').fill('2m');
    await shot('04-workflow-new-container');
    await page.getByRole('button', { name: 'Create workflow' }).click();
    await heading('e2e container').waitFor();
    workflowUrl = new URL(page.url()).pathname;
    await page.waitForFunction(`document.title === 'e2e container · orloj'`);
    assert.match(workflowUrl, /^\/workflows\/[0-9a-f-]{36}$/);
    // The build status is polled while it builds.
    await page.locator('.build-status .badge', { hasText: 'completed' }).waitFor();
    await page.getByText('No jobs yet').waitFor();
    await shot('05-workflow');
  });

  it('runs it now and follows its log live until it completes', async () => {
    await page.getByRole('button', { name: 'Run now' }).click();
    await page.waitForURL(/\/jobs\/[0-9a-f-]{36}$/);
    jobId = page.url().split('/').pop()!;
    const live = page.getByLabel('Live log');
    await live.getByText('tick 2', { exact: true }).waitFor();
    await page.getByText(/Live: new lines appear/).waitFor();
    await shot('06-job-live');
    await page.locator('.page-head .badge', { hasText: 'completed' }).waitFor();
    // Once it ended the page reads the stored log, oldest first.
    const log = page.getByLabel('Log', { exact: true });
    await log.getByText('done', { exact: true }).waitFor();
    assert.equal(await log.locator('.log-line').count(), 23);
    assert.equal(await log.locator('.log-message').first().textContent(), 'tick 1');
    await shot('07-job-completed');
  });

  it('searches the log with highlights rendered as text, and filters by stream', async () => {
    await page.getByLabel('Search', { exact: true }).fill('TICK 1');
    await page.getByRole('button', { name: 'Search', exact: true }).click();
    const results = page.getByLabel('Matching log lines');
    await results.locator('.log-line').first().waitFor();
    // tick 1 and tick 10 … tick 19, each match highlighted in its own case
    assert.equal(await results.locator('.log-line').count(), 11);
    const marks = await results.locator('mark').allTextContents();
    assert.equal(marks.length, 11);
    assert.ok(marks.every((m) => m === 'tick 1'), JSON.stringify(marks));
    await shot('08-job-search');

    await page.getByLabel('Search', { exact: true }).fill('bold');
    await page.getByRole('button', { name: 'Search', exact: true }).click();
    await results.getByText('<b>bold</b><img src=x onerror=alert(1)>').waitFor();
    assert.equal(await results.locator('b, img').count(), 0, 'a log line was rendered as HTML');

    await page.getByLabel('Search', { exact: true }).fill('');
    await page.getByLabel('Stream').selectOption('stderr');
    await page.getByRole('button', { name: 'Search', exact: true }).click();
    await results.getByText('needle on stderr').waitFor();
    await page.waitForFunction(`document.querySelectorAll('[aria-label="Matching log lines"] .log-line').length === 1`);
    await page.getByRole('button', { name: 'Clear' }).click();
    await page.getByLabel('Log', { exact: true }).getByText('done', { exact: true }).waitFor();
  });

  it('downloads the log as txt, json and jsonl', async () => {
    const download = async (format: string) => {
      const [file] = await Promise.all([page.waitForEvent('download'), page.getByRole('link', { name: `Download .${format}`, exact: true }).click()]);
      assert.equal(file.suggestedFilename(), `${jobId}.${format}`);
      return fs.readFileSync((await file.path())!, 'utf8');
    };
    const txt = await download('txt');
    assert.ok(txt.startsWith('tick 1\ntick 2\n'), txt.slice(0, 40));
    // stdout and stderr are separate pipes: the stderr line may land anywhere after its turn
    assert.deepEqual(txt.split('\n').sort(), [...Array.from({ length: 20 }, (_, i) => `tick ${i + 1}`), '', '<b>bold</b><img src=x onerror=alert(1)>', 'done', 'needle on stderr'].sort());
    const json = JSON.parse(await download('json')) as { id: string; logs: { message_raw: string }[] };
    assert.equal(json.id, jobId);
    assert.equal(json.logs.length, 23);
    const jsonl = (await download('jsonl')).trim().split('\n').map((l) => JSON.parse(l) as { stream: string; message_raw: string });
    assert.deepEqual(jsonl.filter((e) => e.stream === 'stderr').map((e) => e.message_raw), ['needle on stderr']);
  });

  it('shows the completion notification and marks it read', async function () {
    await page.goto(workflowUrl);
    const bell = page.getByRole('button', { name: /^Notifications, [1-9]/ });
    await bell.click();
    const drawer = page.getByRole('dialog', { name: 'Notifications' });
    // The drawer opens on alerts; a completion is routine.
    await drawer.getByRole('button', { name: 'All', exact: true }).click();
    await drawer.getByRole('button', { name: 'Mark read' }).first().waitFor();
    await shot('09-notifications');
    await drawer.getByRole('button', { name: 'Mark all read' }).click();
    await page.getByRole('button', { name: /^Notifications, none unread(, \d+ open incidents?)?$/ }).waitFor();
    await page.keyboard.press('Escape');
  });

  it('takes every main page at 1440×900 and 390×844, in light and dark, without sideways scrolling or axe-core violations', async function () {
    const pages: [name: string, open: (p: Page) => Promise<void>][] = [
      ['workflows', async (p) => {
        await p.goto('/workflows');
        await p.getByRole('table', { name: 'Workflows' }).getByRole('link', { name: 'e2e container' }).waitFor();
      }],
      ['workflow', async (p) => {
        await p.goto(workflowUrl);
        await p.getByRole('table', { name: 'Jobs' }).getByRole('link').first().waitFor();
      }],
      ['job-log', async (p) => {
        await p.goto(`${workflowUrl}/jobs/${jobId}`);
        await p.getByLabel('Log', { exact: true }).getByText('done', { exact: true }).waitFor();
      }],
      ['notifications', async (p) => {
        await p.goto('/workflows');
        await p.getByRole('button', { name: /^Notifications/ }).click();
        const drawer = p.getByRole('dialog', { name: 'Notifications' });
        await drawer.getByRole('button', { name: 'All', exact: true }).click();
        await drawer.locator('li.notification').first().waitFor();
      }],
      ['profile', async (p) => {
        await p.goto('/profile');
        await heading('Profile').waitFor();
      }],
    ];
    pages.push(['analytics', async (p) => {
      await p.goto('/analytics');
      await p.getByRole('img', { name: /^Jobs per kind/ }).waitFor();
    }]);
    const sizes = [['desktop', { width: 1440, height: 900 }], ['phone', { width: 390, height: 844 }]] as const;
    const found: string[] = [];
    const check = async (p: Page, what: string) => {
      // (a string: this file is type-checked without the DOM library)
      const overflow = await p.evaluate<number>('document.documentElement.scrollWidth - document.documentElement.clientWidth');
      if (overflow > 0) found.push(`${what} scrolls sideways by ${overflow}px`);
      for (const v of await axeViolations(p)) found.push(`${what}: ${v}`);
      await p.screenshot({ path: path.join(SCREENSHOTS, `40-${what}.png`), fullPage: true });
    };
    fs.mkdirSync(SCREENSHOTS, { recursive: true });
    for (const [size, viewport] of sizes) {
      await page.setViewportSize(viewport);
      for (const scheme of ['light', 'dark'] as const) {
        await page.emulateMedia({ colorScheme: scheme });
        for (const [name, open] of pages) {
          await open(page);
          await check(page, `${size}-${scheme}-${name}`);
          if (name === 'notifications') await page.keyboard.press('Escape');
        }
        // Signed out: a context of its own, the same size and scheme.
        const anonymous = await browser!.newContext({ baseURL: base, viewport, colorScheme: scheme });
        try {
          const signIn = await anonymous.newPage();
          await signIn.goto('/');
          await signIn.getByRole('heading', { level: 1, name: 'Sign in to orloj' }).waitFor();
          await check(signIn, `${size}-${scheme}-sign-in`);
        } finally {
          await anonymous.close();
        }
      }
    }
    await page.setViewportSize({ width: 1280, height: 860 });
    await page.emulateMedia({ colorScheme: 'light' });
    assert.deepEqual(found, []);
  });

  it('terminates the workflow, then deletes it after confirming', async () => {
    await page.goto(workflowUrl);
    await heading('e2e container').waitFor();
    await page.getByRole('button', { name: 'Terminate' }).click();
    await page.getByRole('button', { name: 'Yes, terminate' }).click();
    await page.locator('.page-head .badge', { hasText: 'terminated' }).waitFor();
    await page.getByRole('button', { name: 'Delete' }).click();
    await shot('10-workflow-delete-confirm');
    await page.getByRole('button', { name: 'Yes, delete' }).click();
    await heading('Workflows').waitFor();
    await page.getByText('No workflows yet').waitFor();
  });

  it('creates a HEARTBEAT workflow against a local target and runs it', async () => {
    await page.getByRole('link', { name: 'New workflow' }).click();
    await heading('New workflow').waitFor();
    await page.getByLabel('Name', { exact: true }).fill('e2e heartbeat');
    await page.getByLabel('Endpoint URL').fill(targetUrl);
    await page.getByLabel('Expected status code').fill('200');
    await page.getByLabel('Headers').fill('X-Probe: orloj-e2e');
    await page.getByLabel('Timeout').fill('5s');
    await shot('11-workflow-new-heartbeat');
    await page.getByRole('button', { name: 'Create workflow' }).click();
    await heading('e2e heartbeat').waitFor();
    await page.locator('.build-status .badge', { hasText: 'completed' }).waitFor();
    await page.getByRole('button', { name: 'Run now' }).click();
    await page.waitForURL(/\/jobs\/[0-9a-f-]{36}$/);
    await badge().filter({ hasText: 'completed' }).waitFor();
    await page.getByText('HTTP checks keep no logs.').waitFor();
    heartbeatJobUrl = new URL(page.url()).pathname;
    assert.ok(target.seen.some((h) => h['x-probe'] === 'orloj-e2e'));
    await shot('12-heartbeat-job');
    await page.getByRole('link', { name: 'e2e heartbeat' }).click();
    await page.getByRole('table', { name: 'Jobs' }).getByText('manual').waitFor();
  });

  it('lists workflows with search and filters', async () => {
    await page.getByRole('link', { name: 'Workflows', exact: true }).first().click();
    const table = page.getByRole('table', { name: 'Workflows' });
    await table.getByRole('link', { name: 'e2e heartbeat' }).waitFor();
    await page.getByLabel('Search by name').fill('no such name');
    await page.getByText('No workflow matches these filters').waitFor();
    await page.getByLabel('Search by name').fill('HEART');
    await table.getByRole('link', { name: 'e2e heartbeat' }).waitFor();
    await page.getByLabel('Kind').selectOption('CONTAINER');
    await page.getByText('No workflow matches these filters').waitFor();
    await page.getByLabel('Kind').selectOption('HEARTBEAT');
    await table.getByRole('link', { name: 'e2e heartbeat' }).waitFor();
    await shot('13-workflows-filtered');
  });

  it('saves the notification preference on the profile page', async () => {
    await page.getByRole('link', { name: 'Profile' }).click();
    await heading('Profile').waitFor();
    await page.getByLabel('None', { exact: true }).check();
    await page.getByText('Notification preference saved.').waitFor();
    await page.reload();
    await heading('Profile').waitFor();
    assert.equal(await page.getByLabel('None', { exact: true }).isChecked(), true);
    await page.getByLabel('All notifications').check();
    await shot('14-profile');
  });

  it('shows user analytics', async function () {
    await page.getByRole('link', { name: 'Analytics' }).click();
    await heading('Analytics').waitFor();
    await page.getByRole('img', { name: /^Jobs per kind/ }).waitFor();
    await shot('15-analytics');
  });

  it("fits a 390 px wide phone with the HTTP check's pages too, in light and dark", async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    for (const scheme of ['light', 'dark'] as const) {
      await page.emulateMedia({ colorScheme: scheme });
      for (const [name, url] of [
        ['workflows', '/workflows'],
        ['job', heartbeatJobUrl],
      ] as const) {
        await page.goto(url);
        await page.locator('h1').first().waitFor();
        // (a string: this file is type-checked without the DOM library)
        const overflow = await page.evaluate<number>('document.documentElement.scrollWidth - document.documentElement.clientWidth');
        assert.ok(overflow <= 0, `${name} (${scheme}) scrolls sideways by ${overflow}px`);
        await shot(`16-phone-${scheme}-heartbeat-${name}`);
      }
    }
    await page.setViewportSize({ width: 1280, height: 860 });
    await page.emulateMedia({ colorScheme: 'light' });
  });

  it('logs out and is sent back to sign in', async () => {
    await page.getByRole('button', { name: 'Log out' }).click();
    await heading('Sign in to orloj').waitFor();
    await page.goto('/workflows');
    await heading('Sign in to orloj').waitFor();
  });
});
