import type { Context } from 'koa';
import { decodeCursor, encodeCursor, isUuid, notFound, OrlojError, toIso, validationError } from '@orloj/common/core';
import type { Incident } from '@orloj/common/store';
import type { ApiDeps } from '../deps.js';
import { json, type Wire } from '../contract/components.js';
import type { Operation } from '../contract/operation.js';
import { snoozeProblem } from '@orloj/common/domain';
import { incidentPageSchema, incidentSchema, snoozeIncidentBody } from '../contract/incidents.js';
import { cursorParam, problem } from '../contract/shared.js';
import { readJsonBody } from '../http/body.js';
import { bodyValidator, QueryReader, requireUuidParam } from '../http/validate.js';

/**
 * Incidents (issue 26): each down period of a workflow by its alert policy,
 * opened and closed by the lifecycle (common/src/store/lifecycle.ts). Scoped
 * to the signed-in user: another user's incident or workflow is 404.
 */

const LIST = 'incidents';
const PAGE_SIZE = 20;
const limitParam = { name: 'limit', in: 'query', schema: { type: 'integer', minimum: 1, maximum: 100, default: PAGE_SIZE } } as const;
const statusParam = { name: 'status', in: 'query', description: 'open or closed; both when absent.', schema: { enum: ['open', 'closed'] } } as const;
const workflowParam = { name: 'workflow_id', in: 'query', description: "Only this workflow's incidents.", schema: { type: 'string', format: 'uuid' } } as const;
const readSnooze = bodyValidator<Wire<typeof snoozeIncidentBody>>(snoozeIncidentBody);

const userIdOf = (ctx: Context) => ctx.state.session.userId as string;
const incidentId = (ctx: Context) => requireUuidParam('incident_id', ctx.params.incident_id, isUuid);

export function presentIncident(i: Incident, now: number): Wire<typeof incidentSchema> {
  return {
    id: i.id,
    workflow_id: i.workflowId,
    workflow_name: i.workflowName,
    status: i.closedAt === null ? 'open' : 'closed',
    started_at: toIso(i.startedAt),
    opened_at: toIso(i.openedAt),
    ...(i.closedAt !== null ? { closed_at: toIso(i.closedAt) } : {}),
    ...(i.resolution !== null ? { resolution: i.resolution } : {}),
    duration_ms: Math.max(0, (i.closedAt ?? now) - i.startedAt),
    failed_runs: i.failedRuns,
    first_failure: {
      job_id: i.firstFailureJobId,
      ...(i.firstFailureCode !== null ? { reason_code: i.firstFailureCode } : {}),
      ...(i.firstFailureMessage !== null ? { reason_message: i.firstFailureMessage } : {}),
    },
    ...(i.acknowledgedBy !== null ? { acknowledged_by: i.acknowledgedBy } : {}),
    ...(i.acknowledgedAt !== null ? { acknowledged_at: toIso(i.acknowledgedAt) } : {}),
    ...(i.snoozedUntil !== null ? { snoozed_until: toIso(i.snoozedUntil) } : {}),
    snoozed: i.snoozedUntil !== null && i.snoozedUntil > now,
  };
}

async function page({ store, clock }: ApiDeps, ctx: Context, workflowId: string | undefined, q: QueryReader): Promise<void> {
  const cursor = q.text(cursorParam);
  const status = q.enumOf('status', ['open', 'closed'] as const);
  const limit = q.integer(limitParam);
  q.done();
  const after = decodeCursor(LIST, cursor);
  const userId = userIdOf(ctx);
  if (workflowId !== undefined && !(await store.workflows.findForUser(userId, workflowId))) throw notFound('The workflow');
  const rows = await store.incidents.list({ userId, workflowId, open: status === undefined ? undefined : status === 'open', after, limit: limit + 1 });
  const shown = rows.slice(0, limit);
  const last = shown[shown.length - 1];
  const now = clock.now();
  ctx.body = {
    incidents: shown.map((i) => presentIncident(i, now)),
    cursor: rows.length > limit && last ? encodeCursor(LIST, { k: last.startedAt, id: last.id }) : '',
  } satisfies Wire<typeof incidentPageSchema>;
}

