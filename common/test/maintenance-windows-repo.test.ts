/** The maintenance windows' store (migration 0020) on both engines: definitions round-trip, isolation, snoozes, what is in force. */
import assert from 'node:assert/strict';
import { newId } from '@orloj/common/core';
import type { WindowDefinition } from '@orloj/common/store';
import { describeEachEngine } from './support/stores.js';
import { insertUser, workflowFixture } from './support/fixtures.js';

const NOW = Date.UTC(2026, 2, 1);
const HOUR = 3_600_000;

describeEachEngine('maintenance windows store', (db) => {
  let userId: string;
  let otherId: string;
  let workflowId: string;

  beforeEach(async () => {
    userId = await insertUser(db().store);
    otherId = await insertUser(db().store);
    const w = workflowFixture(userId);
    await db().store.workflows.insert(w);
    workflowId = w.id;
  });

  const oneOff: () => WindowDefinition = () => ({ name: 'Upgrade', mode: 'skip', workflowId, startsAt: NOW, endsAt: NOW + HOUR });
  const weekly: WindowDefinition = { name: 'Backups', mode: 'mute', workflowQuery: 'db', cron: '0 22 * * 6', timeZone: 'Europe/Berlin', durationMinutes: 120 };

  it('round-trips one-off and recurring windows, and keeps them to their owner', async () => {
    const store = db().store;
    const a = await store.maintenanceWindows.insert(newId(), userId, oneOff(), NOW);
    const b = await store.maintenanceWindows.insert(newId(), userId, weekly, NOW + 1);
    assert.deepEqual(a, { id: a.id, userId, snooze: false, createdAt: NOW, updatedAt: NOW, ...oneOff() });
    assert.deepEqual(b, { id: b.id, userId, snooze: false, createdAt: NOW + 1, updatedAt: NOW + 1, ...weekly });
    assert.deepEqual((await store.maintenanceWindows.list(userId, 10)).map((w) => w.id), [b.id, a.id], 'newest first');
    assert.deepEqual((await store.maintenanceWindows.list(userId, 10, { k: NOW + 1, id: b.id })).map((w) => w.id), [a.id], 'after a position');
    assert.equal(await store.maintenanceWindows.findForUser(otherId, a.id), undefined);
    assert.equal(await store.maintenanceWindows.delete(otherId, a.id), false);
    assert.equal(await store.maintenanceWindows.update(otherId, a.id, weekly, NOW), undefined);
    assert.equal(await store.maintenanceWindows.count(userId), 2);
  });

  it('replaces a definition whole: a one-off window made recurring loses its span', async () => {
    const store = db().store;
    const a = await store.maintenanceWindows.insert(newId(), userId, oneOff(), NOW);
    const updated = await store.maintenanceWindows.update(userId, a.id, weekly, NOW + 5);
    assert.deepEqual(updated, { id: a.id, userId, snooze: false, createdAt: NOW, updatedAt: NOW + 5, ...weekly });
  });

  it('keeps one snooze a workflow: snoozing again moves it, unsnoozing ends it; snoozes are not listed or counted', async () => {
    const store = db().store;
    await store.maintenanceWindows.snooze(newId(), userId, workflowId, NOW + HOUR, NOW);
    const again = await store.maintenanceWindows.snooze(newId(), userId, workflowId, NOW + 2 * HOUR, NOW + 10);
    assert.deepEqual(
      { mode: again.mode, snooze: again.snooze, workflowId: again.workflowId, startsAt: again.startsAt, endsAt: again.cron === undefined ? again.endsAt : undefined },
      { mode: 'mute', snooze: true, workflowId, startsAt: NOW + 10, endsAt: NOW + 2 * HOUR },
    );
    assert.equal((await store.maintenanceWindows.inForce([userId], NOW)).length, 1);
    assert.equal(await store.maintenanceWindows.count(userId), 0);
    assert.deepEqual(await store.maintenanceWindows.list(userId, 10), []);
    await store.maintenanceWindows.unsnooze(workflowId);
    assert.equal(await store.maintenanceWindows.snoozeOf(workflowId), undefined);
  });

  it('tells the windows in force for a batch of owners: recurring ones and one-off ones not over', async () => {
    const store = db().store;
    const over = await store.maintenanceWindows.insert(newId(), userId, oneOff(), NOW);
    const recurring = await store.maintenanceWindows.insert(newId(), userId, weekly, NOW);
    await store.maintenanceWindows.insert(newId(), otherId, { ...weekly, workflowQuery: 'x' }, NOW);
    const ids = async (at: number) => (await store.maintenanceWindows.inForce([userId, userId], at)).map((w) => w.id).sort();
    assert.deepEqual(await ids(NOW), [over.id, recurring.id].sort());
    assert.deepEqual(await ids(NOW + HOUR), [recurring.id]);
    assert.deepEqual(await store.maintenanceWindows.inForce([], NOW), []);
  });

  it("goes with its workflow when the workflow is deleted", async () => {
    const store = db().store;
    const a = await store.maintenanceWindows.insert(newId(), userId, oneOff(), NOW);
    await store.workflows.terminate(userId, workflowId, NOW);
    await store.workflows.deleteTerminated(userId, workflowId);
    assert.equal(await store.maintenanceWindows.findForUser(userId, a.id), undefined);
  });
});
