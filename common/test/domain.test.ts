import assert from 'node:assert/strict';
import fc from 'fast-check';
import { decodeCursor, encodeCursor, formatDuration, newId, OrlojError, parseDuration, toIso } from '@orloj/common/core';
import { newWorkflow, parsePayload, type NewWorkflow } from '@orloj/common/domain';

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

describe('newWorkflow', () => {
  const chosen: NewWorkflow = { userId: newId(), name: 'n', kind: 'CONTAINER', payload: '{"image":"alpine"}', intervalMinutes: 5, maxConsecutiveJobFailuresAllowed: 4 };

  it('starts QUEUED, unscheduled, with nothing counted, at `now`', () => {
    const w = newWorkflow(chosen, 1_000);
    assert.deepEqual(
      { ...w, id: undefined },
      {
        ...chosen,
        id: undefined,
        buildStatus: 'QUEUED',
        consecutiveJobFailuresCount: 0,
        logRetention: true,
        generation: 0,
        createdAt: 1_000,
        updatedAt: 1_000,
        terminatedAt: null,
        buildCompletedAt: null,
        nextDueAt: null,
        buildToken: 0,
        skippedSlots: 0,
        lastSlotSkippedAt: null,
        buildError: null,
        alertAfterFailures: 1,
        recoverAfterSuccesses: 1,
        alertDown: false,
        cron: null,
        timeZone: 'UTC',
        jitterSeconds: 0,
        jitterOffsetMs: 0,
        pausedAt: null,
        overlapPolicy: 'run_after',
        catchUpPolicy: 'latest',
        firstRun: 'at_first_slot',
      },
    );
    assert.notEqual(newWorkflow(chosen, 1_000).id, w.id);
  });

  it('takes the run policy chosen, each choice left out at its default', () => {
    const w = newWorkflow({ ...chosen, runPolicy: { overlapPolicy: 'skip', firstRun: 'now' } }, 0);
    assert.deepEqual([w.overlapPolicy, w.catchUpPolicy, w.firstRun], ['skip', 'latest', 'now']);
  });

  it('keeps logs of a CONTAINER workflow unless told not to, and never of a HEARTBEAT one', () => {
    assert.equal(newWorkflow({ ...chosen, logRetention: false }, 0).logRetention, false);
    assert.equal(newWorkflow({ ...chosen, kind: 'HEARTBEAT' }, 0).logRetention, false);
    assert.equal(newWorkflow({ ...chosen, kind: 'HEARTBEAT', logRetention: true }, 0).logRetention, false);
  });
});

describe('toIso', () => {
  const MAX = 8.64e15; // the Date range
  it('writes what Date#toISOString writes, for any time and in any order of days', () => {
    const recent = fc.integer({ min: Date.UTC(1969, 0, 1), max: Date.UTC(2100, 0, 1) });
    fc.assert(
      fc.property(fc.array(fc.oneof(recent, fc.integer({ min: -MAX, max: MAX })), { minLength: 1, maxLength: 20 }), (times) => {
        for (const ms of times) assert.equal(toIso(ms), new Date(ms).toISOString());
      }),
      { numRuns: 2000 },
    );
    for (const ms of [0, -1, 1, 999, 86_399_999, 86_400_000, -86_400_001, MAX, -MAX, 1.5, Date.UTC(2026, 10, 24, 23, 59, 59, 999)]) {
      assert.equal(toIso(ms), new Date(ms).toISOString(), String(ms));
    }
  });

  it('throws as toISOString does for a time outside the Date range', () => {
    for (const ms of [Number.NaN, MAX + 1, -MAX - 1, Number.POSITIVE_INFINITY]) assert.throws(() => toIso(ms), RangeError, String(ms));
  });
});
