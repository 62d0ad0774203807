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
import { newId, retry, retryPolicies, type Clock } from '@orloj/common/core';
import { jobDurationSeconds, type DomainEvent, type JobEventData } from '@orloj/common/domain';
import type { Logger } from '@orloj/common/logging';
import { MESSAGE_TYPES, QUEUES } from '@orloj/common/messages';
import type { SignedBus } from '@orloj/common/envelope';
import type { Subscription } from '@orloj/common/bus';
import type { OrlojMetrics } from '@orloj/common/observability';
import type { Store } from '@orloj/common/store';
import { notificationFor } from './rules/notification.rule.js';
import { OutboxRelay } from './outbox-relay.js';

/** A value fit for a metric label. */
const LABEL = /^[A-Z][A-Z0-9_]{0,63}$/;

export interface NotifierOptions {
  store: Store;
  /** Verifies as any role; the relay signs as role 'notifier'. */
  bus: SignedBus;
  clock: Clock;
  logger: Logger;
  /** Outbox poll interval (NOTIFIER_POLL_INTERVAL). Default 500 ms. */
  pollMs?: number;
  /** Events applied at once. Default 16. */
  prefetch?: number;
  /** Run the outbox relay in this process. Default true. */
  relay?: boolean;
  /** How long (clock ms) an event failing with a non-connection error is retried before it goes back to the bus. Default 60 s. */
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
  private sub: Subscription | undefined;
  private starting: Promise<void> | undefined;
  private stopping: Promise<void> | undefined;

  constructor(private readonly options: NotifierOptions) {
    this.log = options.logger.child({ role: 'notifier' });
    if (options.relay !== false) {
      this.relay = new OutboxRelay({ store: options.store, bus: options.bus, clock: options.clock, logger: this.log, ...(options.pollMs ? { pollMs: options.pollMs } : {}) });
    }
  }

  /** Starts consuming events and relaying the outbox. Memoised. */
  start(): Promise<void> {
    this.starting ??= (async () => {
      // The bus refuses (and logs) another message type or a body decodeDomainEvent cannot read; this counts them.
      this.sub = await this.options.bus.consume(QUEUES.domainEvents, (envelope) => this.onMessage(envelope.body), {
        prefetch: this.options.prefetch ?? 16,
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

  private async onMessage(event: DomainEvent): Promise<void> {
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
  async apply(event: DomainEvent): Promise<void> {
    const { store, clock } = this.options;
    const notified = await store.transaction(async (tx) => {
      if (!(await tx.analytics.markApplied(event.id, clock.now()))) return undefined;
      const workflow = { workflowId: event.workflow_id, userId: event.user_id, kind: event.data.workflow_kind };
      if (event.kind === 'workflow.created') await tx.analytics.addToWorkflow(workflow, 0, 0);
      else if (event.kind.startsWith('job.')) await tx.analytics.addToWorkflow(workflow, 1, jobDurationSeconds(event.data as JobEventData));
      else if (event.kind === 'workflow.deleted') await tx.analytics.markDeleted(event.workflow_id, event.occurred_at);
      let inserted = false;
      const content = notificationFor(event);
      // A deleted workflow's notifications went with it; none is made for it afterwards.
      if (content && (await tx.workflows.holdIfExists(event.workflow_id))) {
        inserted = await tx.notifications.insert({
          id: newId(),
          userId: event.user_id,
          workflowId: event.workflow_id,
          dedupeKey: `${event.user_id}:${event.id}`,
          kind: content.kind,
          payload: JSON.stringify(content.payload),
          readAt: null,
          createdAt: event.occurred_at,
          updatedAt: event.occurred_at,
        });
      }
      await tx.outbox.remove(event.id);
      return inserted;
    });
    if (notified === undefined) {
      this.counts.duplicates += 1;
      return;
    }
    this.counts.applied += 1;
    if (notified) this.counts.notifications += 1;
    if (event.kind.startsWith('job.')) this.observeJob(event.data as JobEventData);
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

