import type { Clock } from '@orloj/common/core';
import { SETTINGS } from '@orloj/common/config';
import type { Logger } from '@orloj/common/logging';
import { DOMAIN_EVENT_TTL_MS, MESSAGE_TYPES, QUEUES } from '@orloj/common/messages';
import type { SignedBus } from '@orloj/common/envelope';
import { eventRequestId } from '@orloj/common/domain';
import type { Store } from '@orloj/common/store';

/** Outbox events the relay claims per round. */
const BATCH_SIZE = 200;
/** How long a relay's claim keeps other relays off an event (a relay that dies mid-publish). */
const CLAIM_MS = 30_000;
/** How long an applied event's identity is remembered for deduplication, and how often old ones are forgotten. */
const DEDUPE_RETENTION_MS = 7 * 24 * 60 * 60_000;
const DEDUPE_PURGE_EVERY_MS = 60 * 60_000;

export interface OutboxRelayOptions {
  store: Store;
  /** Signs as role 'notifier'. */
  bus: SignedBus;
  clock: Clock;
  logger: Logger;
  /** Pause between polls when the outbox had nothing more to publish (NOTIFIER_POLL_INTERVAL). */
  pollMs?: number;
  /** Events claimed per round (BATCH_SIZE unless set). */
  batchSize?: number;
  /** How long a claim keeps other relays off an event (a relay that dies mid-publish; CLAIM_MS unless set). */
  claimMs?: number;
  /** How long an applied event's identity is remembered for deduplication (DEDUPE_RETENTION_MS unless set). */
  dedupeRetentionMs?: number;
}

/**
 * Publishes the domain events of the outbox on QUEUES.domainEvents, at least
 * once. A round claims due events (a claim keeps other relays off them),
 * publishes them and marks the ones the broker confirmed published. An event
 * is due when written, when a claim lapsed (its relay died or the publish
 * failed), and once its envelope expired without the notifier applying it
 * (a lost or dead-lettered message); the notifier deletes it once applied.
 * Duplicates are harmless: the notifier applies each event identity once.
 * An event caused by an api request (WorkflowEventData.request_id) is
 * published with that request id in its envelope.
 */
export class OutboxRelay {
  private readonly log: Logger;
  private readonly pollMs: number;
  private readonly batchSize: number;
  private readonly claimMs: number;
  private readonly dedupeRetentionMs: number;
  private readonly abort = new AbortController();
  private loop: Promise<void> | undefined;
  private stopping: Promise<void> | undefined;
  private nextPurgeAt = 0;
  /** Events the broker confirmed so far. */
  published = 0;

  constructor(private readonly options: OutboxRelayOptions) {
    this.log = options.logger;
    this.pollMs = options.pollMs ?? SETTINGS.NOTIFIER_POLL_INTERVAL.default;
    this.batchSize = options.batchSize ?? BATCH_SIZE;
    this.claimMs = options.claimMs ?? CLAIM_MS;
    this.dedupeRetentionMs = options.dedupeRetentionMs ?? DEDUPE_RETENTION_MS;
  }

  start(): void {
    this.loop ??= this.run();
  }

  stop(): Promise<void> {
    this.stopping ??= (async () => {
      this.abort.abort();
      await this.loop;
    })();
    return this.stopping;
  }

  private async run(): Promise<void> {
    const { clock } = this.options;
    while (!this.abort.signal.aborted) {
      let full = false;
      try {
        full = (await this.relayOnce()) >= this.batchSize;
        await this.purge();
      } catch (err) {
        this.log.warn({ err }, 'could not relay domain events; retrying');
      }
      if (!full) await clock.sleep(this.pollMs, this.abort.signal);
    }
  }

  /** One round: returns the number of events claimed. */
  async relayOnce(): Promise<number> {
    const { store, bus, clock } = this.options;
    const now = clock.now();
    const events = await store.outbox.claimDue(now, now + this.claimMs, this.batchSize);
    if (events.length === 0) return 0;
    const confirmed: string[] = [];
    await Promise.all(
      events.map(async (event) => {
        try {
          // The request that caused the event (a manual job's) travels as the envelope's req_id: the notifier's lines for it carry that reqId.
          await bus.publish(QUEUES.domainEvents, MESSAGE_TYPES.domainEvent, event, { ttlMs: DOMAIN_EVENT_TTL_MS, subject: event.user_id, reqId: eventRequestId(event) });
          confirmed.push(event.id);
        } catch (err) {
          this.log.warn({ err, eventId: event.id }, 'could not publish a domain event; it is retried when its claim lapses');
        }
      }),
    );
    const at = clock.now();
    await store.outbox.markPublished(confirmed, at, at + DOMAIN_EVENT_TTL_MS);
    this.published += confirmed.length;
    return events.length;
  }

  /** Forgets applied identities long after any copy of their event expired. */
  private async purge(): Promise<void> {
    const now = this.options.clock.now();
    if (now < this.nextPurgeAt) return;
    this.nextPurgeAt = now + DEDUPE_PURGE_EVERY_MS;
    const purged = await this.options.store.analytics.purgeApplied(now - Math.max(this.dedupeRetentionMs, 2 * DOMAIN_EVENT_TTL_MS));
    if (purged > 0) this.log.info({ purged }, 'forgot old applied event identities');
  }
}
