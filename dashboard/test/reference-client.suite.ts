/**
 * The reference project's own dashboard (a Next.js app, ../shared/reference-client/),
 * built unchanged but for its README's offline recipe and pointed at a real
 * `orloj start`, in Debian's Chromium: the three flows that failed for a
 * person using it (issue 27) — search highlights, marked-read notifications
 * across the next poll, and the end of a live tail without an error toast,
 * ten times.
 *
 * Not part of the default mocha glob: building the app takes minutes the
 * first time (later runs reuse the build, see support/reference-client.ts).
 * scripts/reference-client.sh runs it, and .ci/run calls that script
 * (docs/testing.md). Every step waits for what the page does (requests,
 * responses, elements), never for a fixed time.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page, type Request } from 'playwright-core';
import { requireServices, services } from '@orloj/common/test-support';
import { TestClient } from '@orloj/api/test-support';
import { CHROMIUM, CHROMIUM_ARGS, TEST_IMAGE, pollUntil, saveScreenshot, startOrloj, stopOrloj, type RunningOrloj } from './support/orloj.js';
import { buildReferenceClient, findReferenceTarball, serveReferenceClient, type ServedClient } from './support/reference-client.js';

/** Generous: a shared two-core machine runs containers and two servers while the browser renders. */
const WAIT = Number(process.env.E2E_WAIT) || 90_000;
/** The longest the app's build may take (npm install and next build, on a cold npm cache). */
const BUILD_WAIT = 25 * 60_000;
/** The API port the app is built for (Next.js bakes it in): fixed, so later runs reuse the build. */
const API_PORT = Number(process.env.ORLOJ_REFERENCE_API_PORT) || 41873;
const TAIL_RUNS = 10;
/** Lines the live-tail job prints, one every half second: long enough for the page to open while it runs. */
const TAIL_LINES = 24;
const TERMINAL = new Set(['COMPLETED', 'FAILED', 'CANCELED']);

/** Why the suite cannot run here, or undefined when it can. */
function missing(tarball: string | undefined): string | undefined {
  if (!tarball) return 'no reference client tarball (shared/reference-client/ beside the repository, or ORLOJ_REFERENCE_CLIENT)';
  if (!fs.existsSync(CHROMIUM)) return `no Chromium at ${CHROMIUM} (scripts/reference-client.sh installs Debian's chromium)`;
  if (!services.docker) return 'no container runtime (TEST_DOCKER_HOST)';
  return undefined;
}

/** `port` when nothing listens on it (0: any free port), else undefined. */
async function freeOrUndefined(port: number): Promise<number | undefined> {
  const probe = net.createServer();
  return new Promise((resolve) => {
    probe.once('error', () => resolve(undefined));
    probe.listen(port, '127.0.0.1', () => {
      const { port: got } = probe.address() as net.AddressInfo;
      probe.close(() => resolve(got));
    });
  });
}

/**
 * Page script (as text: the tests are type-checked without the DOM's types):
 * records every toast the page ever shows (sonner's `[data-sonner-toast]`),
 * however briefly, in `globalThis.toasts`.
 */
const RECORD_TOASTS = `
  globalThis.toasts = [];
  new MutationObserver((records) => {
    for (const r of records) {
      for (const node of r.addedNodes) {
        if (!(node instanceof Element)) continue;
        const found = node.matches('[data-sonner-toast]') ? [node] : [...node.querySelectorAll('[data-sonner-toast]')];
        for (const t of found) globalThis.toasts.push((t.getAttribute('data-type') || 'toast') + ': ' + (t.textContent || ''));
      }
    }
  }).observe(document, { childList: true, subtree: true });
`;

/** Page script: resolves after the next two frames, by when a toast raised just before is on screen. */
const TWO_FRAMES = 'new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve)))';

