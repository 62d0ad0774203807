import type { Kysely } from 'kysely';
import type { Database } from '../schema.js';
import { slot, type ReadRunner } from '../compiled-read.js';
import type { DomainEvent, DomainEventKind } from '../../domain/events.js';

/**
 * The domain-event outbox (docs/notifications.md). Writers add events inside
 * the transaction of their change; relays claim due rows, publish them and
 * mark them published; the notifier deletes a row once it applied the event.
 */
export class OutboxRepo {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly runner: ReadRunner,
  ) {}

  /** Adds the event, due for publishing now. The same event added twice is one row. */
  async add(event: DomainEvent): Promise<void> {
    await this.runner.execute(this.addStatement(), outboxArgs(event));
  }

  /** Compiled once: every job's end adds an event. */
  private addStatement() {
    return this.runner.reads.get('outbox.add', (db) =>
      db
        .insertInto('domain_events')
        .values({
          id: slot<string>('id'),
          kind: slot<DomainEventKind>('kind'),
          user_id: slot<string>('userId'),
          workflow_id: slot<string>('workflowId'),
          data: slot<string>('data'),
          occurred_at: slot<number>('occurredAt'),
          next_attempt_at: slot<number>('occurredAt'),
          published_at: null,
        })
        .onConflict((oc) => oc.column('id').doNothing()),
    );
  }

  /** add() for many events: one statement per 500 (on SQLite, inside a transaction, add()'s statement for each). */
  async addMany(events: readonly DomainEvent[]): Promise<void> {
    if (events.length === 0 || this.runner.eachRow(this.addStatement(), events, outboxArgs)) return;
    for (let i = 0; i < events.length; i += 500) {
      const rows = events.slice(i, i + 500).map((event) => ({
        id: event.id,
        kind: event.kind,
        user_id: event.user_id,
        workflow_id: event.workflow_id,
        data: JSON.stringify(event.data),
        occurred_at: event.occurred_at,
        next_attempt_at: event.occurred_at,
        published_at: null,
      }));
      await this.db.insertInto('domain_events').values(rows).onConflict((oc) => oc.column('id').doNothing()).execute();
    }
  }

  /**
   * Claims up to `limit` due events for one relay until `claimUntil`: other
   * relays skip them meanwhile. The conditional UPDATE is the claim, so two
   * relays never both claim a row (PostgreSQL re-checks the condition on a row
   * another transaction just updated; SQLite has one writer).
   */
  async claimDue(now: number, claimUntil: number, limit: number): Promise<DomainEvent[]> {
    const rows = await this.db
      .updateTable('domain_events')
      .set({ next_attempt_at: claimUntil })
      .where('id', 'in', (eb) =>
        eb.selectFrom('domain_events').select('id').where('next_attempt_at', '<=', now).orderBy('next_attempt_at').orderBy('id').limit(limit),
      )
      .where('next_attempt_at', '<=', now)
      .returningAll()
      .execute();
    return rows
      // Rows this repo wrote from a typed DomainEvent: kind and data belong together.
      .map((r) => ({
        id: r.id,
        kind: r.kind as DomainEventKind,
        user_id: r.user_id,
        workflow_id: r.workflow_id,
        occurred_at: r.occurred_at,
        data: JSON.parse(r.data) as DomainEvent['data'],
      }) as DomainEvent)
      .sort((a, b) => a.occurred_at - b.occurred_at || (a.id < b.id ? -1 : 1));
  }

  /** The bus confirmed these events; publish them again at `republishAt` should they still be unapplied then. */
  async markPublished(ids: readonly string[], now: number, republishAt: number): Promise<void> {
    if (ids.length === 0) return;
    await this.db.updateTable('domain_events').set({ published_at: now, next_attempt_at: republishAt }).where('id', 'in', ids).execute();
  }

  /** The notifier applied these events: nothing more to publish. */
  async removeMany(ids: readonly string[]): Promise<void> {
    if (ids.length === 0) return;
    const one = this.runner.reads.get('outbox.remove', (db) => db.deleteFrom('domain_events').where('id', '=', slot<string>('id')));
    if (this.runner.eachRow(one, ids, (id) => ({ id }))) return;
    for (let i = 0; i < ids.length; i += 500) await this.db.deleteFrom('domain_events').where('id', 'in', ids.slice(i, i + 500)).execute();
  }

  /** Events not applied yet. */
  async pending(): Promise<number> {
    const row = await this.db.selectFrom('domain_events').select((eb) => eb.fn.countAll<number | string>().as('n')).executeTakeFirstOrThrow();
    return Number(row.n);
  }
}

function outboxArgs(event: DomainEvent): Record<string, unknown> {
  return { id: event.id, kind: event.kind, userId: event.user_id, workflowId: event.workflow_id, data: JSON.stringify(event.data), occurredAt: event.occurred_at };
}
