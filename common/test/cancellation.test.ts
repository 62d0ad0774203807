import assert from 'node:assert/strict';
import { Cancellation, onAbort, systemClock } from '@orloj/common/core';

describe('Cancellation', () => {
  it('tells its listeners once, however often it is aborted', () => {
    const c = new Cancellation();
    let calls = 0;
    onAbort(c, () => calls++);
    assert.equal(c.aborted, false);
    c.abort();
    c.abort();
    assert.equal(c.aborted, true);
    assert.equal(calls, 1);
  });

  it('stops telling a listener that stopped listening', () => {
    for (const source of [new Cancellation(), new AbortController()]) {
      let calls = 0;
      const stop = onAbort(source instanceof Cancellation ? source : source.signal, () => calls++);
      stop();
      source.abort();
      assert.equal(calls, 0);
    }
  });

  it('gives a real AbortSignal on demand, aborted with it, before or after', () => {
    const before = new Cancellation();
    const early = before.signal;
    assert.equal(early.aborted, false);
    before.abort();
    assert.equal(early.aborted, true);
    const after = new Cancellation();
    after.abort();
    assert.equal(after.signal.aborted, true);
  });

  it('wakes a sleep early', async () => {
    const c = new Cancellation();
    const slept = systemClock.sleep(60_000, c);
    c.abort();
    await slept; // resolves at once: mocha's timeout would fail the test otherwise
  });
});
