import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { systemClock } from '@orloj/common/core';
import { silentLogger } from '@orloj/common/logging';
import { MESSAGE_TYPES, TOPICS } from '@orloj/common/messages';
import { roleBus, type RoleKeys, type SignedBus } from '@orloj/common/envelope';
import { MemoryBus } from '@orloj/common/bus';
import { ApiServer, LiveTailHub, type LiveTailSettings } from '@orloj/api';
import { SseStream } from '../src/http/sse.js';
import { describeApi, testConfig, type ApiHarness } from './support/harness.js';
import { TestClient } from './support/client.js';
import { containerWorkflow, entry, heartbeatWorkflow, insertLines, lines, type Line } from './support/logs.js';
import { SseReader } from './support/sse.js';
import { generateKeys, insertJob, waitFor } from '@orloj/common/test-support';

type Json = Record<string, any>;

const eventsPath = (workflowId: string, jobId: string, query = '') => `/workflows/${workflowId}/jobs/${jobId}/events${query}`;
const ids = (r: SseReader) => r.logs().map((e) => Number(e.id));
const range = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => from + i);
const messages = (from: number, to: number) => range(from, to).map((i) => `line ${i} ${i % 5 === 0 ? 'ÜNÏCÖDÉ 🚀' : ''}`);

/** Timings short enough for tests; keep-alives often, so a test can wait for time to pass by counting them. */
const FAST = { pollMs: 20, statusMs: 100, keepAliveMs: 50, holeGraceMs: 60_000 };

async function complete(h: ApiHarness, jobId: string): Promise<void> {
  const now = Date.now();
  assert.ok(await h.db.store.jobMoves.transition(jobId, 'COMPLETED', now, { completedAt: now }), 'job completed');
}

/** The event sequence a whole tail must be: connected, the lines in order, end. */
function assertWhole(r: SseReader, jobId: string, workflowId: string, attempt: number, rows: readonly Line[], status = 'COMPLETED'): void {
  assert.equal(r.events[0]?.event, 'connected');
  assert.deepEqual(r.events[0]?.json, { id: jobId, workflow_id: workflowId });
  assert.equal(r.events[0]?.id, undefined);
  const last = r.events[r.events.length - 1]!;
  assert.equal(last.event, 'end');
  // the last line's id (0 without lines): a reconnect after end sends it back and gets 204
  assert.equal(last.id, String(Math.max(0, ...rows.map((l) => l.sequence_num))));
  assert.deepEqual(last.json, { id: jobId, workflow_id: workflowId, status });
  const middle = r.events.slice(1, -1);
  assert.deepEqual(
    middle.map((e) => e.event).filter((n) => n !== 'log'),
    [],
  );
  assert.deepEqual(
    middle.map((e) => e.id),
    rows.map((l) => String(l.sequence_num)),
  );
  assert.deepEqual(
    middle.map((e) => e.json as Json),
    rows.map((l) => entry(jobId, attempt, l)),
  );
  assert.ok(!r.ended, 'the stream stays open after end, for the client to close');
}

