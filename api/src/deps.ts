import type { Clock, Logger, ResolvedConfig, SignedBus, Store } from '@orloj/common';
import type { SessionManager } from './http/session.js';
import type { IdempotencyGuard } from './http/idempotency.js';
import type { LiveTailHub } from './http/live-tail.js';

/** What every route handler may use; built once in createApp. */
export interface ApiDeps {
  store: Store;
  config: ResolvedConfig;
  clock: Clock;
  logger: Logger;
  sessions: SessionManager;
  idempotency: IdempotencyGuard;
  /** The bus as the api role sees it (live log broadcasts); absent in tests and tools. */
  bus?: SignedBus | undefined;
  /** Open live log tails: the per-client limit and the broadcast fan-out. */
  tails: LiveTailHub;
}
