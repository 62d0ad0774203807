import { DOMAIN_EVENT_KINDS, type DomainEvent } from '../domain/events.js';
import { WORKFLOW_KINDS } from '../domain/workflow.js';
import { isUuid } from '../core/ids.js';
import { decoded, unusable, type Decoded } from './table.js';
import { isRecord } from './read.js';

/** notifier's outbox relay → notifier consumers: a domain event (common/src/domain/events.ts), at least once. */

/**
 * Validity of a domain.event envelope: the longest a verifier accepts (1 h).
 * The relay publishes an event again once its envelope expired unapplied.
 */
export const DOMAIN_EVENT_TTL_MS = 60 * 60_000;

const KINDS = new Set<string>(DOMAIN_EVENT_KINDS);
const KIND_NAMES = new Set<string>(WORKFLOW_KINDS);
const optionalTime = (v: unknown) => v === undefined || Number.isSafeInteger(v);

/** Checks a domain.event body (the envelope proves who sent it, not its shape). */
export function decodeDomainEvent(body: unknown): Decoded<DomainEvent> {
  const read = readDomainEvent(body);
  return typeof read === 'string' ? unusable(read) : decoded(read);
}

function readDomainEvent(body: unknown): DomainEvent | string {
  if (!isRecord(body)) return 'the body is not an object';
  const { id, kind, user_id, workflow_id, occurred_at, data } = body;
  if (typeof id !== 'string' || id.length === 0 || id.length > 300) return 'id must be a string of 1-300 characters';
  if (typeof kind !== 'string' || !KINDS.has(kind) || !id.startsWith(`${kind}:`)) return 'kind must be a domain event kind that prefixes the id';
  if (!isUuid(user_id) || !isUuid(workflow_id)) return 'user_id and workflow_id must be UUIDs';
  if (!Number.isSafeInteger(occurred_at)) return 'occurred_at must be an integer';
  if (!isRecord(data) || typeof data.workflow_name !== 'string' || !KIND_NAMES.has(data.workflow_kind as string)) {
    return 'data must hold workflow_name and workflow_kind';
  }
  if (kind.startsWith('job.') && (!isUuid(data.job_id) || !optionalTime(data.started_at) || !optionalTime(data.completed_at) || !optionalTime(data.scheduled_at))) {
    return 'a job event needs data.job_id and integer times';
  }
  return body as unknown as DomainEvent;
}