describeApi(
  'live log tail (SSE, polling the store)',
  (h) => {
    const store = () => h().db.store;
    const open: SseReader[] = [];
    const tail = async (c: TestClient, path: string, headers: Record<string, string> = {}) => {
      const r = await SseReader.open(c, path, headers);
      open.push(r);
      return r;
    };
    afterEach(() => {
      for (const r of open.splice(0)) r.close();
    });

    async function runningJob(stored: number) {
      const c = await h().user();
      const wid = await containerWorkflow(c);
      const job = await insertJob(store(), wid, 'RUNNING');
      const rows = lines(messages(0, stored));
      await insertLines(h(), job.id, job.attempts, rows);
      return { c, wid, job, rows };
    }

    it('sends connected, every stored line as a log event, then end for a finished job', async () => {
      const c = await h().user();
      const wid = await containerWorkflow(c);
      const job = await insertJob(store(), wid, 'FAILED');
      const rows = lines(messages(0, 25));
      await insertLines(h(), job.id, job.attempts, rows);
      await insertLines(h(), job.id, job.attempts + 1, lines(['another attempt']));
      const r = await tail(c, eventsPath(wid, job.id));
      assert.equal(r.status, 200);
      assert.match(String(r.headers['content-type']), /^text\/event-stream/);
      assert.equal(r.headers['cache-control'], 'no-store');
      await r.endEvent();
      assertWhole(r, job.id, wid, job.attempts, rows, 'FAILED');
      const api = await tail(c, `/api${eventsPath(wid, job.id)}`);
      await api.endEvent();
      assertWhole(api, job.id, wid, job.attempts, rows, 'FAILED');
    });

    it('tails a running job opened mid-run: every line once, in order, then end', async () => {
      const { c, wid, job } = await runningJob(10);
      const r = await tail(c, eventsPath(wid, job.id));
      await r.until((x) => x.logs().length === 10, 'the stored lines');
      // Lines arrive while the stream is open: some while the tail catches up, some one by one.
      await insertLines(h(), job.id, job.attempts, lines(messages(10, 40), 10));
      await insertLines(h(), job.id, job.attempts, lines(messages(40, 45), 40));
      await r.until((x) => x.logs().length >= 20, 'some of the new lines');
      for (let i = 45; i < 60; i++) await insertLines(h(), job.id, job.attempts, lines(messages(i, i + 1), i));
      await r.until((x) => x.logs().length === 60, 'every line');
      await insertLines(h(), job.id, job.attempts, lines(messages(60, 1060), 60));
      await complete(h(), job.id);
      await r.endEvent();
      assertWhole(r, job.id, wid, job.attempts, lines(messages(0, 1060)));
    });

    it('takes lastEventId as the header, and answers a reconnect after end with 204 instead of a replay', async () => {
      const c = await h().user();
      const wid = await containerWorkflow(c);
      const job = await insertJob(store(), wid, 'COMPLETED');
      const rows = lines(messages(0, 25));
      await insertLines(h(), job.id, job.attempts, rows);
      const first = await tail(c, eventsPath(wid, job.id));
      await first.endEvent();
      const endId = first.events[first.events.length - 1]!.id!;
      assert.equal(endId, '24');
      for (const [query, headers] of [['', { 'last-event-id': endId }], [`?lastEventId=${endId}`, {}], [`?since=3&lastEventId=${endId}`, {}]] as const) {
        const again = await tail(c, eventsPath(wid, job.id, query), headers);
        assert.equal(again.status, 204, `${query} ${JSON.stringify(headers)}`);
      }
      // mid-log, the alias resumes like the header, and wins over since
      const resumed = await tail(c, eventsPath(wid, job.id, '?since=2&lastEventId=19'));
      await resumed.endEvent();
      assertWhole(resumed, job.id, wid, job.attempts, rows.slice(20));
      const bad = await tail(c, eventsPath(wid, job.id, '?lastEventId=x'));
      assert.equal(bad.status, 400);
      assert.match(bad.text, /lastEventId/);
      // a job without lines: end says 0, and the reconnect with it is told to stop
      const empty = await insertJob(store(), wid, 'FAILED');
      const none = await tail(c, eventsPath(wid, empty.id));
      await none.endEvent();
      assert.equal(none.events[none.events.length - 1]?.id, '0');
      assert.equal((await tail(c, eventsPath(wid, empty.id), { 'last-event-id': '0' })).status, 204);
    });

    it('resumes after Last-Event-ID, or since, with no gap and no duplicate; the header wins over since', async () => {
      const { c, wid, job } = await runningJob(30);
      const byHeader = await tail(c, eventsPath(wid, job.id), { 'last-event-id': '19' });
      const bySince = await tail(c, eventsPath(wid, job.id, '?since=19'));
      const both = await tail(c, eventsPath(wid, job.id, '?since=5'), { 'last-event-id': '19' });
      const fromStart = await tail(c, eventsPath(wid, job.id, '?since=0'));
      for (const r of [byHeader, bySince, both]) await r.until((x) => x.logs().length === 10, 'lines 20 to 29');
      await insertLines(h(), job.id, job.attempts, lines(messages(30, 50), 30));
      await complete(h(), job.id);
      for (const r of [byHeader, bySince, both, fromStart]) await r.endEvent();
      for (const r of [byHeader, bySince, both]) assertWhole(r, job.id, wid, job.attempts, lines(messages(0, 50)).slice(20));
      assertWhole(fromStart, job.id, wid, job.attempts, lines(messages(0, 50)).slice(1));
    });

    it('holds lines back behind a missing sequence_num until it is stored', async () => {
      const { c, wid, job } = await runningJob(10);
      const r = await tail(c, eventsPath(wid, job.id));
      await r.until((x) => x.logs().length === 10, 'the stored lines');
      // 20-29 are committed before 10-19 (two log-ingest consumers, say).
      await insertLines(h(), job.id, job.attempts, lines(messages(20, 30), 20));
      const seen = r.comments;
      await r.until((x) => x.comments >= seen + 4, 'a few poll intervals');
      assert.deepEqual(ids(r), range(0, 10), 'nothing after the gap is sent');
      await insertLines(h(), job.id, job.attempts, lines(messages(10, 20), 10));
      await r.until((x) => x.logs().length === 30, 'the gap and the lines after it');
      await complete(h(), job.id);
      await r.endEvent();
      assertWhole(r, job.id, wid, job.attempts, lines(messages(0, 30)));
    });

    it('moves past a sequence_num that never arrives once the job has ended', async () => {
      const { c, wid, job } = await runningJob(5);
      const later = lines(messages(6, 10), 6);
      await insertLines(h(), job.id, job.attempts, later);
      const r = await tail(c, eventsPath(wid, job.id));
      await r.until((x) => x.logs().length === 5, 'the lines before the gap');
      await complete(h(), job.id);
      await r.endEvent();
      assertWhole(r, job.id, wid, job.attempts, [...lines(messages(0, 5)), ...later]);
    });

    it("follows a retry: the new attempt's lines, numbered from 0 again", async () => {
      const { c, wid, job } = await runningJob(5);
      const r = await tail(c, eventsPath(wid, job.id));
      await r.until((x) => x.logs().length === 5, 'the first attempt');
      const retry = lines(['retry 0', 'retry 1', 'retry 2']);
      await insertLines(h(), job.id, 2, retry);
      await h().db.handle.db.updateTable('jobs').set({ attempts: 2 }).where('id', '=', job.id).execute();
      await r.until((x) => x.logs().length === 8, 'the second attempt');
      await complete(h(), job.id);
      await r.endEvent();
      assert.deepEqual(ids(r), [0, 1, 2, 3, 4, 0, 1, 2]);
      assert.deepEqual(
        r.logs().slice(5).map((e) => e.json as Json),
        retry.map((l) => entry(job.id, 2, l)),
      );
    });

    it('sends keep-alive comments while nothing happens', async () => {
      const { c, wid, job } = await runningJob(0);
      const r = await tail(c, eventsPath(wid, job.id));
      await r.until((x) => x.comments >= 2, 'keep-alive comments');
      assert.deepEqual(
        r.events.map((e) => e.event),
        ['connected'],
      );
    });

    it('holds the stream open after end, with keep-alive comments and nothing else, until the client closes it', async () => {
      const c = await h().user();
      const wid = await containerWorkflow(c);
      const job = await insertJob(store(), wid, 'COMPLETED');
      await insertLines(h(), job.id, job.attempts, lines(messages(0, 3)));
      // A server of its own, to count the streams it holds.
      const server = new ApiServer({ store: store(), config: testConfig(), clock: systemClock, logger: silentLogger, liveTail: FAST });
      try {
        const other = new TestClient(`http://127.0.0.1:${(await server.start()).port}`);
        for (const [k, v] of c.cookies) other.cookies.set(k, v);
        const r = await tail(other, eventsPath(wid, job.id));
        await r.endEvent();
        const seen = r.comments;
        await r.until((x) => x.comments >= seen + 3, 'keep-alive comments after end');
        assert.ok(!r.ended, 'still open');
        assert.equal(r.events.at(-1)?.event, 'end', 'no event after end');
        assert.equal(server.liveTailSubscribers, 1);
        r.close();
        await waitFor(() => server.liveTailSubscribers === 0, 'the server to let the closed stream go');
      } finally {
        await server.stop();
      }
    });

    it('sends one error event and closes when the workflow keeps no logs, or the job is not found', async () => {
      const c = await h().user();
      const noRetention = await containerWorkflow(c, { logRetention: false });
      const heartbeat = await heartbeatWorkflow(c);
      const retained = await containerWorkflow(c);
      const mine = await insertJob(store(), retained, 'RUNNING');
      const stranger = await h().user();
      const cases: [TestClient, string, number, string][] = [
        [c, eventsPath(noRetention, (await insertJob(store(), noRetention, 'RUNNING')).id), 412, 'log_retention_disabled'],
        [c, eventsPath(heartbeat, (await insertJob(store(), heartbeat, 'COMPLETED')).id), 412, 'log_retention_disabled'],
        [c, eventsPath(retained, crypto.randomUUID()), 404, 'not_found'],
        [c, eventsPath(noRetention, mine.id), 404, 'not_found'],
        [stranger, eventsPath(retained, mine.id), 404, 'not_found'],
      ];
      for (const [client, path, status, code] of cases) {
        const r = await tail(client, path);
        await r.closed();
        assert.equal(r.status, 200, path);
        assert.match(String(r.headers['content-type']), /^text\/event-stream/);
        assert.deepEqual(
          r.events.map((e) => e.event),
          ['error'],
          path,
        );
        assert.equal(r.events[0]!.json.status, status);
        assert.equal(r.events[0]!.json.code, code);
        assert.equal(r.events[0]!.json.type, `urn:orloj:problem:${code}`);
      }
    });

    it('answers 400 for a bad since or Last-Event-ID or path parameter, and 401 signed out (problem documents, not streams)', async () => {
      const { c, wid, job } = await runningJob(1);
      const bad: [string, Record<string, string>, string][] = [
        ['?since=-1', {}, 'since'],
        ['?since=abc', {}, 'since'],
        ['?since=2147483648', {}, 'since'],
        ['?since=1&since=2', {}, 'since'],
        ['', { 'last-event-id': 'x' }, 'Last-Event-ID'],
        ['', { 'last-event-id': '-3' }, 'Last-Event-ID'],
        ['', { 'last-event-id': '99999999999' }, 'Last-Event-ID'],
      ];
      for (const [q, headers, field] of bad) {
        const r = await tail(c, eventsPath(wid, job.id, q), headers);
        assert.equal(r.status, 400, q || JSON.stringify(headers));
        assert.equal(r.headers['content-type'], 'application/problem+json');
        assert.deepEqual(
          (JSON.parse(r.text) as Json).errors.map((e: Json) => e.field),
          [field],
        );
      }
      const badPath = await tail(c, eventsPath('nope', job.id));
      assert.equal(badPath.status, 400);
      const anonymous = await tail(h().client(), eventsPath(wid, job.id));
      assert.equal(anonymous.status, 401);
      assert.equal(anonymous.headers['content-type'], 'application/problem+json');
    });

    it('ends open streams when the server stops, without hanging the shutdown', async () => {
      const { c, wid, job } = await runningJob(3);
      const server = new ApiServer({ store: store(), config: testConfig(), clock: systemClock, logger: silentLogger, liveTail: FAST });
      const address = await server.start();
      const other = new TestClient(`http://127.0.0.1:${address.port}`);
      for (const [k, v] of c.cookies) other.cookies.set(k, v);
      const readers = [await tail(other, eventsPath(wid, job.id)), await tail(other, eventsPath(wid, job.id, '?since=1'))];
      for (const r of readers) await r.until((x) => x.events.length >= 2, 'the stream is live');
      // and one held open after its end
      const finished = await insertJob(store(), wid, 'COMPLETED');
      const held = await tail(other, eventsPath(wid, finished.id));
      await held.endEvent();
      await server.stop();
      for (const r of readers) {
        await r.closed();
        assert.ok(!r.events.some((e) => e.event === 'end'), 'no end: the job has not ended');
      }
      await held.closed();
    });
  },
  { liveTail: FAST },
);

