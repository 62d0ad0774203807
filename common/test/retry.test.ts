import assert from 'node:assert/strict';
import { backoffDelay, Cancellation, retry, retryPolicies, type AbortLike, type Clock, type RetryPolicy } from '@orloj/common/core';

/** A clock whose sleeps return at once, recording what was asked; `onSleep` may act meanwhile (abort, say). */
function recordingClock(onSleep: (ms: number) => void = () => undefined): Clock & { sleeps: number[] } {
  const sleeps: number[] = [];
  return {
    sleeps,
    now: () => 0,
    sleep: (ms: number, _signal?: AbortLike) => {
      sleeps.push(ms);
      onSleep(ms);
      return Promise.resolve();
    },
  };
}

/** Fails `times` times with `error`, then resolves 'ok'. */
function failing(times: number, error: () => unknown = () => new Error('boom')): { fn: () => Promise<string>; calls: () => number } {
  let calls = 0;
  return {
    fn: () => {
      calls += 1;
      return calls <= times ? Promise.reject(error()) : Promise.resolve('ok');
    },
    calls: () => calls,
  };
}

const connectionLost = (): Error => Object.assign(new Error('gone'), { code: 'ECONNREFUSED' });

describe('retry', () => {
  it('doubles the wait from initialMs up to the cap, without jitter when the policy has none', () => {
    const policy: RetryPolicy = { initialMs: 100, factor: 2, maxMs: 1_000, jitter: 0 };
    assert.deepEqual([0, 1, 2, 3, 4, 5, 40].map((n) => backoffDelay(policy, n)), [100, 200, 400, 800, 1_000, 1_000, 1_000]);
  });

  it('takes up to the jitter share off a wait, never below 1 ms', () => {
    const policy = retryPolicies.resultPublish;
    assert.equal(backoffDelay(policy, 0, () => 0), 250);
    assert.equal(backoffDelay(policy, 0, () => 0.999_999), 125);
    assert.equal(backoffDelay(policy, 10, () => 0.5), 11_250);
    assert.equal(backoffDelay({ initialMs: 1, factor: 2, maxMs: 1, jitter: 1 }, 0, () => 0.999), 1);
  });

  it('resolves with the value once an attempt succeeds, after one wait per failure', async () => {
    const clock = recordingClock();
    const work = failing(3);
    const seen: number[] = [];
    const value = await retry(work.fn, { policy: retryPolicies.storeWrite, clock, onRetry: (_err, ms, failures) => seen.push(failures, ms) });
    assert.equal(value, 'ok');
    assert.equal(work.calls(), 4);
    assert.deepEqual(clock.sleeps, [100, 200, 400]);
    assert.deepEqual(seen, [1, 100, 2, 200, 3, 400]);
  });

  it('gives up once giveUpAfterMs was waited, throwing the last error', async () => {
    const clock = recordingClock();
    const work = failing(Infinity);
    await assert.rejects(retry(work.fn, { policy: { ...retryPolicies.jobEventApply, giveUpAfterMs: 1_000 }, clock }), /boom/);
    // 100 + 200 + 400 = 700 waited: one more wait (800), then 1 500 ≥ 1 000 ends it
    assert.deepEqual(clock.sleeps, [100, 200, 400, 800]);
    assert.equal(work.calls(), 5);
  });

  it('keeps retrying past giveUpAfterMs the errors the policy says persist (a lost store connection)', async () => {
    const clock = recordingClock();
    const work = failing(30, connectionLost);
    assert.equal(await retry(work.fn, { policy: { ...retryPolicies.storeWrite, giveUpAfterMs: 0 }, clock }), 'ok');
    assert.equal(clock.sleeps.length, 30);
    assert.equal(Math.max(...clock.sleeps), retryPolicies.storeWrite.maxMs);
    await assert.rejects(retry(failing(1).fn, { policy: { ...retryPolicies.storeWrite, giveUpAfterMs: 0 }, clock: recordingClock() }), /boom/);
  });

  it('retries a policy without a give-up rule until the signal aborts, then throws the last error without another try', async () => {
    const abandon = new Cancellation();
    const clock = recordingClock(() => {
      if (clock.sleeps.length === 5) abandon.abort();
    });
    const work = failing(Infinity);
    await assert.rejects(retry(work.fn, { policy: retryPolicies.logPublish, clock, signal: abandon }), /boom/);
    assert.equal(work.calls(), 5);
  });

  it('makes the first call even when the signal has already aborted, and does not retry it', async () => {
    const controller = new AbortController();
    controller.abort();
    const clock = recordingClock();
    assert.equal(await retry(failing(0).fn, { policy: retryPolicies.busReconnect, clock, signal: controller.signal }), 'ok');
    const work = failing(1);
    await assert.rejects(retry(work.fn, { policy: retryPolicies.busReconnect, clock, signal: controller.signal }), /boom/);
    assert.equal(work.calls(), 1);
    assert.deepEqual(clock.sleeps, []);
  });

});
