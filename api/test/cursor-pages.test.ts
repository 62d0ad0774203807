import assert from 'node:assert/strict';
import fc from 'fast-check';
import { newId } from '@orloj/common/core';
import { JOB_STATUSES } from '@orloj/common/domain';
import { insertJob, workflowFixture } from '@orloj/common/test-support';
import { describeApi, type ApiHarness } from './support/harness.js';
import type { TestClient } from './support/client.js';
import { containerWorkflow, insertLines, logsPath, T0, type Line } from './support/logs.js';
import { userIdOf } from './support/notifications.js';

/**
 * Cursor round-trips, as properties (fast-check), for every cursor-paged list of the API:
 * GET /workflows, /workflows/{id}/jobs, /notifications, and a job's /logs and /logs/search.
 * Following the cursors through any generated set with any page size (or none: the
 * default) yields each listed item exactly once, in the list's order; every page but the
 * last has the same length, at most the size asked, and only an empty list ends on an
 * empty page. Sort keys are drawn from a few values so that many items share one and the
 * id tie-break is walked too. On both engines (describeApi).
 */

type Json = Record<string, any>;

/**
 * Runs per list and engine: each makes its own user (a registration: fewer runs), or
 * workflow or job (cheap: more runs), so none sees another's rows.
 */
const USER_RUNS = 10;
const RUNS = 30;
const SIZES = fc.option(fc.integer({ min: 1, max: 9 }), { nil: undefined });
/** Sort keys from five values, so that ties are common. */
const KEY = fc.integer({ min: 0, max: 4 });

/** Newest first by key, then by id descending: the order of every keyset list here. */
function newestFirst<T>(key: (t: T) => number, id: (t: T) => string): (a: T, b: T) => number {
  return (a, b) => key(b) - key(a) || (id(a) < id(b) ? 1 : id(a) > id(b) ? -1 : 0);
}

/**
 * Follows the cursors of `path` (its query in `query`) asking for `limit` per page; the
 * keys of every item, in the order the pages gave them, after checking the pages' lengths.
 */
async function walk(c: TestClient, path: string, query: Record<string, string>, limit: number | undefined, field: string, key: (item: Json) => string): Promise<string[]> {
  const pages: string[][] = [];
  let cursor = '';
  do {
    const params = new URLSearchParams({ ...query, ...(limit === undefined ? {} : { limit: String(limit) }), ...(cursor ? { cursor } : {}) });
    const res = await c.get(`${path}?${params}`);
    assert.equal(res.status, 200, `${path}?${params}: ${res.text}`);
    pages.push((res.json[field] as Json[]).map(key));
    cursor = res.json.cursor as string;
    assert.ok(pages.length <= 500, `${path}: the cursors do not end`);
  } while (cursor);
  const size = pages[0]!.length;
  if (limit !== undefined) assert.ok(size <= limit, `a page of ${size} for limit ${limit}`);
  pages.slice(0, -1).forEach((p, i) => assert.equal(p.length, size, `page ${i + 1} of ${pages.length} is shorter than the first, yet has a cursor`));
  if (pages.length > 1) assert.ok(pages.at(-1)!.length > 0, 'a cursor that leads to an empty page');
  return pages.flat();
}

/** Runs the property `numRuns` times; a failure names the smallest counterexample fast-check found. */
function property<T>(arb: fc.Arbitrary<T>, check: (input: T) => Promise<void>, numRuns = RUNS): Promise<void> {
  return fc.assert(fc.asyncProperty(arb, check), { numRuns });
}

