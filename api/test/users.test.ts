import assert from 'node:assert/strict';
import { describeApi } from './support/harness.js';

describeApi('users', (h) => {
  it('GET /users answers the signed-in user', async () => {
    const c = await h().user();
    const res = await c.get('/users');
    assert.equal(res.status, 200);
    assert.deepEqual(Object.keys(res.json).sort(), ['created_at', 'email', 'notification_preference', 'updated_at']);
    assert.equal(res.json.email, c.email);
    assert.equal(res.json.notification_preference, 'ALL');
  });

  it('PUT /users sets the notification preference (204)', async () => {
    const c = await h().user();
    assert.equal((await c.put('/users', { notification_preference: 'NONE' })).status, 204);
    assert.equal((await c.get('/users')).json.notification_preference, 'NONE');
    assert.equal((await c.put('/users', { notification_preference: 'ALL' })).status, 204);
    assert.equal((await c.get('/users')).json.notification_preference, 'ALL');
  });

  it('PUT /users answers 400 naming the field for a bad value or unknown field', async () => {
    const c = await h().user();
    const bad = await c.put('/users', { notification_preference: 'SOME' });
    assert.equal(bad.status, 400);
    assert.deepEqual(bad.json.errors.map((e: { field: string }) => e.field), ['notification_preference']);
    const extra = await c.put('/users', { notification_preference: 'ALL', email: 'x@y.z' });
    assert.deepEqual(extra.json.errors.map((e: { field: string }) => e.field), ['email']);
  });

  it('answers 401 without a session and 403 on PUT without CSRF', async () => {
    assert.equal((await h().client().get('/users')).status, 401);
    const c = await h().user();
    c.cookies.delete('csrf');
    assert.equal((await c.put('/users', { notification_preference: 'NONE' })).status, 403);
  });
});
