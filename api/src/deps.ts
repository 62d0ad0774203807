import type { Clock, Logger, ResolvedConfig, Store } from '@orloj/common';
import type { SessionManager } from './http/session.js';
import type { IdempotencyGuard } from './http/idempotency.js';

/** What every route handler may use; built once in createApp. */
export interface ApiDeps {
  store: Store;
  config: ResolvedConfig;
  clock: Clock;
  logger: Logger;
  sessions: SessionManager;
  idempotency: IdempotencyGuard;
}
