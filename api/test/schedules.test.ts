/**
 * The schedule fields of workflows and the pause and resume commands over HTTP
 * (issue 25, ADR 0015), on both engines.
 */
import assert from 'node:assert/strict';
import { jitterOffsetMs, newJob, type Job } from '@orloj/common/domain';
import { describeApi, key, workflowBody } from './support/harness.js';

const fields = (res: { json: { errors?: { field: string; message: string }[] } }) => (res.json.errors ?? []).map((e) => e.field).sort();

describeApi('workflow schedules', (h) => {
  it('creates a cron workflow: interval optional, defaults UTC and no jitter, shown on the resource', async () => {
    const c = await h().user();
    const { interval: _, ...body } = workflowBody();
    const res = await c.post('/workflows', { ...body, cron: '@hourly' }, { headers: key() });
    assert.equal(res.status, 201);
    const w = (await c.get(`/workflows/${res.json.id as string}`)).json;
    assert.deepEqual([w.cron, w.timezone, w.jitter_seconds, w.paused_at, w.interval], ['@hourly', 'UTC', 0, null, 60]);
    const plain = (await c.get(`/workflows/${(await c.post('/workflows', workflowBody({ interval: 7 }), { headers: key() })).json.id as string}`)).json;
    assert.deepEqual([plain.cron, plain.timezone, plain.jitter_seconds, plain.paused_at, plain.interval], [null, 'UTC', 0, null, 7], 'an interval workflow as before');
  });

  it('answers 400 naming the field for a bad cron, time zone or jitter, and for no interval without cron', async () => {
    const c = await h().user();
    const cases: [Record<string, unknown>, string[]][] = [
      [{ cron: '61 * * * *' }, ['cron']],
      [{ cron: '* * *' }, ['cron']],
      [{ cron: '0 0 30 2 *' }, ['cron']],
      [{ cron: '@reboot' }, ['cron']],
      [{ cron: 5 }, ['cron']],
      [{ cron: '@daily', timezone: 'Mars/Olympus' }, ['timezone']],
      [{ timezone: '' }, ['timezone']],
      [{ cron: '@daily', jitter_seconds: 3601 }, ['jitter_seconds']],
      [{ jitter_seconds: -1 }, ['jitter_seconds']],
      [{ cron: 'nope', timezone: 'Nowhere/Land' }, ['cron', 'timezone']],
    ];
    for (const [extra, expected] of cases) {
      const res = await c.post('/workflows', workflowBody(extra), { headers: key() });
      assert.equal(res.status, 400, JSON.stringify(extra));
      assert.deepEqual(fields(res), expected, JSON.stringify(extra));
    }
    const { interval: _, ...noInterval } = workflowBody();
    const res = await c.post('/workflows', noInterval, { headers: key() });
    assert.equal(res.status, 400);
    assert.deepEqual(fields(res), ['interval']);
    const withCronNull = await c.post('/workflows', { ...noInterval, cron: null }, { headers: key() });
    assert.deepEqual(fields(withCronNull), ['interval']);
  });

  it('PUT keeps the schedule fields it is not sent, and cron: null makes it an interval workflow again', async () => {
    const c = await h().user();
    const id = (await c.post('/workflows', workflowBody({ cron: '0 9 * * *', timezone: 'Asia/Kolkata', jitter_seconds: 30 }), { headers: key() })).json.id as string;
    const put = (extra: Record<string, unknown>) => c.put(`/workflows/${id}`, { name: 'n', payload: workflowBody().payload, interval: 5, max_consecutive_job_failures_allowed: 3, ...extra }, { headers: key() });
    assert.equal((await put({})).status, 204, 'a contract client’s PUT');
    let w = (await c.get(`/workflows/${id}`)).json;
    assert.deepEqual([w.cron, w.timezone, w.jitter_seconds, w.interval], ['0 9 * * *', 'Asia/Kolkata', 30, 1440]);
    assert.equal((await put({ timezone: 'Bad/Zone' })).status, 400);
    assert.equal((await put({ cron: null })).status, 204);
    w = (await c.get(`/workflows/${id}`)).json;
    assert.deepEqual([w.cron, w.timezone, w.interval], [null, 'Asia/Kolkata', 5]);
  });

  it('fixes the jitter offset to the millisecond on create, keeps it through a PUT that keeps jitter_seconds, and takes a new one when it changes', async () => {
    const c = await h().user();
    const id = (await c.post('/workflows', workflowBody({ cron: '* * * * *', jitter_seconds: 59 }), { headers: key() })).json.id as string;
    const offset = async () => (await h().db.store.workflows.findById(id))!.jitterOffsetMs;
    assert.equal(await offset(), jitterOffsetMs(id, 59));
    // An older workflow's whole-second offset (migration 0029) stays through an unrelated PUT.
    await h().db.store.db.updateTable('workflows').set({ jitter_offset_ms: 17_000 }).where('id', '=', id).execute();
    const put = (extra: Record<string, unknown>) => c.put(`/workflows/${id}`, { name: 'n', payload: workflowBody().payload, interval: 5, max_consecutive_job_failures_allowed: 3, ...extra }, { headers: key() });
    assert.equal((await put({ jitter_seconds: 59 })).status, 204);
    assert.equal(await offset(), 17_000, 'the same jitter_seconds: the slots stay put');
    assert.equal((await put({ jitter_seconds: 120 })).status, 204);
    assert.equal(await offset(), jitterOffsetMs(id, 120));
    assert.equal((await put({ jitter_seconds: 0 })).status, 204);
    assert.equal(await offset(), 0);
  });

  it('takes the run policy on create and PUT (kept when absent), shows it on the resource and the list, and answers 400 naming a bad one', async () => {
    const c = await h().user();
    const plain = (await c.get(`/workflows/${(await c.post('/workflows', workflowBody(), { headers: key() })).json.id as string}`)).json;
    assert.deepEqual([plain.overlap_policy, plain.catch_up_policy, plain.first_run], ['run_after', 'latest', 'at_first_slot'], 'defaults: the behaviour before the policy');
    const id = (await c.post('/workflows', workflowBody({ overlap_policy: 'skip', catch_up_policy: 'none', first_run: 'now' }), { headers: key() })).json.id as string;
    const policyOf = (w: Record<string, unknown>) => [w.overlap_policy, w.catch_up_policy, w.first_run];
    assert.deepEqual(policyOf((await c.get(`/workflows/${id}`)).json), ['skip', 'none', 'now']);
    const listed = ((await c.get('/workflows')).json.workflows as Record<string, unknown>[]).find((w) => w.id === id)!;
    assert.deepEqual(policyOf(listed), ['skip', 'none', 'now']);
    const put = (extra: Record<string, unknown>) => c.put(`/workflows/${id}`, { name: 'n', payload: workflowBody().payload, interval: 5, max_consecutive_job_failures_allowed: 3, ...extra }, { headers: key() });
    assert.equal((await put({})).status, 204, 'a contract client’s PUT');
    assert.deepEqual(policyOf((await c.get(`/workflows/${id}`)).json), ['skip', 'none', 'now']);
    assert.equal((await put({ overlap_policy: 'run_after' })).status, 204);
    assert.deepEqual(policyOf((await c.get(`/workflows/${id}`)).json), ['run_after', 'none', 'now']);
    for (const [extra, field] of [
      [{ overlap_policy: 'queue' }, 'overlap_policy'],
      [{ catch_up_policy: 'all' }, 'catch_up_policy'],
      [{ first_run: null }, 'first_run'],
    ] as const) {
      const res = await c.post('/workflows', workflowBody(extra), { headers: key() });
      assert.equal(res.status, 400, JSON.stringify(extra));
      assert.deepEqual(fields(res), [field]);
      const updated = await put(extra);
      assert.equal(updated.status, 400, JSON.stringify(extra));
      assert.deepEqual(fields(updated), [field]);
    }
  });

  it('pauses and resumes: 204 each time, 404 for no workflow of yours, 412 once terminated; manual runs of a paused workflow are allowed', async () => {
    const c = await h().user();
    const id = (await c.post('/workflows', workflowBody(), { headers: key() })).json.id as string;
    assert.equal((await c.post(`/workflows/${id}/pause`)).status, 204);
    const pausedAt = (await c.get(`/workflows/${id}`)).json.paused_at as string;
    assert.ok(pausedAt);
    assert.equal((await c.post(`/workflows/${id}/pause`)).status, 204, 'repeating is harmless');
    assert.equal((await c.get(`/workflows/${id}`)).json.paused_at, pausedAt, 'and keeps the first pause');
    const list = (await c.get('/workflows')).json.workflows as { id: string; paused_at: string | null }[];
    assert.equal(list.find((w) => w.id === id)?.paused_at, pausedAt, 'the list shows it paused');
    const manual = await c.post(`/workflows/${id}/jobs/schedule`, undefined, { headers: key() });
    assert.equal(manual.status, 201, 'run now is an explicit act');
    assert.equal((await c.post(`/workflows/${id}/resume`)).status, 204);
    assert.equal((await c.post(`/workflows/${id}/resume`)).status, 204);
    assert.equal((await c.get(`/workflows/${id}`)).json.paused_at, null);
    assert.equal((await c.post(`/workflows/${crypto.randomUUID()}/pause`)).status, 404);
    assert.equal((await (await h().user()).post(`/workflows/${id}/pause`)).status, 404);
    assert.equal((await c.patch(`/workflows/${id}`)).status, 204);
    for (const command of ['pause', 'resume']) {
      const res = await c.post(`/workflows/${id}/${command}`);
      assert.equal(res.status, 412);
      assert.equal(res.json.code, 'workflow_terminated');
    }
  });
});

