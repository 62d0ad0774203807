import assert from 'node:assert/strict';
import fc from 'fast-check';
import { RateLimiter } from '../src/http/rate-limit.js';

describe('RateLimiter (nginx limit_req burst nodelay)', () => {
  it('accepts 1 + burst at once, then refuses until the bucket drains', () => {
    let now = 0;
    const limiter = new RateLimiter(20, 40, () => now);
    for (let i = 0; i < 41; i++) assert.equal(limiter.take('a').allowed, true, `request ${i}`);
    assert.deepEqual(limiter.take('a'), { allowed: false, retryAfterSeconds: 1 });
    now += 50; // one request's worth at 20/s
    assert.equal(limiter.take('a').allowed, true);
    assert.equal(limiter.take('a').allowed, false);
  });

  it('drains 10 per minute as one every 6 s and says so in Retry-After', () => {
    let now = 0;
    const limiter = new RateLimiter(10 / 60, 5, () => now);
    for (let i = 0; i < 6; i++) assert.equal(limiter.take('a').allowed, true);
    assert.deepEqual(limiter.take('a'), { allowed: false, retryAfterSeconds: 6 });
    now += 5_999;
    assert.equal(limiter.take('a').allowed, false);
    now += 1;
    assert.equal(limiter.take('a').allowed, true);
  });

  it('never lets more than 1 + burst + rate × elapsed requests through (property)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 50 }),
        fc.integer({ min: 0, max: 20 }),
        fc.array(fc.integer({ min: 0, max: 500 }), { minLength: 1, maxLength: 300 }),
        (rate, burst, gaps) => {
          let now = 0;
          const limiter = new RateLimiter(rate, burst, () => now);
          let accepted = 0;
          for (const gap of gaps) {
            now += gap;
            if (limiter.take('k').allowed) accepted++;
          }
          return accepted <= 1 + burst + Math.floor((rate * now) / 1000) + 1;
        },
      ),
    );
  });

  it('keeps separate buckets per key and stays bounded in memory', () => {
    const now = 0;
    const limiter = new RateLimiter(1, 0, () => now, 100);
    for (let i = 0; i < 1000; i++) limiter.take(`k${i}`);
    assert.equal(limiter.take('fresh').allowed, true);
    assert.ok((limiter as unknown as { buckets: Map<string, unknown> }).buckets.size <= 101);
  });
});
