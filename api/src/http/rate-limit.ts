/**
 * Request rate limits with nginx `limit_req … burst=N nodelay` semantics: a
 * leaky bucket per key that drains at `rate` requests per second; a request
 * is accepted while the bucket's excess stays within `burst`, and refused
 * without changing the bucket otherwise.
 */

/** Clients (keys) a rate limiter tracks before it evicts idle ones. */
const MAX_KEYS = 100_000;

export interface RateLimitDecision {
  allowed: boolean;
  /** Whole seconds until a request would be accepted again (refusals only). */
  retryAfterSeconds: number;
}

interface Bucket {
  /** Requests above the drain rate, in thousandths of a request (as nginx counts). */
  excess: number;
  last: number;
}

export class RateLimiter {
  private readonly buckets = new Map<string, Bucket>();
  private readonly ratePerMs: number;
  private readonly burst: number;

  constructor(
    ratePerSecond: number,
    burst: number,
    private readonly now: () => number,
    private readonly maxKeys = MAX_KEYS,
  ) {
    this.ratePerMs = ratePerSecond; // thousandths of a request per millisecond
    this.burst = burst * 1000;
  }

  take(key: string): RateLimitDecision {
    const now = this.now();
    const bucket = this.buckets.get(key);
    let excess = 0;
    if (bucket) {
      const elapsed = Math.max(0, now - bucket.last);
      excess = Math.max(0, bucket.excess - this.ratePerMs * elapsed) + 1000;
      if (excess > this.burst) {
        return { allowed: false, retryAfterSeconds: Math.max(1, Math.ceil((excess - this.burst) / this.ratePerMs / 1000)) };
      }
    }
    if (!bucket && this.buckets.size >= this.maxKeys) this.evictIdle(now);
    this.buckets.delete(key); // re-insert to keep the map ordered by last use
    this.buckets.set(key, { excess, last: now });
    return { allowed: true, retryAfterSeconds: 0 };
  }

  /** Drops buckets that have drained to empty; oldest first. */
  private evictIdle(now: number): void {
    for (const [key, b] of this.buckets) {
      if (b.excess - this.ratePerMs * (now - b.last) <= 0 || this.buckets.size >= this.maxKeys) this.buckets.delete(key);
      else break;
    }
  }
}
