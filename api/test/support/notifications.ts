import assert from 'node:assert/strict';
import { newId } from '@orloj/common/core';
import type { Store } from '@orloj/common/store';
import type { TestClient } from './client.js';
import { heartbeatWorkflow } from './logs.js';

/** Test data for the notification routes: a workflow through the API, notifications straight into the store. */

export async function userIdOf(store: Store, c: TestClient & { email: string }): Promise<string> {
  const user = await store.users.findByEmail(c.email);
  assert.ok(user, 'user');
  return user.id;
}

/** `n` unread notifications of a new workflow of the user, created one second apart; ids oldest first. */
export async function seedNotifications(store: Store, c: TestClient & { email: string }, n: number, t0 = Date.UTC(2030, 0, 1)): Promise<string[]> {
  const userId = await userIdOf(store, c);
  const workflowId = await heartbeatWorkflow(c);
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const id = newId();
    const payload = { title: `N${i}`, message: 'm', entity_type: 'WORKFLOW', entity_id: workflowId, workflow_id: workflowId, action_url: `/workflows/${workflowId}` };
    assert.ok(
      await store.notifications.insert({
        id,
        userId,
        workflowId,
        dedupeKey: `${userId}:test:${id}`,
        kind: 'WEB_INFO',
        payload: JSON.stringify(payload),
        readAt: null,
        createdAt: t0 + i * 1000,
        updatedAt: t0 + i * 1000,
      }),
    );
    ids.push(id);
  }
  return ids;
}
