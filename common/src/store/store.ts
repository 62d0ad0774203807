import { sql, type Kysely } from 'kysely';
import type { Database } from './schema.js';
import type { DialectHelpers } from './dialect.js';
import { UsersRepo } from './repos/users.repo.js';
import { SessionsRepo } from './repos/sessions.repo.js';
import { WorkflowsRepo } from './repos/workflows.repo.js';
import { IdempotencyRepo } from './repos/idempotency.repo.js';
import { JobsRepo } from './repos/jobs.repo.js';
import { JobQueueRepo } from './repos/job-queue.repo.js';
import { JobMovesRepo } from './repos/job-moves.repo.js';
import { LeasesRepo } from './repos/leases.repo.js';
import { LogQueriesRepo } from './repos/log-queries.repo.js';
import { LogsRepo } from './repos/logs.repo.js';
import { OutboxRepo } from './repos/outbox.repo.js';
import { NotificationsRepo } from './repos/notifications.repo.js';
import { AnalyticsRepo } from './repos/analytics.repo.js';
import { RetentionRepo } from './repos/retention.repo.js';
import { IncidentsRepo } from './repos/incidents.repo.js';
import { RollupsRepo } from './repos/rollups.repo.js';
import { JobAttemptsRepo } from './repos/job-attempts.repo.js';
import { UptimeRepo } from './repos/uptime.repo.js';
import { MaintenanceWindowsRepo } from './repos/maintenance-windows.repo.js';
import type { DatabaseHandle } from './database.js';
import { CompiledReads, ReadRunner, TransactionScope } from './compiled-read.js';

/**
 * The repositories over one database, or over one open transaction of it.
 * `transaction()` hands the callback a Store whose repositories all run inside
 * that transaction.
 */
export class Store {
  readonly users: UsersRepo;
  readonly sessions: SessionsRepo;
  readonly workflows: WorkflowsRepo;
  readonly idempotency: IdempotencyRepo;
  readonly jobs: JobsRepo;
  /** The runners' queue: what the scheduler's hand-out reads and writes as it hands jobs out. */
  readonly jobQueue: JobQueueRepo;
  /** A job's lifecycle moves (domain/job-state.ts's units applied), one or a batch of them. */
  readonly jobMoves: JobMovesRepo;
  readonly leases: LeasesRepo;
  readonly logQueries: LogQueriesRepo;
  /** Job log lines and counts: the write side (log-ingest). */
  readonly logs: LogsRepo;
  /** Domain events waiting to be relayed (written with the change that caused them). */
  readonly outbox: OutboxRepo;
  readonly notifications: NotificationsRepo;
  readonly analytics: AnalyticsRepo;
  /** The retention sweep's bounded deletes (docs/operations.md, "Retention"). */
  readonly retention: RetentionRepo;
  /** Down periods (issue 26, docs/adr/0016-incidents.md). */
  readonly incidents: IncidentsRepo;
  /** Reliability rollups (issue 26). */
  readonly rollups: RollupsRepo;
  /** Attempts a job gave up (issue 26). */
  readonly jobAttempts: JobAttemptsRepo;
  /** When orloj ran: the leader's periods, and the downtime between them (issue 26). */
  readonly uptime: UptimeRepo;
  /** Maintenance windows and snoozes (issue 25, docs/adr/0019-maintenance-windows.md). */
  readonly maintenanceWindows: MaintenanceWindowsRepo;

  /**
   * `reads` are the database's compiled reads (compiled-read.ts), shared with
   * its transactions' stores; without them (a bare Kysely instance), they are
   * compiled for this store alone and run through Kysely. `scope`: the
   * transaction this store runs in, if any (see transaction()).
   */
  constructor(
    readonly db: Kysely<Database>,
    readonly dialect: DialectHelpers,
    private readonly reads: CompiledReads = new CompiledReads(db, undefined),
    scope?: TransactionScope,
  ) {
    const runner = new ReadRunner(reads, db, scope);
    this.users = new UsersRepo(db, dialect, runner);
    this.sessions = new SessionsRepo(db, runner);
    this.workflows = new WorkflowsRepo(db, dialect, runner);
    this.idempotency = new IdempotencyRepo(db, runner);
    this.jobs = new JobsRepo(db, runner, dialect);
    this.jobQueue = new JobQueueRepo(db, dialect, runner);
    this.jobMoves = new JobMovesRepo(db, runner, dialect);
    this.leases = new LeasesRepo(db);
    this.logQueries = new LogQueriesRepo(dialect, runner);
    this.logs = new LogsRepo(db, dialect);
    this.outbox = new OutboxRepo(db, runner);
    this.notifications = new NotificationsRepo(db, dialect, runner);
    this.analytics = new AnalyticsRepo(db, runner);
    this.retention = new RetentionRepo(db);
    this.incidents = new IncidentsRepo(db);
    this.rollups = new RollupsRepo(db, runner);
    this.jobAttempts = new JobAttemptsRepo(db);
    this.uptime = new UptimeRepo(db);
    this.maintenanceWindows = new MaintenanceWindowsRepo(db);
  }

  /** A round trip to the database (readiness probes): rejects when it cannot be reached. */
  async ping(): Promise<void> {
    await sql`select 1`.execute(this.db);
  }

  static fromHandle(h: DatabaseHandle): Store {
    return new Store(h.db, h.dialect, new CompiledReads(h.db, h.reader, h.writer));
  }

  /**
   * Runs `fn` in one transaction. On SQLite the transaction holds the one
   * writer connection until it ends, so its compiled statements run on that
   * connection directly. The scope closes when `fn` settles: the store it was
   * given refuses compiled statements from then on.
   */
  transaction<T>(fn: (tx: Store) => Promise<T>): Promise<T> {
    return this.db.transaction().execute(async (trx) => {
      const scope = new TransactionScope(this.reads.writer);
      try {
        return await fn(new Store(trx, this.dialect, this.reads, scope));
      } finally {
        scope.end();
      }
    });
  }
}