/** In-process limits on, with request rates no test reaches: only the stream limits bite. */
const STREAM_LIMITS_ONLY = {
  RATE_LIMIT_ENABLED: 'true',
  RATE_LIMIT_API_PER_SECOND: '100000',
  RATE_LIMIT_API_BURST: '100000',
  RATE_LIMIT_AUTH_PER_MINUTE: '100000',
  RATE_LIMIT_AUTH_BURST: '100000',
};

describeApi(
  'live log tail: held open after end for LIVE_TAIL_HOLD_AFTER_END at most',
  (h) => {
    it('ends a stream the client keeps open after end once the hold is over; the reconnect is told there is nothing left', async () => {
      const c = await h().user();
      const wid = await containerWorkflow(c);
      const job = await insertJob(h().db.store, wid, 'COMPLETED');
      const rows = lines(messages(0, 4));
      await insertLines(h(), job.id, job.attempts, rows);
      const r = await SseReader.open(c, eventsPath(wid, job.id));
      try {
        await r.endEvent();
        const atEnd = r.comments;
        await r.closed();
        assert.deepEqual(
          r.events.map((e) => e.event),
          ['connected', 'log', 'log', 'log', 'log', 'end'],
        );
        assert.ok(r.comments > atEnd, 'keep-alive comments while held');
        const again = await SseReader.open(c, eventsPath(wid, job.id), { 'last-event-id': r.events.at(-1)!.id! });
        assert.equal(again.status, 204);
      } finally {
        r.close();
      }
    });
  },
  // The hold from the environment, as an operator sets it (the keep-alives of FAST, no hold of its own).
  { env: { LIVE_TAIL_HOLD_AFTER_END: '300ms' }, liveTail: FAST },
);

