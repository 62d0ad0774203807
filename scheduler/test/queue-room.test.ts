import assert from 'node:assert/strict';
import { QueueRoom } from '../src/hand-out.js';

/** The runners' room (hand-out.ts): what it asks the store, and when. */
describe('the runners\' room', () => {
  const ids = (from: number, n: number) => Array.from({ length: n }, (_, i) => `job-${from + i}`);

  function room(queuedIds: () => ReadonlySet<string>) {
    let now = 0;
    const asked: number[] = [];
    const r = new QueueRoom(
      async (given) => {
        asked.push(given.length);
        const queued = queuedIds();
        return new Set(given.filter((id) => queued.has(id)));
      },
      () => now,
      4,
    );
    return { r, asked, at: (t: number) => (now = t) };
  }

  it('frees room the moment a start is applied here, without asking the store about a large queue again', async () => {
    const queued = new Set(ids(0, 500));
    const { r, asked, at } = room(() => queued);
    r.handedOut(ids(0, 500));
    assert.equal(await r.room(), 4 - 500, 'all waiting: only the floor');
    assert.deepEqual(asked, [500]);
    at(100);
    for (const id of ids(0, 200)) queued.delete(id);
    r.left(ids(0, 200));
    // 200 started in the last five seconds: the queue may be 200 deep, 300 wait.
    assert.equal(await r.room(), 200 - 300);
    assert.deepEqual(asked, [500], 'not asked again within a second while hundreds wait');
  });

  it('learns from the store, once a second, of starts applied elsewhere', async () => {
    const queued = new Set(ids(0, 500));
    const { r, asked, at } = room(() => queued);
    r.handedOut(ids(0, 500));
    await r.room();
    for (const id of ids(0, 300)) queued.delete(id); // another replica applied these starts
    at(999);
    assert.equal(await r.room(), 4 - 500, 'not yet asked');
    at(1_000);
    assert.equal(await r.room(), 300 - 200);
    assert.deepEqual(asked, [500, 500]);
  });

  it('asks at every pass while few wait', async () => {
    const queued = new Set(ids(0, 10));
    const { r, asked, at } = room(() => queued);
    r.handedOut(ids(0, 10));
    await r.room();
    at(10);
    queued.delete('job-0');
    assert.equal(await r.room(), 4 - 9);
    assert.deepEqual(asked, [10, 10]);
  });

  it('does not count a start twice when the store tells of one this replica applied', async () => {
    const queued = new Set(ids(0, 100));
    const { r, at } = room(() => queued);
    r.handedOut(ids(0, 100));
    await r.room();
    for (const id of ids(0, 10)) queued.delete(id);
    r.left(ids(0, 10));
    r.left(ids(0, 10)); // a redelivered batch
    at(2_000);
    assert.equal(await r.room(), 10 - 90, 'ten started, ninety wait');
  });
});