describeApi('workflow slots', (h) => {
  const MINUTE = 60_000;

  /** A built 10-minute workflow whose build completed `ago` ms ago, its next due slot set as the leader would have it. */
  async function builtWorkflow(c: Awaited<ReturnType<ReturnType<typeof h>['user']>>, ago: number) {
    const id = (await c.post('/workflows', workflowBody({ interval: 10 }), { headers: key() })).json.id as string;
    const builtAt = Date.now() - ago;
    await h().db.handle.db.updateTable('workflows').set({ build_status: 'COMPLETED', build_completed_at: builtAt, next_due_at: builtAt + 60 * MINUTE }).where('id', '=', id).execute();
    return { id, builtAt, w: (await h().db.store.workflows.findById(id))! };
  }

  it('tells each slot its fate: ran (and how late), still running at the next, skipped, pending, upcoming; paused ones', async () => {
    const c = await h().user();
    const { id, builtAt, w } = await builtWorkflow(c, 65 * MINUTE);
    const job = (k: number, status: Job['status'], startedAfter: number, endedAfter: number | null): Job => ({
      ...newJob(w, 'AUTOMATIC', builtAt + k * 10 * MINUTE, builtAt),
      status,
      startedAt: builtAt + k * 10 * MINUTE + startedAfter,
      completedAt: endedAfter === null ? null : builtAt + k * 10 * MINUTE + endedAfter,
    });
    // slot 1 ran 2 s late and took 15 min (slot 2 skipped: still running); slot 3, 4 never ran; slot 5 ran; slot 6 due now
    for (const j of [job(1, 'COMPLETED', 2_000, 15 * MINUTE), job(5, 'FAILED', 0, 1_000)]) assert.ok(await h().db.store.jobs.insert(j));
    const res = await c.get(`/workflows/${id}/slots?from=${new Date(builtAt).toISOString()}&to=${new Date(builtAt + 75 * MINUTE).toISOString()}`);
    assert.equal(res.status, 200);
    const slots = res.json.slots as { slot_at: string; fate: string; late_ms?: number; reason?: string; job_id?: string }[];
    assert.deepEqual(
      slots.map((s) => [s.fate, s.reason ?? s.late_ms ?? '']),
      [['ran', 2000], ['skipped', 'still_running'], ['skipped', 'not_run'], ['skipped', 'not_run'], ['ran', 0], ['pending', ''], ['upcoming', '']],
    );
    assert.ok(slots[0]!.job_id);
    assert.equal((await c.post(`/workflows/${id}/pause`)).status, 204);
    const paused = (await c.get(`/workflows/${id}/slots?from=${new Date(builtAt + 55 * MINUTE).toISOString()}&to=${new Date(builtAt + 90 * MINUTE).toISOString()}`)).json.slots as { fate: string }[];
    assert.deepEqual(paused.map((s) => s.fate), ['paused', 'paused', 'paused']);
  });

  it('tells slots missed while orloj itself was down as orloj_down, and lists the downtime', async () => {
    const c = await h().user();
    const { id, builtAt, w } = await builtWorkflow(c, 65 * MINUTE);
    assert.ok(await h().db.store.jobs.insert({ ...newJob(w, 'AUTOMATIC', builtAt + 10 * MINUTE, builtAt), status: 'COMPLETED', startedAt: builtAt + 10 * MINUTE, completedAt: builtAt + 10 * MINUTE + 500 }));
    // orloj ran until 25 min after the build, and again from 45 min: slots 3 and 4 came while it was down, slot 2 did not.
    await h().db.handle.db.deleteFrom('orloj_uptime').execute();
    await h().db.handle.db
      .insertInto('orloj_uptime')
      .values([
        { started_at: builtAt - 60 * MINUTE, last_seen_at: builtAt + 25 * MINUTE },
        { started_at: builtAt + 45 * MINUTE, last_seen_at: Date.now() },
      ])
      .execute();
    const res = await c.get(`/workflows/${id}/slots?from=${new Date(builtAt).toISOString()}&to=${new Date(builtAt + 55 * MINUTE).toISOString()}`);
    assert.equal(res.status, 200);
    assert.deepEqual(
      (res.json.slots as { fate: string; reason?: string }[]).map((s) => [s.fate, s.reason ?? '']),
      [['ran', ''], ['skipped', 'not_run'], ['skipped', 'orloj_down'], ['skipped', 'orloj_down'], ['skipped', 'not_run']],
    );
    assert.deepEqual(res.json.downtime, [{ from: new Date(builtAt + 25 * MINUTE).toISOString(), to: new Date(builtAt + 45 * MINUTE).toISOString() }]);
  });

  it('marks a run that waited for the previous one, and, for catch-up none, the missed slot it passed over', async () => {
    const c = await h().user();
    const { id, builtAt, w } = await builtWorkflow(c, 65 * MINUTE);
    await h().db.handle.db.updateTable('workflows').set({ catch_up_policy: 'none' }).where('id', '=', id).execute();
    // No uptime record (another test's would tell its own downtime): the missed slots read as the runners'.
    await h().db.handle.db.deleteFrom('orloj_uptime').execute();
    const slot = (k: number) => builtAt + k * 10 * MINUTE;
    const job = (k: number, startedAt: number, completedAt: number): Job => ({ ...newJob(w, 'AUTOMATIC', slot(k), builtAt), status: 'COMPLETED', startedAt, completedAt });
    // slot 1's run took 12 min; slot 2's ran after it (overlap run_after); slots 3 and 4 missed while down, 5 ran
    for (const j of [job(1, slot(1), slot(1) + 12 * MINUTE), job(2, slot(1) + 12 * MINUTE + 500, slot(1) + 13 * MINUTE), job(5, slot(5), slot(5) + 1_000)]) assert.ok(await h().db.store.jobs.insert(j));
    const res = await c.get(`/workflows/${id}/slots?from=${new Date(builtAt).toISOString()}&to=${new Date(slot(5) + 1).toISOString()}`);
    const slots = res.json.slots as { fate: string; reason?: string; after_overlap?: boolean }[];
    assert.deepEqual(
      slots.map((s) => [s.fate, s.reason ?? (s.after_overlap ? 'after_overlap' : '')]),
      [['ran', ''], ['ran', 'after_overlap'], ['skipped', 'not_run'], ['skipped', 'catch_up_none'], ['ran', '']],
    );
  });

  it('answers 400 for a range past 1000 slots or the wrong way round or not a date-time, 404 for no workflow of yours', async () => {
    const c = await h().user();
    const { id } = await builtWorkflow(c, 0);
    const far = await c.get(`/workflows/${id}/slots?from=2026-01-01T00:00:00Z&to=2027-01-01T00:00:00Z`);
    assert.equal(far.status, 400);
    assert.deepEqual(fields(far), ['to']);
    assert.deepEqual(fields(await c.get(`/workflows/${id}/slots?from=2026-01-02T00:00:00Z&to=2026-01-01T00:00:00Z`)), ['to']);
    assert.deepEqual(fields(await c.get(`/workflows/${id}/slots?from=yesterday`)), ['from']);
    assert.equal((await c.get(`/workflows/${crypto.randomUUID()}/slots`)).status, 404);
    assert.equal((await (await h().user()).get(`/workflows/${id}/slots`)).status, 404);
    const unbuilt = (await c.post('/workflows', workflowBody(), { headers: key() })).json.id as string;
    assert.deepEqual((await c.get(`/workflows/${unbuilt}/slots`)).json.slots, [], 'no slots before the build');
  });
});
