/**
 * The notifier role: turns domain events into notifications and analytics
 * counters (docs/notifications.md).
 *
 * - Its OutboxRelay publishes the outbox on QUEUES.domainEvents; its consumer
 *   applies each event in one transaction: the dedupe record (applied_events),
 *   the workflow's counters, the notification (under a unique user + event
 *   key) and the removal of the outbox row. An event delivered again finds
 *   its identity recorded and changes nothing, so replays are no-ops and every
 *   event counts exactly once.
 * - Acked only after the commit: a crash (kill -9) loses nothing; the broker
 *   redelivers what was unacked.
 * - Patient: a store that is down is waited for instead of dead-lettering events.
 */
import { Batcher, newId, retry, retryPolicies, type Clock, type Within } from '@orloj/common/core';
import { isJobEvent, jobDurationSeconds, type DomainEvent, type JobEventData } from '@orloj/common/domain';
import type { Logger } from '@orloj/common/logging';
import { MESSAGE_TYPES, QUEUES } from '@orloj/common/messages';
import type { SignedBus } from '@orloj/common/envelope';
import type { Subscription } from '@orloj/common/bus';
import type { OrlojMetrics } from '@orloj/common/observability';
import type { Store } from '@orloj/common/store';
import type { WorkflowKind } from '@orloj/common/domain';
import { notificationFor } from './rules/notification.rule.js';
import { OutboxRelay } from './outbox-relay.js';

/** A value fit for a metric label. */
const LABEL = /^[A-Z][A-Z0-9_]{0,63}$/;

/** Domain events a notifier holds unacknowledged, and so the most it applies in one transaction. */
const PREFETCH = 16;

export interface NotifierOptions {
  store: Store;
  /** Verifies as any role; the relay signs as role 'notifier'. */
  bus: SignedBus;
  clock: Clock;
  logger: Logger;
  /** Outbox poll interval (NOTIFIER_POLL_INTERVAL). */
  pollMs?: number;
  /** Events held unacknowledged, the most applied in one transaction (PREFETCH unless set). */
  prefetch?: number;
  /** Run the outbox relay in this process. Default true. */
  relay?: boolean;
  /** How long (clock ms) an event failing with a non-connection error is retried before it goes back to the bus (retryPolicies.storeWrite's giveUpAfterMs unless set). */
  maxRetryMs?: number;
  /** Jobs finished and schedule lag are counted there, once per applied event. */
  metrics?: OrlojMetrics | undefined;
}

export interface NotifierMetrics {
  /** Events applied (committed). */
  applied: number;
  /** Deliveries of events applied before (replays). */
  duplicates: number;
  notifications: number;
  malformed: number;
  retries: number;
  /** Events the relay published. */
  published: number;
}

export class Notifier {
  private readonly log: Logger;
  private readonly relay: OutboxRelay | undefined;
  private readonly counts = { applied: 0, duplicates: 0, notifications: 0, malformed: 0, retries: 0 };
  private readonly abort = new AbortController();
  /** Events delivered at the same moment go in one transaction (up to the prefetch). */
  private readonly batcher: Batcher<DomainEvent>;
  private sub: Subscription | undefined;
  private starting: Promise<void> | undefined;
  private stopping: Promise<void> | undefined;

  constructor(private readonly options: NotifierOptions) {
    this.log = options.logger.child({ role: 'notifier' });
    this.batcher = new Batcher<DomainEvent>({
      many: (events, within) => this.applyMany(events, within),
      one: (event) => this.patiently(event),
      onBatchFailure: (err, events) => this.log.warn({ err, events }, 'could not apply a batch of domain events; applying them one by one'),
    });
    if (options.relay !== false) {
      this.relay = new OutboxRelay({ store: options.store, bus: options.bus, clock: options.clock, logger: this.log, ...(options.pollMs ? { pollMs: options.pollMs } : {}) });
    }
  }

  /** Starts consuming events and relaying the outbox. Memoised. */
  start(): Promise<void> {
    this.starting ??= (async () => {
      // The bus refuses (and logs) another message type or a body decodeDomainEvent cannot read; this counts them.
      this.sub = await this.options.bus.consume(QUEUES.domainEvents, (envelope) => this.batcher.receive(envelope.body), {
        prefetch: this.options.prefetch ?? PREFETCH,
        accept: [MESSAGE_TYPES.domainEvent],
        onMalformed: () => void (this.counts.malformed += 1),
      });
      this.relay?.start();
      this.log.info({ relay: this.relay !== undefined }, 'notifier started');
    })();
    return this.starting;
  }

  /** Stops relaying and consuming; an event being retried goes back to the bus. Idempotent. */
  stop(): Promise<void> {
    this.stopping ??= (async () => {
      await this.starting?.catch(() => undefined);
      await this.relay?.stop();
      this.abort.abort();
      await this.sub?.cancel();
      this.log.info(this.metrics(), 'notifier stopped');
    })();
    return this.stopping;
  }

  metrics(): NotifierMetrics {
    return { ...this.counts, published: this.relay?.published ?? 0 };
  }

  /** One event on its own, waiting out a store outage (retryPolicies.storeWrite): after its batch failed. */
  private async patiently(event: DomainEvent): Promise<void> {
    const policy = { ...retryPolicies.storeWrite, giveUpAfterMs: this.options.maxRetryMs ?? retryPolicies.storeWrite.giveUpAfterMs };
    return retry(() => this.apply(event), {
      policy,
      clock: this.options.clock,
      signal: this.abort.signal,
      onRetry: (err, retryInMs) => {
        this.counts.retries += 1;
        this.log.warn({ err, eventId: event.id, retryInMs }, 'could not apply a domain event; retrying');
      },
    });
  }

