import type { Clock } from '@orloj/common/core';
import type { ResolvedConfig } from '@orloj/common/config';
import type { Logger } from '@orloj/common/logging';
import { MESSAGE_TYPES, TOPICS } from '@orloj/common/messages';
import type { SignedBus } from '@orloj/common/envelope';
import type { Store } from '@orloj/common/store';
import type { SessionManager } from './http/session.js';
import type { IdempotencyGuard } from './http/idempotency.js';
import type { LiveTailHub } from './http/live-tail.js';
import type { ListPageCache } from './http/list-pages.js';
import type { HeavyRequests } from './http/heavy-requests.js';

/** What every route handler may use; built once in createApp. */
export interface ApiDeps {
  store: Store;
  config: ResolvedConfig;
  clock: Clock;
  logger: Logger;
  sessions: SessionManager;
  idempotency: IdempotencyGuard;
  /** Rendered workflow list pages, reused while their user's list version holds. */
  listPages: ListPageCache;
  /** The bus as the api role sees it (live log broadcasts); absent in tests and tools. */
  bus?: SignedBus | undefined;
  /** Open live log tails: the per-client limit and the broadcast fan-out. */
  tails: LiveTailHub;
  /** The process's places for requests with large answers (pages, searches, downloads). */
  heavy: HeavyRequests;
}

/** A nudge to the scheduler leader expires after this long (the tick finds the work anyway). */
const SCHEDULER_WAKE_TTL_MS = 60_000;

/**
 * Tells the scheduler leader there is new work (a build, a manual job) so it
 * takes it now instead of at its next tick. Best effort: the tick finds the
 * work anyway, so a lost nudge costs at most a tick of latency.
 */
export function nudgeScheduler(deps: Pick<ApiDeps, 'bus' | 'logger'>): void {
  deps.bus
    ?.broadcast(TOPICS.schedulerWake, MESSAGE_TYPES.schedulerWake, {}, { ttlMs: SCHEDULER_WAKE_TTL_MS })
    .catch((err: unknown) => deps.logger.warn({ err }, 'could not nudge the scheduler; the work waits for its next tick'));
}
