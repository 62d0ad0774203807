import assert from 'node:assert/strict';
import { ManualClock } from '@orloj/common/core';
import { ExpiringSet } from '../src/expiring-set.js';
import { Semaphore } from '../src/semaphore.js';

describe('Semaphore', () => {
  it('grants at most `size` slots and serves waiters in arrival order', async () => {
    const s = new Semaphore(2);
    const a = await s.acquire();
    await s.acquire();
    const order: string[] = [];
    const c = s.acquire().then((release) => (order.push('c'), release));
    const d = s.acquire().then((release) => (order.push('d'), release));
    assert.equal(s.inUse, 2);
    assert.equal(s.waiting, 2);
    a();
    a(); // a second release is harmless
    (await c)();
    await d;
    assert.deepEqual(order, ['c', 'd']);
    assert.equal(s.inUse, 2);
    assert.equal(s.waiting, 0);
  });

  it('rejects a waiter whose signal aborts, and one whose signal is already aborted', async () => {
    const s = new Semaphore(1);
    const held = await s.acquire();
    const controller = new AbortController();
    const waiting = s.acquire(controller.signal);
    controller.abort(new Error('stopping'));
    await assert.rejects(waiting, /stopping/);
    assert.equal(s.waiting, 0);
    await assert.rejects(s.acquire(controller.signal), /stopping/);
    held();
    assert.equal(s.inUse, 0);
  });
});

describe('ExpiringSet', () => {
  it('forgets members after the ttl and keeps at most `max`, newest first', () => {
    const clock = new ManualClock();
    const set = new ExpiringSet({ clock, ttlMs: 1000, max: 2 });
    set.add('a');
    clock.advance(500);
    set.add('b');
    set.add('c');
    assert.deepEqual([set.has('a'), set.has('b'), set.has('c'), set.size], [false, true, true, 2]);
    clock.advance(999);
    assert.equal(set.has('b'), true);
    clock.advance(1);
    assert.deepEqual([set.has('b'), set.has('c'), set.size], [false, false, 0]);
  });
});
