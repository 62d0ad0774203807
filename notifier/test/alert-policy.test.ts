import assert from 'node:assert/strict';
import { newId } from '@orloj/common/core';
import { reasons } from '@orloj/common/domain';
import { terminateWorkflow, type Store } from '@orloj/common/store';
import { describeEachEngine } from '@orloj/common/test-support';
import { endJob, insertUser, insertWorkflow, notificationsOf, notifierSuite } from './support.js';

/**
 * Issue 26: the alert policy apart from termination (down after N failed
 * runs, up after M completed ones) and the incidents it opens and closes, on
 * SQLite with the in-process bus and on PostgreSQL with RabbitMQ. The
 * notifications keep the contract's kinds and stay replay-safe.
 */
describeEachEngine('alert policy and incidents', (db, engine) => {
  const suite = notifierSuite(engine);
  const store = (): Store => db().store;

  const incidentsOf = (userId: string, workflowId: string) => store().incidents.list({ userId, workflowId, limit: 100 });

  it('damps a flapping check: one down after N failures in a row, one recovery after M completions, one incident, however often the events are delivered', async () => {
    const userId = await insertUser(store());
    const w = await insertWorkflow(store(), userId, { name: 'Flapping', maxConsecutiveJobFailuresAllowed: 100, alertAfterFailures: 3, recoverAfterSuccesses: 2 });
    // F C F F C: never three in a row. F F F: down (on the third), F: still down, C: one is not two, F, C C: up. F: one is not three.
    const seq = ['FAILED', 'COMPLETED', 'FAILED', 'FAILED', 'COMPLETED', 'FAILED', 'FAILED', 'FAILED', 'FAILED', 'COMPLETED', 'FAILED', 'COMPLETED', 'COMPLETED', 'FAILED'] as const;
    const ended = [];
    for (const [i, status] of seq.entries()) {
      ended.push(await endJob(store(), w, { status, ranMs: 10, reason: status === 'FAILED' ? (i === 5 ? reasons.connectionRefused() : reasons.unexpectedStatusCode(200, 500)) : undefined }));
    }
    const [incident, ...more] = await incidentsOf(userId, w.id);
    assert.equal(more.length, 0, 'one down period');
    assert.ok(incident);
    assert.equal(incident.openedByJobId, ended[7]!.id);
    assert.equal(incident.firstFailureJobId, ended[5]!.id);
    assert.equal(incident.startedAt, ended[5]!.completedAt);
    assert.equal(incident.firstFailureMessage, reasons.connectionRefused().message);
    assert.equal(incident.failedRuns, 5);
    assert.equal(incident.resolution, 'recovered');
    assert.notEqual(incident.closedAt, null);
    assert.equal((await store().workflows.findById(w.id))!.alertDown, false);

    // The events as the relay would publish them, applied twice: the second time changes nothing.
    const events = (await store().outbox.claimDue(Date.now(), Date.now() + 60_000, 1000)).filter((e) => e.workflow_id === w.id);
    const notifier = await suite.start(store(), { relay: false });
    await notifier.applyMany(events);
    const once = await notificationsOf(store(), userId);
    await notifier.applyMany(events);
    await notifier.applyMany([...events].reverse());
    assert.equal((await notificationsOf(store(), userId)).length, once.length);
    assert.equal((await incidentsOf(userId, w.id)).length, 1, 'no duplicate incident');

    const changes = once.filter((n) => n.stateChange !== null);
    assert.deepEqual(changes.map((n) => n.stateChange).sort(), ['down', 'recovered']);
    const down = changes.find((n) => n.stateChange === 'down')!;
    assert.equal(JSON.parse(down.payload).entity_id, ended[7]!.id, 'the third failure in a row turned it down');
    assert.deepEqual([...new Set(once.map((n) => n.kind))].sort(), ['WEB_ERROR', 'WEB_SUCCESS'], "the contract's kinds");
    assert.equal(once.filter((n) => JSON.parse(n.payload).entity_type === 'JOB').length, seq.length, 'every job keeps its own notification');
  });

  it('notifies nobody of the failures and the recovery of a workflow under a maintenance window, and alerts again after it', async () => {
    const userId = await insertUser(store());
    const w = await insertWorkflow(store(), userId, { name: 'Billing export', maxConsecutiveJobFailuresAllowed: 100 });
    const failed = () => endJob(store(), w, { status: 'FAILED', ranMs: 5, reason: reasons.connectionRefused() });
    await failed(); // down, an incident, a down notification
    const now = Date.now();
    const window = await store().maintenanceWindows.insert(newId(), userId, { name: 'Billing upgrade', mode: 'mute', workflowQuery: 'billing', startsAt: now - 1_000, endsAt: now + 3_600_000 }, now);
    await failed(); // muted: counted in the incident, nobody notified
    await endJob(store(), w, { status: 'COMPLETED', ranMs: 5 }); // muted: the incident closes, silently
    assert.equal(await store().maintenanceWindows.delete(userId, window.id), true);
    await failed(); // down again, alerted
    const events = (await store().outbox.claimDue(Date.now(), Date.now() + 60_000, 1000)).filter((e) => e.workflow_id === w.id);
    const notifier = await suite.start(store(), { relay: false });
    await notifier.applyMany(events);
    const notified = await notificationsOf(store(), userId);
    assert.deepEqual(notified.map((n) => `${JSON.parse(n.payload).title}${n.stateChange ? ` (${n.stateChange})` : ''}`).sort(), ['Job completed', 'Job failed (down)', 'Job failed (down)']);
    const [again, first] = await incidentsOf(userId, w.id);
    assert.deepEqual([first!.failedRuns, first!.resolution, again!.closedAt], [2, 'recovered', null]);
  });

  it('with the defaults (1 and 1) opens an incident on the first failure and closes it on the first completion; termination closes it too', async () => {
    const userId = await insertUser(store());
    const w = await insertWorkflow(store(), userId, { maxConsecutiveJobFailuresAllowed: 100 });
    await endJob(store(), w, { status: 'COMPLETED', ranMs: 5 });
    const f = await endJob(store(), w, { status: 'FAILED', ranMs: 5, reason: reasons.connectionRefused() });
    await endJob(store(), w, { status: 'COMPLETED', ranMs: 5 });
    await endJob(store(), w, { status: 'FAILED', ranMs: 5, reason: reasons.connectionRefused() });
    await endJob(store(), w, { status: 'FAILED', ranMs: 5, reason: reasons.connectionRefused() });
    const [open, closed] = await incidentsOf(userId, w.id);
    assert.deepEqual([closed!.openedByJobId, closed!.failedRuns, closed!.resolution], [f.id, 1, 'recovered']);
    assert.deepEqual([open!.closedAt, open!.failedRuns], [null, 2]);
    await store().transaction((tx) => terminateWorkflow(tx, userId, w.id, Date.now()));
    const [terminated] = await incidentsOf(userId, w.id);
    assert.equal(terminated!.resolution, 'terminated');
    assert.equal((await store().incidents.list({ userId, open: true, limit: 10 })).filter((i) => i.workflowId === w.id).length, 0);
  });
});
