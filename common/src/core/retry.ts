import type { AbortLike } from './cancellation.js';
import type { Clock } from './clock.js';
import { isConnectionError } from './connection-errors.js';

/**
 * Retrying with backoff, in one place. Every "keep trying" in orloj — a store
 * write waiting out a database restart, a runner's result or log batch
 * waiting for the bus, the bus reconnecting to its broker — is one of the
 * named policies below run by `retry` (a loop on an injected clock) or, for
 * timer-driven code, `backoffDelay`. docs/retry.md lists the policies and
 * where each is used.
 */
export interface BackoffPolicy {
  /** The first wait, in ms. */
  readonly initialMs: number;
  /** Each wait is this many times the one before... */
  readonly factor: number;
  /** ...up to this cap, in ms. */
  readonly maxMs: number;
  /**
   * The share of each wait taken off at random: 0 waits exactly, 0.5 waits
   * between half and all of it, so a fleet does not retry in step after an
   * outage.
   */
  readonly jitter: number;
}

export interface RetryPolicy extends BackoffPolicy {
  /**
   * Gives up once this much time was spent waiting (the sum of the waits, so
   * an accelerated or manual clock counts the same), for errors `persists`
   * does not exempt. Absent: retries until the signal aborts.
   */
  readonly giveUpAfterMs?: number;
  /** Errors retried past giveUpAfterMs (still ended by the signal). */
  readonly persists?: (err: unknown) => boolean;
}

/**
 * The policies in use. Each site may override a bound its own options expose
 * (`{ ...retryPolicies.storeWrite, giveUpAfterMs: options.maxRetryMs }`).
 */
export const retryPolicies = {
  /**
   * A store write that must not be lost (log lines, a domain event): an
   * outage of the database's connection is waited out until stop(); any other
   * error is retried for a minute, then the message goes back to the bus.
   */
  storeWrite: { initialMs: 100, factor: 2, maxMs: 5_000, jitter: 0, giveUpAfterMs: 60_000, persists: isConnectionError },
  /**
   * The scheduler applying a runner's job event: every error, a lost
   * connection included, goes back to the bus after a minute, so a
   * scheduler replica that cannot reach the store hands the event to
   * another one instead of sitting on it (failed deliveries count toward
   * dead-lettering only then).
   */
  jobEventApply: { initialMs: 100, factor: 2, maxMs: 10_000, jitter: 0, giveUpAfterMs: 60_000 },
  /** A runner's job.finished: published until the bus takes it or stop() abandons it. */
  resultPublish: { initialMs: 250, factor: 2, maxMs: 15_000, jitter: 0.5 },
  /** A runner's batch of log lines: published until the bus takes it or the sink is abandoned. */
  logPublish: { initialMs: 100, factor: 2, maxMs: 5_000, jitter: 0.5 },
  /** The AMQP bus reconnecting to its broker, and re-attaching a consumer. */
  busReconnect: { initialMs: 100, factor: 2, maxMs: 5_000, jitter: 0.5 },
} as const satisfies Record<string, RetryPolicy>;

/**
 * The wait after `failures` earlier failures (0 for the first retry):
 * initialMs × factor^failures, capped, minus the jitter; at least 1 ms.
 */
export function backoffDelay(policy: BackoffPolicy, failures: number, random: () => number = Math.random): number {
  const step = Math.min(policy.maxMs, policy.initialMs * policy.factor ** Math.min(Math.max(0, failures), 30));
  const jittered = policy.jitter > 0 ? step * (1 - policy.jitter * random()) : step;
  return Math.max(1, Math.round(jittered));
}

export interface RetryOptions {
  policy: RetryPolicy;
  /** The waits are clock time (`clock.sleep`). */
  clock: Clock;
  /** Ends the retries: a failure once it aborted, or a wait it cuts short, throws the last error. */
  signal?: AbortLike | undefined;
  /** Called before each wait: the error, the wait, and how many failures so far (1 on the first). */
  onRetry?: (err: unknown, delayMs: number, failures: number) => void;
  /** For tests: the jitter's random source. */
  random?: () => number;
}

/**
 * Runs `attempt` until it resolves. A failure is retried after a wait unless
 * the signal has aborted or the policy gives up, and then `attempt`'s error
 * is thrown as it is. The first call is made even if the signal has already
 * aborted (a caller that must not start then checks first).
 */
export async function retry<T>(attempt: () => Promise<T>, options: RetryOptions): Promise<T> {
  const { policy, clock, signal } = options;
  let waitedMs = 0;
  for (let failures = 0; ; ) {
    try {
      return await attempt();
    } catch (err) {
      if (signal?.aborted) throw err;
      if (policy.giveUpAfterMs !== undefined && waitedMs >= policy.giveUpAfterMs && !policy.persists?.(err)) throw err;
      const delayMs = backoffDelay(policy, failures, options.random);
      failures += 1;
      options.onRetry?.(err, delayMs, failures);
      await clock.sleep(delayMs, signal);
      waitedMs += delayMs;
      if (signal?.aborted) throw err;
    }
  }
}