  /** Applies the event once: dedupe record, counters, notification and outbox row in one transaction. */
  apply(event: DomainEvent): Promise<void> {
    return this.applyMany([event]);
  }

  /**
   * Applies these events, each once, in one transaction, with the effect of
   * applying them one by one in this order: the dedupe records (an event
   * applied before, or earlier in the batch, changes nothing more), the
   * counters (summed per workflow; a workflow's deletion kept in its place
   * among its events), the notifications and the outbox rows — a few
   * statements for the batch. `within` runs a line about event i in the
   * async context its delivery came in (the Batcher's), so it carries the
   * reqId of the request that caused the event.
   */
  async applyMany(events: readonly DomainEvent[], within: Within = (_i, fn) => fn()): Promise<void> {
    const { store, clock } = this.options;
    const { fresh, notified } = await store.transaction(async (tx) => {
      const newIds = await tx.analytics.markAppliedMany(events.map((e) => e.id), clock.now());
      const seen = new Set<string>();
      const fresh = events.filter((e) => newIds.has(e.id) && !seen.has(e.id) && seen.add(e.id));
      await applyCounters(tx, fresh);
      const contents = fresh.map((event) => [event, notificationFor(event)] as const).filter(([, content]) => content !== undefined);
      // A deleted workflow's notifications went with it; none is made for it afterwards.
      const existing = await tx.workflows.holdExisting(contents.map(([event]) => event.workflow_id));
      const notified = await tx.notifications.insertMany(
        contents
          .filter(([event]) => existing.has(event.workflow_id))
          .map(([event, content]) => ({
            id: newId(),
            userId: event.user_id,
            workflowId: event.workflow_id,
            dedupeKey: `${event.user_id}:${event.id}`,
            kind: content!.kind,
            stateChange: content!.stateChange ?? null,
            payload: JSON.stringify(content!.payload),
            readAt: null,
            createdAt: event.occurred_at,
            updatedAt: event.occurred_at,
          })),
      );
      await tx.outbox.removeMany(fresh.map((e) => e.id));
      return { fresh, notified };
    });
    this.counts.duplicates += events.length - fresh.length;
    this.counts.applied += fresh.length;
    this.counts.notifications += notified;
    for (const event of fresh) if (isJobEvent(event)) this.observeJob(event.data);
    if (this.log.isLevelEnabled('debug')) this.logApplied(events, new Set(fresh), within);
  }

  /** One debug line per event of an applied batch, each in its delivery's context (its reqId). */
  private logApplied(events: readonly DomainEvent[], fresh: ReadonlySet<DomainEvent>, within: Within): void {
    events.forEach((event, i) =>
      within(i, () => {
        const jobId = 'job_id' in event.data ? event.data.job_id : undefined;
        const fields = { eventId: event.id, kind: event.kind, workflowId: event.workflow_id, ...(jobId === undefined ? {} : { jobId }) };
        this.log.debug(fields, fresh.has(event) ? 'applied a domain event' : 'a domain event applied before: nothing to do');
      }),
    );
  }

  /** Counted after the commit, and only by the delivery that applied the event: once per job. */
  private observeJob(data: JobEventData): void {
    const metrics = this.options.metrics;
    if (!metrics) return;
    const kind = data.workflow_kind;
    // Label values from a fixed vocabulary only: a label never takes an unbounded value.
    const reason = data.reason_code === undefined ? 'none' : LABEL.test(data.reason_code) ? data.reason_code : 'other';
    metrics.jobsFinished.inc({ kind, trigger: LABEL.test(data.trigger) ? data.trigger : 'other', status: LABEL.test(data.status) ? data.status : 'other', reason });
    if (data.trigger === 'AUTOMATIC' && data.started_at !== undefined && data.scheduled_at !== undefined) {
      metrics.scheduleLag.observe({ kind }, Math.max(0, data.started_at - data.scheduled_at) / 1000);
    }
  }
}


type Add = { workflowId: string; userId: string; kind: WorkflowKind; jobs: number; durationS: number };

/**
 * The counters of these (freshly applied) events, in the order given: what
 * each event adds, summed per workflow into one write, and a workflow's
 * deletion applied between what came before it and what came after.
 */
async function applyCounters(tx: Store, events: readonly DomainEvent[]): Promise<void> {
  const before = new Map<string, Add>();
  const after = new Map<string, Add>();
  const deleted: DomainEvent[] = [];
  const deletedIds = new Set<string>();
  for (const event of events) {
    if (event.kind === 'workflow.deleted') {
      deleted.push(event);
      deletedIds.add(event.workflow_id);
      continue;
    }
    if (!isJobEvent(event) && event.kind !== 'workflow.created') continue;
    const adds = deletedIds.has(event.workflow_id) ? after : before;
    const add = adds.get(event.workflow_id) ?? { workflowId: event.workflow_id, userId: event.user_id, kind: event.data.workflow_kind, jobs: 0, durationS: 0 };
    if (isJobEvent(event)) {
      add.jobs += 1;
      add.durationS += jobDurationSeconds(event.data);
    }
    adds.set(event.workflow_id, add);
  }
  await tx.analytics.addToWorkflows([...before.values()]);
  for (const event of deleted) await tx.analytics.markDeleted(event.workflow_id, event.occurred_at);
  await tx.analytics.addToWorkflows([...after.values()]);
}
