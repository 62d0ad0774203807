import assert from 'node:assert/strict';
import fc from 'fast-check';
import { decodeCursor, encodeCursor, formatDuration, newId, OrlojError, parseDuration, parsePayload } from '@orloj/common';

describe('durations', () => {
  it('parses Go-style durations', () => {
    assert.equal(parseDuration('10s'), 10_000);
    assert.equal(parseDuration('1m30s'), 90_000);
    assert.equal(parseDuration('1h'), 3_600_000);
    assert.equal(parseDuration('250ms'), 250);
    assert.equal(parseDuration('1.5s'), 1_500);
    assert.equal(parseDuration('7d'), 7 * 86_400_000);
    for (const bad of ['', '10', 's', '0s', '-1s', '1x', '1s ', ' 1s', '1 s', '1e3s']) assert.equal(parseDuration(bad), undefined, bad);
  });

  it('round-trips formatDuration (property)', () => {
    fc.assert(fc.property(fc.integer({ min: 1, max: 10_000_000 }), (ms) => parseDuration(formatDuration(ms)) === ms));
  });
});

describe('cursors', () => {
  it('round-trips any position for its own list (property)', () => {
    fc.assert(
      fc.property(fc.constantFrom('workflows', 'jobs:x'), fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER }), (list, k) => {
        const id = newId();
        assert.deepEqual(decodeCursor(list, encodeCursor(list, { k, id })), { k, id });
      }),
    );
  });

  it('treats the empty cursor as the first page', () => {
    assert.equal(decodeCursor('workflows', ''), undefined);
    assert.equal(decodeCursor('workflows', undefined), undefined);
  });

  it('refuses a cursor of another list and any garbage with a 400 error (property)', () => {
    const foreign = encodeCursor('jobs:1', { k: 1, id: newId() });
    assert.throws(() => decodeCursor('workflows', foreign), OrlojError);
    fc.assert(
      fc.property(fc.string({ maxLength: 600 }), (text) => {
        try {
          decodeCursor('workflows', text);
          return text === '';
        } catch (err) {
          return err instanceof OrlojError && err.code === 'validation_failed';
        }
      }),
    );
  });
});

describe('payload validation', () => {
  it('never throws, whatever the text (property)', () => {
    fc.assert(
      fc.property(fc.constantFrom('HEARTBEAT' as const, 'CONTAINER' as const), fc.oneof(fc.string(), fc.json()), (kind, text) => {
        const result = parsePayload(kind, text);
        return result.ok || (result.errors.length > 0 && result.errors.every((e) => e.field.startsWith('payload')));
      }),
    );
  });

  it('applies the HEARTBEAT defaults', () => {
    const r = parsePayload('HEARTBEAT', '{"endpoint":"https://example.com"}');
    assert.deepEqual(r, {
      ok: true,
      value: { kind: 'HEARTBEAT', payload: { endpoint: 'https://example.com', method: 'GET', expected_status_code: 200, headers: {}, timeout: 10_000 } },
    });
  });

  it('applies the CONTAINER defaults', () => {
    const r = parsePayload('CONTAINER', '{"image":"busybox"}');
    assert.deepEqual(r, { ok: true, value: { kind: 'CONTAINER', payload: { image: 'busybox', env: {}, timeout: 30_000, network: 'none' } } });
  });
});