describeApi(
  'live log tail: at most 5 streams per client address',
  (h) => {
    it('answers 429 (a problem, not a stream) to the sixth concurrent stream, and frees the slot when one closes', async () => {
      const c = await h().user();
      const wid = await containerWorkflow(c);
      const job = await insertJob(h().db.store, wid, 'RUNNING');
      const path = eventsPath(wid, job.id);
      const readers: SseReader[] = [];
      try {
        for (let i = 0; i < 5; i++) {
          const r = await SseReader.open(c, path);
          readers.push(r);
          assert.equal(r.status, 200);
          await r.until((x) => x.events.length >= 1, 'connected');
        }
        const sixth = await SseReader.open(c, path);
        assert.equal(sixth.status, 429);
        assert.equal(sixth.headers['content-type'], 'application/problem+json');
        assert.equal(sixth.headers['retry-after'], '1');
        assert.equal((JSON.parse(sixth.text) as Json).code, 'rate_limited');
        // Other routes are not affected.
        assert.equal((await c.get(`/workflows/${wid}/jobs/${job.id}/logs`)).status, 200);

        readers.shift()!.close();
        const deadline = Date.now() + 10_000;
        let again: SseReader;
        for (;;) {
          again = await SseReader.open(c, path);
          if (again.status === 200 || Date.now() > deadline) break;
          assert.equal(again.status, 429);
        }
        readers.push(again);
        assert.equal(again.status, 200, 'a slot is free again once a stream closed');
      } finally {
        for (const r of readers) r.close();
      }
    });
  },
  {
    env: STREAM_LIMITS_ONLY,
    liveTail: FAST,
  },
);

