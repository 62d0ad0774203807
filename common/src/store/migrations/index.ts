import type { Kysely, Migration, MigrationProvider } from 'kysely';
import type { DialectHelpers } from '../dialect.js';
import * as m0001 from './0001-initial.js';
import * as m0002 from './0002-jobs.js';
import * as m0003 from './0003-job-dispatch.js';
import * as m0004 from './0004-job-logs.js';
import * as m0005 from './0005-scheduler-indexes.js';
import * as m0006 from './0006-notifications.js';
import * as m0007 from './0007-workflow-list-versions.js';
import * as m0008 from './0008-skipped-slots.js';
import * as m0009 from './0009-job-log-truncated.js';
import * as m0011 from './0011-retention.js';
import * as m0012 from './0012-job-checks.js';
import * as m0013 from './0013-job-log-blocks.js';
import * as m0014 from './0014-job-request-id.js';
import * as m0015 from './0015-notification-state-changes.js';
import * as m0016 from './0016-user-workflow-counts.js';
import * as m0017 from './0017-workflow-schedules.js';
import * as m0018 from './0018-incidents.js';
import * as m0019 from './0019-workflow-attention.js';
import * as m0020 from './0020-maintenance-windows.js';
import * as m0021 from './0021-workflow-run-policy.js';
import * as m0022 from './0022-attempts-and-uptime.js';
import * as m0023 from './0023-rollup-running-totals.js';
import * as m0024 from './0024-attention-paused.js';
import * as m0025 from './0025-pending-jobs-by-user.js';
import * as m0026 from './0026-rollup-histogram-columns.js';
import * as m0028 from './0028-queued-jobs.js';
import * as m0029 from './0029-jitter-offset-ms.js';

interface DialectMigration {
  up(db: Kysely<any>, d: DialectHelpers): Promise<void>;
}

/** Ordered list of migrations; names sort in application order. Never edit a released one. */
const MIGRATIONS: Record<string, DialectMigration> = {
  '0001-initial': m0001,
  '0002-jobs': m0002,
  '0003-job-dispatch': m0003,
  '0004-job-logs': m0004,
  '0005-scheduler-indexes': m0005,
  '0006-notifications': m0006,
  '0007-workflow-list-versions': m0007,
  '0008-skipped-slots': m0008,
  '0009-job-log-truncated': m0009,
  '0011-retention': m0011,
  '0012-job-checks': m0012,
  '0013-job-log-blocks': m0013,
  '0014-job-request-id': m0014,
  '0015-notification-state-changes': m0015,
  '0016-user-workflow-counts': m0016,
  '0017-workflow-schedules': m0017,
  '0018-incidents': m0018,
  '0019-workflow-attention': m0019,
  '0020-maintenance-windows': m0020,
  '0021-workflow-run-policy': m0021,
  '0022-attempts-and-uptime': m0022,
  '0023-rollup-running-totals': m0023,
  '0024-attention-paused': m0024,
  '0025-pending-jobs-by-user': m0025,
  '0026-rollup-histogram-columns': m0026,
  '0028-queued-jobs': m0028,
  '0029-jitter-offset-ms': m0029,
};

/** The names of the migrations this build knows, in application order. */
export const MIGRATION_NAMES: readonly string[] = Object.keys(MIGRATIONS);

/** The same migrations for both engines; dialect differences come in through the helpers. */
export function migrationProvider(d: DialectHelpers): MigrationProvider {
  return {
    async getMigrations(): Promise<Record<string, Migration>> {
      const out: Record<string, Migration> = {};
      for (const [name, m] of Object.entries(MIGRATIONS)) out[name] = { up: (db) => m.up(db, d) };
      return out;
    },
  };
}
