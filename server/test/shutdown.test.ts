import assert from 'node:assert/strict';
import { stopInOrder } from '../src/shutdown.js';

describe('shutdown order', () => {
  it('stops the bus and the store after a role whose stop() rejects, then reports the failure', async () => {
    const stopped: string[] = [];
    const step = (name: string, fails = false) => ({
      stop: async () => {
        stopped.push(name);
        if (fails) throw new Error(`${name} failed`);
      },
    });
    const seen: unknown[] = [];
    await assert.rejects(stopInOrder([step('api'), step('runners', true), step('scheduler'), step('bus'), step('store')], (err) => seen.push(err)), /runners failed/);
    assert.deepEqual(stopped, ['api', 'runners', 'scheduler', 'bus', 'store']);
    assert.equal(seen.length, 1);
  });

  it('names every failure when more than one part fails', async () => {
    const fail = (name: string) => ({ stop: () => Promise.reject(new Error(name)) });
    await assert.rejects(stopInOrder([fail('a'), fail('b')]), (err: unknown) => err instanceof AggregateError && err.errors.length === 2);
  });
});