describeApi(
  'live log tail: at most LIVE_TAIL_MAX_STREAMS_PER_USER streams per user, from any address',
  (h) => {
    it('answers 429 to a user holding the maximum from as many addresses, while another user still opens one', async () => {
      const c = await h().user();
      const wid = await containerWorkflow(c);
      const job = await insertJob(h().db.store, wid, 'RUNNING');
      const path = eventsPath(wid, job.id);
      // Through the trusted proxy (the test's own address), each stream from an address of its own.
      const from = (i: number) => ({ 'x-forwarded-for': `198.51.100.${i}` });
      const readers: SseReader[] = [];
      try {
        for (let i = 1; i <= 3; i++) {
          const r = await SseReader.open(c, path, from(i));
          readers.push(r);
          assert.equal(r.status, 200);
          await r.until((x) => x.events.length >= 1, 'connected');
        }
        const fourth = await SseReader.open(c, path, from(4));
        assert.equal(fourth.status, 429, fourth.text);
        assert.equal(fourth.headers['retry-after'], '1');
        assert.equal((JSON.parse(fourth.text) as Json).code, 'rate_limited');
        assert.match((JSON.parse(fourth.text) as Json).detail as string, /for one user/);
        // The address of the refused stream has room; another user of any address is unaffected.
        const other = await h().user();
        const otherJob = await insertJob(h().db.store, await containerWorkflow(other), 'RUNNING');
        const theirs = await SseReader.open(other, eventsPath(otherJob.workflowId, otherJob.id), from(4));
        readers.push(theirs);
        assert.equal(theirs.status, 200);
      } finally {
        for (const r of readers) r.close();
      }
    });
  },
  {
    env: { ...STREAM_LIMITS_ONLY, TRUSTED_PROXIES: '127.0.0.1', LIVE_TAIL_MAX_STREAMS_PER_USER: '3' },
    liveTail: FAST,
  },
);


