import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { attemptEnds } from '@orloj/common/domain';
import { insertJob } from '@orloj/common/test-support';
import { describeApi } from './support/harness.js';
import type { HttpResponse } from './support/client.js';
import { containerWorkflow, entry, heartbeatWorkflow, insertLines, lines, logsPath } from './support/logs.js';
import { SseReader } from './support/sse.js';

const fields = (res: HttpResponse) => ((res.json?.errors ?? []) as { field: string }[]).map((e) => e.field).sort();
const iso = (ms: number) => new Date(ms).toISOString();

describeApi('a job\'s attempts (issue 26)', (h) => {
  const store = () => h().db.store;
  const open: SseReader[] = [];
  afterEach(() => {
    for (const r of open.splice(0)) r.close();
  });

  /** A CONTAINER job on its third attempt: the first lost its runner's lease, the second never started; each printed lines. */
  async function thirdAttempt(status: 'RUNNING' | 'COMPLETED' = 'RUNNING') {
    const c = await h().user();
    const wid = await containerWorkflow(c);
    const job = await insertJob(store(), wid, status, { attempts: 3, runnerId: 'runner-b', startedAt: 5_000, completedAt: status === 'COMPLETED' ? 9_000 : null });
    await store().jobAttempts.recordEnded({ jobId: job.id, attempt: 1, runnerId: 'runner-a', startedAt: 1_000, endedAt: 2_000, end: attemptEnds.leaseLost('runner-a') });
    await store().jobAttempts.recordEnded({ jobId: job.id, attempt: 2, runnerId: null, startedAt: null, endedAt: 3_000, end: attemptEnds.notStarted() });
    const first = lines(Array.from({ length: 45 }, (_, i) => `first ${i}`));
    const third = lines(Array.from({ length: 12 }, (_, i) => `third ${i}`));
    await insertLines(h(), job.id, 1, first);
    await insertLines(h(), job.id, 3, third);
    return { c, wid, job, first, third };
  }

  it('lists every attempt oldest first: runner, times, outcome, why it was given up, and its lines', async () => {
    const { c, wid, job } = await thirdAttempt();
    const res = await c.get(`/workflows/${wid}/jobs/${job.id}/attempts`);
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.json, {
      id: job.id,
      workflow_id: wid,
      attempts: [
        { attempt: 1, outcome: 'RETRIED', runner_id: 'runner-a', started_at: iso(1_000), ended_at: iso(2_000), reason: attemptEnds.leaseLost('runner-a'), log_lines: 45 },
        { attempt: 2, outcome: 'RETRIED', ended_at: iso(3_000), reason: attemptEnds.notStarted(), log_lines: 0 },
        { attempt: 3, outcome: 'RUNNING', runner_id: 'runner-b', started_at: iso(5_000), log_lines: 12 },
      ],
    });
  });

  it('lists none for a job waiting for its first attempt, no log counts where no log is kept, and 404 for a job not yours', async () => {
    const c = await h().user();
    const wid = await containerWorkflow(c);
    const pending = await insertJob(store(), wid, 'PENDING');
    assert.deepEqual((await c.get(`/workflows/${wid}/jobs/${pending.id}/attempts`)).json.attempts, []);
    const hid = await heartbeatWorkflow(c);
    const check = await insertJob(store(), hid, 'FAILED', { attempts: 1, completedAt: 2_000, statusReasonCode: 'EXECUTION_FAILED', statusReasonMessage: 'The connection to the endpoint was refused.' });
    assert.deepEqual((await c.get(`/workflows/${hid}/jobs/${check.id}/attempts`)).json.attempts, [
      { attempt: 1, outcome: 'FAILED', started_at: iso(check.startedAt!), ended_at: iso(2_000), reason: { code: 'EXECUTION_FAILED', message: 'The connection to the endpoint was refused.' } },
    ]);
    assert.equal((await (await h().user()).get(`/workflows/${wid}/jobs/${pending.id}/attempts`)).status, 404);
    assert.equal((await c.get(`/workflows/${wid}/jobs/${crypto.randomUUID()}/attempts`)).status, 404);
    assert.deepEqual(fields(await c.get(`/workflows/${wid}/jobs/nope/attempts`)), ['job_id']);
  });

  it('reads any attempt\'s lines with `attempt`, the current one without it; 400 naming attempt past the job\'s', async () => {
    const { c, wid, job, first, third } = await thirdAttempt();
    const path = logsPath(wid, job.id, '/lines');
    assert.deepEqual((await c.get(`${path}?limit=1000`)).json.logs, third.map((l) => entry(job.id, 3, l)));
    const old = await c.get(`${path}?attempt=1&from=40`);
    assert.deepEqual(old.json, { id: job.id, workflow_id: wid, from: 40, total: 45, logs: first.slice(40).map((l) => entry(job.id, 1, l)) });
    assert.deepEqual((await c.get(`${path}?attempt=2`)).json.logs, []);
    for (const bad of ['4', '0', 'x']) assert.deepEqual(fields(await c.get(`${path}?attempt=${bad}`)), ['attempt'], bad);
  });

  it('downloads an attempt given up while the job still runs; the current one only once the job has ended', async () => {
    const { c, wid, job, first } = await thirdAttempt();
    const raw = logsPath(wid, job.id, '/raw');
    const old = await c.get(`${raw}?attempt=1`);
    assert.equal(old.status, 200, old.text);
    assert.equal(old.text, first.map((l) => `${l.message}\n`).join(''));
    const current = await c.get(raw);
    assert.equal(current.status, 400);
    assert.equal(current.json.code, 'job_not_terminal');
    assert.equal((await c.get(`${raw}?attempt=3`)).json.code, 'job_not_terminal');
    assert.deepEqual(fields(await c.get(`${raw}?attempt=9`)), ['attempt']);
  });

  it("replays the current attempt from line 0 when a tail resumes from another attempt's position", async () => {
    const { c, wid, job, third } = await thirdAttempt('COMPLETED');
    const tail = async (query: string, headers: Record<string, string> = {}) => {
      const r = await SseReader.open(c, `/workflows/${wid}/jobs/${job.id}/events${query}`, headers);
      open.push(r);
      return r;
    };
    // Line 30 of attempt 1 is no position in attempt 3: all of attempt 3 comes.
    const moved = await tail('?attempt=1', { 'last-event-id': '30' });
    await moved.endEvent();
    assert.deepEqual(moved.logs().map((e) => e.json), third.map((l) => entry(job.id, 3, l)));
    // The same attempt resumes after the position; without `attempt` the position is the current attempt's, as before.
    for (const query of ['?attempt=3', '']) {
      const same = await tail(query, { 'last-event-id': '7' });
      await same.endEvent();
      assert.deepEqual(same.logs().map((e) => e.id), ['8', '9', '10', '11'], query);
    }
    // A reconnect after end is told to stop only when its position is the current attempt's.
    assert.equal((await tail('?attempt=3', { 'last-event-id': '11' })).status, 204);
    const other = await tail('?attempt=2', { 'last-event-id': '11' });
    assert.equal(other.status, 200);
    await other.endEvent();
    assert.equal(other.logs().length, 12);
    assert.deepEqual(fields(await c.get(`/workflows/${wid}/jobs/${job.id}/events?attempt=0`)), ['attempt']);
  });
});
