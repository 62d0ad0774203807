import assert from 'node:assert/strict';
import { describeApi, key } from './support/harness.js';

/** Validation said for people, every field in one pass (issue 17, "Forms"). */
describeApi('validation messages', (h) => {
  it('reports every bad field of a new workflow at once, the payload too, in plain words', async () => {
    const c = await h().user();
    const res = await c.post(
      '/workflows',
      {
        name: '',
        kind: 'HEARTBEAT',
        payload: JSON.stringify({ endpoint: 'not a url', expected_status_code: 999, timeout: '10 minutes' }),
        interval: 0,
        max_consecutive_job_failures_allowed: 1000,
      },
      { headers: key() },
    );
    assert.equal(res.status, 400, res.text);
    const byField = Object.fromEntries((res.json.errors as { field: string; message: string }[]).map((e) => [e.field, e.message]));
    assert.deepEqual(Object.keys(byField).sort(), [
      'interval',
      'max_consecutive_job_failures_allowed',
      'name',
      'payload.endpoint',
      'payload.expected_status_code',
      'payload.timeout',
    ]);
    assert.equal(byField.name, 'must not be empty');
    assert.equal(byField.interval, 'must be at least 1');
    assert.equal(byField.max_consecutive_job_failures_allowed, 'must be at most 100');
    assert.equal(byField['payload.expected_status_code'], 'must be at most 599');
    assert.match(byField['payload.timeout']!, /duration such as/);

    const blank = await c.post('/workflows', { name: '   ', kind: 'HEARTBEAT', payload: '{"endpoint":"https://example.com"}', interval: 5, max_consecutive_job_failures_allowed: 3 }, { headers: key() });
    assert.deepEqual(blank.json.errors, [{ field: 'name', message: 'must not be blank' }]);
    const typed = await c.post('/workflows', { name: 'x', kind: 'HEARTBEAT', payload: '{"endpoint":"https://example.com"}', interval: '5', max_consecutive_job_failures_allowed: 3.5 }, { headers: key() });
    assert.deepEqual(typed.json.errors, [
      { field: 'interval', message: 'must be a whole number' },
      { field: 'max_consecutive_job_failures_allowed', message: 'must be a whole number' },
    ]);
  });

  it('names the parameter in the detail of a refused query string', async () => {
    const c = await h().user();
    const res = await c.get('/workflows?interval_min=5&interval_max=4&limit=0');
    assert.equal(res.status, 400);
    assert.equal(res.json.detail, 'The query string is invalid: limit must be an integer from 1 to 100; interval_max must not be less than interval_min.');
  });
});