describe("the reference project's dashboard against orloj, in a real browser", function () {
  this.timeout(4 * WAIT);
  let dataDir: string | undefined;
  let orloj: RunningOrloj | undefined;
  let app: ServedClient | undefined;
  let browser: Browser | undefined;
  let context: BrowserContext;
  let page: Page;
  let api: TestClient;
  let apiOrigin: string;
  const problems: string[] = [];
  /** Jobs scheduled so far (their Idempotency-Keys). */
  let jobsRun = 0;

  before(async function () {
    this.timeout(BUILD_WAIT + 2 * WAIT);
    const tarball = findReferenceTarball();
    const why = missing(tarball);
    if (why) {
      if (requireServices) throw new Error(`REQUIRE_SERVICES=1 but ${why}`);
      this.skip();
    }
    // Another process on the port: build for a free one instead (minutes, once).
    const apiPort = (await freeOrUndefined(API_PORT)) ?? (await freeOrUndefined(0))!;
    apiOrigin = `http://localhost:${apiPort}`;
    const built = await buildReferenceClient(tarball!, apiOrigin, (line) => console.log(`      ${line}`));
    app = await serveReferenceClient(built, (await freeOrUndefined(0))!);

    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'orloj-reference-client-'));
    orloj = await startOrloj({
      DATA_DIR: dataDir,
      PORT: String(apiPort),
      // The app's middleware and cookies work by host name: both served at localhost.
      SERVER_HOST_URL: apiOrigin,
      SERVER_ALLOWED_ORIGINS: app.url,
      DOCKER_HOST: services.docker!,
      CONTAINER_REGISTRIES: 'docker.io,localhost',
      // The app polls several lists at once; the limits have their own tests.
      RATE_LIMIT_ENABLED: 'false',
    });
    api = new TestClient(`http://127.0.0.1:${apiPort}`);
    const registered = await api.post('/auth/register', { email: 'reference@example.com', password: 'correct horse' });
    assert.equal(registered.status, 201, registered.text);

    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
    context = await browser.newContext({ viewport: { width: 1440, height: 900 }, colorScheme: 'light' });
    context.setDefaultTimeout(WAIT);
    // Signed in as the app would be after its sign-in page: orloj's cookies, which localhost shares across ports.
    await context.addCookies([...api.cookies].map(([name, value]) => ({ name, value, url: apiOrigin })));
    await context.addInitScript(RECORD_TOASTS);
    const allowed = new Set([app.url, apiOrigin]);
    context.on('request', (req) => {
      const url = new URL(req.url());
      if (!allowed.has(url.origin) && url.protocol !== 'data:' && url.protocol !== 'blob:') problems.push(`request to another host: ${req.url()}`);
    });
    page = await context.newPage();
    page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
  });

  after(async () => {
    await browser?.close();
    await stopOrloj(orloj);
    await app?.stop();
    if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
  });

  afterEach(function () {
    if (this.currentTest?.state === 'failed' && orloj) console.log(`      orloj's output:\n${orloj.output().slice(-3000)}\n      the app's output:\n${app?.output().slice(-2000)}`);
    assert.deepEqual(problems.splice(0), [], 'the page went only to the app and orloj, without uncaught errors');
  });

  /** A CONTAINER workflow running `script`, built; its id. */
  async function containerWorkflow(name: string, script: string): Promise<string> {
    const payload = JSON.stringify({ image: TEST_IMAGE, cmd: ['sh', '-c', script], timeout: '2m' });
    const created = await api.post('/workflows', { name, kind: 'CONTAINER', interval: 60, max_consecutive_job_failures_allowed: 3, payload }, { headers: { 'idempotency-key': `${name}-create` } });
    assert.equal(created.status, 201, created.text);
    const id = created.json.id as string;
    await pollUntil(WAIT, `${name} to build`, async () => (await api.get(`/workflows/${id}`)).json, (w) => w.build_status === 'COMPLETED');
    return id;
  }

  /** Runs the workflow now; resolves with the job id once its status satisfies `ready`. */
  async function runJob(workflowId: string, ready: (status: string) => boolean): Promise<string> {
    jobsRun += 1;
    const scheduled = await api.post(`/workflows/${workflowId}/jobs/schedule`, {}, { headers: { 'idempotency-key': `run-${workflowId}-${jobsRun}` } });
    assert.equal(scheduled.status, 201, scheduled.text);
    const jobId = scheduled.json.id as string;
    const job = await pollUntil(WAIT, 'the job', async () => (await api.get(`/workflows/${workflowId}/jobs/${jobId}`)).json, (j) => ready(j.status) || TERMINAL.has(j.status));
    assert.ok(ready(job.status), `the job ended ${job.status} before it was ${job.status === 'RUNNING' ? 'read' : 'running'}`);
    return jobId;
  }

  const toasts = () => page.evaluate('globalThis.toasts.splice(0)') as Promise<string[]>;

  it('shows search matches highlighted (mark elements), never the raw highlight token', async () => {
    const wid = await containerWorkflow('highlights', 'echo "first Needle here"; echo "plain line"; echo "second needle and NEEDLE"');
    const jid = await runJob(wid, (s) => s === 'COMPLETED');
    const search = page.waitForResponse((r) => r.url().includes(`/jobs/${jid}/logs/search?q=needle`));
    await page.goto(`${app!.url}/workflows/${wid}/jobs/${jid}?q=needle`);
    const answer = await search;
    assert.equal(answer.status(), 200);
    const token = ((await answer.json()) as { highlight_token: string }).highlight_token;
    assert.match(token, /^[0-9a-f]{32}$/);
    await page.locator('mark', { hasText: /^NEEDLE$/ }).waitFor();
    const marks = await page.locator('mark').allTextContents();
    assert.deepEqual(marks.sort(), ['NEEDLE', 'Needle', 'needle']);
    const text = await page.locator('body').innerText();
    assert.ok(text.includes('second needle and NEEDLE') && text.includes('first Needle here'), text.slice(0, 2000));
    assert.ok(!text.includes(token) && !text.includes('__CV_HL_'), 'no raw token or marker on the page');
    assert.ok(!(await page.content()).includes(token), 'no raw token in the document');
    assert.deepEqual(await toasts(), []);
    await saveScreenshot(page, 'reference-client-search');
  });

  it(`ends a live tail without an error toast, ${TAIL_RUNS} times`, async function () {
    this.timeout(TAIL_RUNS * 2 * WAIT);
    const script = `i=0; while [ $i -lt ${TAIL_LINES} ]; do i=$((i+1)); echo "tick $i"; sleep 0.5; done`;
    const wid = await containerWorkflow('live tail', script);
    for (let run = 1; run <= TAIL_RUNS; run++) {
      const jid = await runJob(wid, (s) => s === 'RUNNING');
      const opened: Request[] = [];
      const onRequest = (r: Request) => {
        if (r.url().includes(`/jobs/${jid}/events`)) opened.push(r);
      };
      page.on('request', onRequest);
      try {
        const tail = page.waitForRequest((r) => r.url().includes(`/jobs/${jid}/events`));
        await page.goto(`${app!.url}/workflows/${wid}/jobs/${jid}`);
        const stream = await tail;
        const streamOver = Promise.race([
          page.waitForEvent('requestfinished', { predicate: (r) => r === stream, timeout: 2 * WAIT }),
          page.waitForEvent('requestfailed', { predicate: (r) => r === stream, timeout: 2 * WAIT }),
        ]);
        // The lines arrive live, to the last; the page sees the job finished on its next poll and closes the stream.
        await page.getByText(`tick ${TAIL_LINES}`, { exact: true }).waitFor();
        await page.waitForResponse(async (r) => r.url().endsWith(`/jobs/${jid}`) && r.status() === 200 && TERMINAL.has(((await r.json()) as { status: string }).status));
        await streamOver;
        // A toast the end of the stream caused would be on screen by the next frames.
        await page.evaluate(TWO_FRAMES);
        assert.deepEqual(await toasts(), [], `run ${run}: no toast at the end of the live tail`);
        assert.equal(opened.length, 1, `run ${run}: one stream, no reconnect`);
      } finally {
        page.off('request', onRequest);
      }
    }
    await saveScreenshot(page, 'reference-client-live-tail');
  });

  it('keeps notifications marked read gone across the next poll, and the bell empty', async function () {
    this.timeout(4 * WAIT);
    // Its own notifications, however many the other tests left: theirs read first, then
    // a "Build completed" and ten "Job completed" (more than the bell's 9), all unread.
    const before = (await api.get('/notifications?include_read=true&limit=100')).json.notifications as { id: string }[];
    if (before.length) assert.equal((await api.put('/notifications', { ids: before.map((n) => n.id) })).status, 204);
    const wid = await containerWorkflow('notifications', 'echo done');
    for (let i = 0; i < 10; i++) await runJob(wid, (s) => s === 'COMPLETED');
    type Listed = { id: string; payload: string; read_at?: string };
    const ours = (list: Listed[]) => list.filter((n) => (JSON.parse(n.payload) as { workflow_id?: string }).workflow_id === wid);
    await pollUntil(WAIT, 'its 11 notifications, unread', async () => ours((await api.get('/notifications?unread=true&limit=100')).json.notifications as Listed[]).length, (n) => n === 11);
    await page.goto(`${app!.url}/`);
    const bell = page.locator('header button', { has: page.locator('.sr-only', { hasText: 'Notifications' }) });
    await bell.getByText('9+').waitFor();
    await bell.click();
    const drawer = page.getByRole('dialog');
    await drawer.getByText('Job completed').first().waitFor();
    await drawer.getByRole('checkbox', { name: 'Select all notifications' }).click();
    await drawer.getByText(/^([1-9]\d*) selected$/).waitFor();
    const marked = page.waitForResponse((r) => r.url().endsWith('/notifications') && r.request().method() === 'PUT');
    await drawer.getByRole('button', { name: 'Mark as read' }).click();
    assert.equal((await marked).status(), 204);
    await drawer.getByText('You’re all caught up!').or(drawer.getByText("You're all caught up!")).waitFor();
    // The app polls every 10 s: its next list must not bring them back.
    const poll = await page.waitForResponse((r) => new URL(r.url()).pathname === '/notifications' && r.request().method() === 'GET', { timeout: 2 * WAIT });
    assert.equal(poll.status(), 200);
    assert.deepEqual(((await poll.json()) as { notifications: unknown[] }).notifications, []);
    await page.evaluate(TWO_FRAMES);
    assert.equal(await drawer.getByText('Job completed').count(), 0, 'the drawer stays empty');
    assert.equal(await bell.locator('[data-slot="badge"]').count(), 0, 'no count on the bell');
    assert.deepEqual(await toasts(), []);
    await saveScreenshot(page, 'reference-client-notifications');
    // orloj's own history still has them, read.
    const history = ours((await api.get('/notifications?include_read=true&limit=100')).json.notifications as Listed[]);
    assert.equal(history.length, 11);
    assert.ok(history.every((n) => n.read_at));
  });
});