// The api process gets lines from log-ingest's broadcasts; the store is read only to fill gaps.
let bus: MemoryBus | undefined;
let ingest: SignedBus | undefined;
let keys: RoleKeys | undefined;
describeApi(
  'live log tail (SSE, fed by the bus)',
  (h) => {
    after(async () => {
      await bus?.close();
    });

    const broadcast = (jobId: string, workflowId: string, attempt: number, rows: Line[]) =>
      ingest!.broadcast(TOPICS.liveLogs, MESSAGE_TYPES.liveLogs, { job_id: jobId, workflow_id: workflowId, attempt, lines: rows });

    const runningJob = async () => {
      const wid = await containerWorkflow(await h().user());
      return { wid, job: await insertJob(h().db.store, wid, 'RUNNING') };
    };

    /** A hub of its own on the same bus (to read its metrics), over the harness's store. */
    const ownHub = (settings: Partial<LiveTailSettings>) =>
      new LiveTailHub({
        store: h().db.store,
        clock: systemClock,
        logger: silentLogger,
        bus: roleBus({ bus: bus!, role: 'api', keys: keys!, clock: systemClock, logger: silentLogger }),
        settings,
      });

    /** Opens a tail on the hub, without HTTP; its output accumulates in `text`. */
    const openTail = async (hub: LiveTailHub, job: { id: string; attempts: number }, workflowId: string) => {
      const sse = new SseStream();
      const out = { text: '' };
      sse.body.on('data', (chunk: Buffer) => (out.text += chunk.toString('utf8')));
      await hub.open({ sse, jobId: job.id, workflowId, attempt: job.attempts, after: -1 });
      return out;
    };

    it('delivers broadcast lines at once, fills a gap from the store, drops repeats, then ends', async () => {
      const c = await h().user();
      const wid = await containerWorkflow(c);
      const job = await insertJob(h().db.store, wid, 'RUNNING');
      const r = await SseReader.open(c, eventsPath(wid, job.id));
      try {
        await r.until((x) => x.events.length >= 1, 'connected');
        // Not in the store: only the bus can have brought them (store polling is off).
        const first = lines(messages(0, 5));
        await broadcast(job.id, wid, job.attempts, first);
        await r.until((x) => x.logs().length === 5, 'broadcast lines');
        // 5-9 are stored, but only 8-9 reach this process: the gap is read from the store.
        const stored = lines(messages(5, 10), 5);
        await insertLines(h(), job.id, job.attempts, stored);
        await broadcast(job.id, wid, job.attempts, stored.slice(3));
        await r.until((x) => x.logs().length === 10, 'the gap filled from the store');
        // A redelivered batch, another job's and another attempt's lines change nothing.
        await broadcast(job.id, wid, job.attempts, [...stored, ...lines(messages(10, 11), 10)]);
        await broadcast(crypto.randomUUID(), wid, 1, lines(['stranger'], 11));
        await broadcast(job.id, wid, job.attempts + 1, lines(['next attempt'], 11));
        await r.until((x) => x.logs().length === 11, 'line 10');
        await complete(h(), job.id);
        await r.endEvent();
        assertWhole(r, job.id, wid, job.attempts, lines(messages(0, 11)));
      } finally {
        r.close();
      }
    });

    it("serialises each broadcast line once for all of a job's tails, and reads the job once for tails opened together", async () => {
      const { wid, job } = await runningJob();
      // No periodic status reads or polls.
      const hub = ownHub({ pollMs: 600_000, busPollMs: 600_000, statusMs: 600_000, keepAliveMs: 600_000 });
      try {
        const texts = await Promise.all(Array.from({ length: 20 }, () => openTail(hub, job, wid)));
        assert.ok(hub.metrics().statusReads <= 2, `${hub.metrics().statusReads} status reads for 20 tails opened together`);
        const rows = lines(messages(0, 5));
        await broadcast(job.id, wid, job.attempts, rows);
        const whole = rows.map((l) => `event: log\nid: ${l.sequence_num}\ndata: ${JSON.stringify(entry(job.id, job.attempts, l))}\n\n`).join('');
        await waitFor(() => texts.every((t) => t.text.endsWith(whole)), 'every tail to send the 5 lines');
        for (const t of texts) assert.ok(t.text.startsWith('event: connected\n') && t.text.split('event: log\n').length === 6, t.text);
        assert.equal(hub.metrics().frames, 5, 'one serialisation per line, not per tail');
        assert.deepEqual({ jobs: hub.metrics().jobs, tails: hub.metrics().tails }, { jobs: 1, tails: 20 });
      } finally {
        await hub.stop();
      }
      assert.deepEqual({ jobs: hub.metrics().jobs, tails: hub.metrics().tails }, { jobs: 0, tails: 0 }, 'the shared timers went with the last tail');
    });

    it('reads the store for lines no broadcast brought, and only then, checking the line count once for all tails', async () => {
      const { wid, job } = await runningJob();
      const hub = ownHub({ pollMs: 5, busPollMs: 10, statusMs: 600_000, keepAliveMs: 600_000 });
      try {
        const texts = await Promise.all(Array.from({ length: 5 }, () => openTail(hub, job, wid)));
        const store = async (rows: Line[]) => {
          await insertLines(h(), job.id, job.attempts, rows);
          const lines = rows[rows.length - 1]!.sequence_num + 1;
          await h().db.store.logs.recordCount({ jobId: job.id, attempt: job.attempts, workflowId: wid, userId: job.userId, lines });
        };
        const logs = (t: { text: string }) => t.text.split('event: log\n').length - 1;
        // Broadcast and stored: the tails need no store read beyond their first. (Broadcast first,
        // so that no check can find a count above what the tails have.)
        const first = lines(messages(0, 3));
        await broadcast(job.id, wid, job.attempts, first);
        await waitFor(() => texts.every((t) => logs(t) === 3), 'the broadcast lines');
        await store(first);
        const readsBefore = hub.metrics().lineReads;
        const checks = hub.metrics().countReads;
        await waitFor(() => hub.metrics().countReads >= checks + 3, 'three more line-count checks');
        assert.equal(hub.metrics().lineReads, readsBefore, 'no store read while the broadcasts brought every line');
        // Stored, but the broadcast never came: the safety net reads them from the store.
        await store(lines(messages(3, 6), 3));
        await waitFor(() => texts.every((t) => logs(t) === 6), 'the missed lines, from the store');
        for (const t of texts) assert.deepEqual([...t.text.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1])), range(0, 6));
      } finally {
        await hub.stop();
      }
    });
  },
  {
    liveTail: { pollMs: 20, busPollMs: 600_000, statusMs: 100, keepAliveMs: 1_000, holeGraceMs: 60_000 },
    bus: () => {
      keys = generateKeys();
      bus = new MemoryBus({ logger: silentLogger });
      ingest = roleBus({ bus, role: 'log-ingest', keys, clock: systemClock, logger: silentLogger });
      return roleBus({ bus, role: 'api', keys, clock: systemClock, logger: silentLogger });
    },
  },
);