describeApi('cursor round-trips, every cursor-paged list (property)', (h) => {
  const store = () => h().db.store;

  /** A fresh user, its id and client. */
  async function freshUser(harness: ApiHarness): Promise<{ c: TestClient; userId: string }> {
    const c = await harness.user();
    return { c, userId: await userIdOf(harness.db.store, c) };
  }

  it('GET /workflows: active workflows, newest first by created_at then id, each once', async () => {
    const items = fc.array(fc.record({ key: KEY, terminated: fc.boolean() }), { maxLength: 24 });
    await property(fc.tuple(items, SIZES), async ([specs, limit]) => {
      const { c, userId } = await freshUser(h());
      const rows = specs.map((s, i) => workflowFixture(userId, { name: `w${i}`, createdAt: T0 + s.key * 1000, terminatedAt: s.terminated ? T0 + 9000 : null }));
      for (const w of rows) await store().workflows.insert(w);
      const expected = rows.filter((w) => w.terminatedAt === null).sort(newestFirst((w) => w.createdAt, (w) => w.id));
      assert.deepEqual(await walk(c, '/workflows', {}, limit, 'workflows', (w) => w.id as string), expected.map((w) => w.id));
    }, USER_RUNS);
  });

  it('GET /workflows/{id}/jobs: every job of the workflow, newest first by scheduled_at then id, each once', async () => {
    const { c, userId } = await freshUser(h());
    const items = fc.array(fc.record({ key: KEY, status: fc.constantFrom(...JOB_STATUSES) }), { maxLength: 24 });
    await property(fc.tuple(items, SIZES), async ([specs, limit]) => {
      const w = workflowFixture(userId);
      await store().workflows.insert(w);
      const jobs = [];
      // One QUEUED or RUNNING job at most per workflow (jobs_one_active_uq): later ones have COMPLETED.
      let active = false;
      for (const s of specs) {
        const busy = s.status === 'QUEUED' || s.status === 'RUNNING';
        jobs.push(await insertJob(store(), w, busy && active ? 'COMPLETED' : s.status, { at: T0 + s.key * 60_000 }));
        active ||= busy;
      }
      const expected = jobs.sort(newestFirst((j) => j.scheduledAt, (j) => j.id));
      assert.deepEqual(await walk(c, `/workflows/${w.id}/jobs`, {}, limit, 'jobs', (j) => j.id as string), expected.map((j) => j.id));
    });
  });

  it('GET /notifications: unread ones, newest first by created_at then id, each once', async () => {
    const items = fc.array(fc.record({ key: KEY, read: fc.boolean() }), { maxLength: 24 });
    await property(fc.tuple(items, SIZES), async ([specs, limit]) => {
      const { c, userId } = await freshUser(h());
      const w = workflowFixture(userId);
      await store().workflows.insert(w);
      const rows = specs.map((s) => {
        const id = newId();
        const at = T0 + s.key * 1000;
        const payload = { title: 'N', message: 'm', entity_type: 'WORKFLOW', entity_id: w.id, workflow_id: w.id, action_url: `/workflows/${w.id}` };
        return { id, userId, workflowId: w.id, dedupeKey: `${userId}:test:${id}`, kind: 'WEB_INFO' as const, payload: JSON.stringify(payload), readAt: s.read ? at : null, createdAt: at, updatedAt: at };
      });
      for (const n of rows) assert.ok(await store().notifications.insert(n));
      const expected = rows.filter((n) => n.readAt === null).sort(newestFirst((n) => n.createdAt, (n) => n.id));
      assert.deepEqual(await walk(c, '/notifications', {}, limit, 'notifications', (n) => n.id as string), expected.map((n) => n.id));
    }, USER_RUNS);
  });

  describe("a job's log lines", () => {
    const line = fc.record({ stream: fc.constantFrom('stdout' as const, 'stderr' as const), message: fc.constantFrom('needle', 'hay', 'a needle in hay', 'stack') });
    /** Lines at distinct sequence numbers (gaps included), in any order of insertion. */
    const LINES = fc.uniqueArray(fc.tuple(fc.integer({ min: 0, max: 400 }), line), { maxLength: 40, selector: ([n]) => n });
    let c: TestClient;
    let workflowId: string;

    before(async () => {
      c = await h().user();
      workflowId = await containerWorkflow(c);
    });

    /** A job of the workflow with these lines on its attempt; the lines, newest first. */
    async function jobWith(specs: readonly [number, { stream: 'stdout' | 'stderr'; message: string }][]): Promise<{ jobId: string; lines: Line[] }> {
      const job = await insertJob(store(), workflowId, 'COMPLETED');
      const lines = specs.map(([n, l]) => ({ sequence_num: n, ...l, timestamp: T0 + n }));
      await insertLines(h(), job.id, job.attempts, lines);
      return { jobId: job.id, lines: lines.sort((a, b) => b.sequence_num - a.sequence_num) };
    }
    const seq = (l: Json) => String(l.sequence_num);

    it('GET .../logs: every line of the attempt, newest first by sequence_num, each once', async () => {
      await property(fc.tuple(LINES, SIZES), async ([specs, limit]) => {
        const { jobId, lines } = await jobWith(specs);
        assert.deepEqual(await walk(c, logsPath(workflowId, jobId), {}, limit, 'logs', seq), lines.map(seq));
      });
    });

    it('GET .../logs/search: every matching line (by text, and stream when given), newest first, each once', async () => {
      const stream = fc.option(fc.constantFrom('stdout' as const, 'stderr' as const), { nil: undefined });
      await property(fc.tuple(LINES, SIZES, stream), async ([specs, limit, only]) => {
        const { jobId, lines } = await jobWith(specs);
        const expected = lines.filter((l) => l.message.includes('needle') && (only === undefined || l.stream === only));
        const query = { q: 'needle', ...(only ? { stream: only } : {}) };
        assert.deepEqual(await walk(c, logsPath(workflowId, jobId, '/search'), query, limit, 'logs', seq), expected.map(seq));
      });
    });
  });
});