async function list(deps: ApiDeps, ctx: Context): Promise<void> {
  const q = new QueryReader(ctx.query);
  const workflowId = q.string(workflowParam.name, 64);
  if (workflowId !== undefined && !isUuid(workflowId)) q.fail('workflow_id', 'must be a UUID');
  await page(deps, ctx, workflowId, q);
}

async function listForWorkflow(deps: ApiDeps, ctx: Context): Promise<void> {
  const workflowId = requireUuidParam('workflow_id', ctx.params.workflow_id, isUuid);
  await page(deps, ctx, workflowId, new QueryReader(ctx.query));
}

async function acknowledge({ store, clock }: ApiDeps, ctx: Context): Promise<void> {
  const id = incidentId(ctx);
  const userId = userIdOf(ctx);
  const user = await store.users.findById(userId);
  if (!user) throw new OrlojError('unauthenticated', 'The account no longer exists.');
  const now = clock.now();
  const incident = await store.transaction((tx) => tx.incidents.acknowledge(userId, id, user.email, now));
  if (!incident) throw notFound('The incident');
  ctx.body = presentIncident(incident, now);
}

async function snooze({ store, clock }: ApiDeps, ctx: Context): Promise<void> {
  const id = incidentId(ctx);
  const body = readSnooze(await readJsonBody(ctx));
  const until = Date.parse(body.until);
  const now = clock.now();
  const problem = snoozeProblem(until, now);
  if (problem !== undefined) throw validationError([{ field: 'until', message: problem }]);
  const incident = await store.transaction((tx) => tx.incidents.snooze(userIdOf(ctx), id, until, now));
  if (!incident) throw notFound('The incident');
  ctx.body = presentIncident(incident, now);
}

const listParams = [cursorParam, statusParam, limitParam] as const;
const notYours = problem('No such incident of yours.');

export const incidentsOperations: readonly Operation[] = [
  {
    method: 'get',
    path: '/incidents',
    summary: 'List your incidents, newest first (started_at, then id)',
    description: "An addition to the contract (issue 26): each down period of a workflow by its alert policy (alert_after_failures, recover_after_successes). Cursor-paged; filter by status and workflow. A deleted workflow's incidents go with it.",
    access: 'session',
    parameters: [...listParams, workflowParam],
    responses: { '200': { description: 'A page.', content: json(incidentPageSchema) } },
    handler: list,
  },
  {
    method: 'get',
    path: '/workflows/{workflow_id}/incidents',
    summary: "List a workflow's incidents, newest first",
    description: 'An addition to the contract (issue 26). The same page as GET /incidents?workflow_id=…, but 404 for a workflow that is not yours.',
    access: 'session',
    parameters: listParams,
    responses: { '200': { description: 'A page.', content: json(incidentPageSchema) }, '404': problem('No such workflow of yours.') },
    handler: listForWorkflow,
  },
  {
    method: 'post',
    path: '/incidents/{incident_id}/acknowledge',
    summary: 'Acknowledge an incident',
    description: 'An addition to the contract (issue 26). Records who (your email) and when; acknowledging again keeps the first. No body.',
    access: 'session',
    responses: { '200': { description: 'The incident.', content: json(incidentSchema) }, '404': notYours },
    handler: acknowledge,
  },
  {
    method: 'post',
    path: '/incidents/{incident_id}/snooze',
    summary: 'Snooze an incident until a time',
    description: 'An addition to the contract (issue 26). `until` must be in the future and at most 30 days ahead (400 naming `until` otherwise); a later snooze replaces an earlier one.',
    access: 'session',
    body: { schema: snoozeIncidentBody, required: true },
    responses: { '200': { description: 'The incident.', content: json(incidentSchema) }, '400': problem('`until` is missing, malformed, past or too far ahead.'), '404': notYours },
    handler: snooze,
  },
];
