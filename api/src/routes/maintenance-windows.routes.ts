import type { Context } from 'koa';
import { decodeCursor, encodeCursor, isUuid, newId, notFound, OrlojError, toIso, validationError, type FieldError } from '@orloj/common/core';
import {
  cronProblem,
  currentOrNextSpan,
  snoozeProblem,
  spanAt,
  timeZoneProblem,
  WINDOWS_PER_USER_MAX,
  type MaintenanceWindow,
  type WindowTarget,
  type WindowTiming,
} from '@orloj/common/domain';
import type { Store, WindowDefinition } from '@orloj/common/store';
import type { ApiDeps } from '../deps.js';
import { json, type Wire } from '../contract/components.js';
import type { Operation } from '../contract/operation.js';
import { createWindowBody, updateWindowBody, windowPageSchema, windowSchema, workflowSnoozeSchema } from '../contract/maintenance-windows.js';
import { snoozeIncidentBody } from '../contract/incidents.js';
import { cursorParam, problem } from '../contract/shared.js';
import { readJsonBody } from '../http/body.js';
import { bodyValidator, QueryReader, requireUuidParam } from '../http/validate.js';

/**
 * Maintenance windows and a workflow's snooze (issue 25,
 * docs/adr/0019-maintenance-windows.md). Scoped to the signed-in user: another
 * user's window or workflow is 404. A snooze is kept as a one-off mute window
 * of its workflow, so the scheduler and the lifecycle judge both alike.
 */

type Body = Wire<typeof createWindowBody>;
const LIST = 'maintenance-windows';
const PAGE_SIZE = 20;
/** A one-off window lasts at most this long. */
const ONE_OFF_MAX_MS = 366 * 24 * 3_600_000;
const limitParam = { name: 'limit', in: 'query', schema: { type: 'integer', minimum: 1, maximum: 100, default: PAGE_SIZE } } as const;
const readCreate = bodyValidator<Body>(createWindowBody);
const readUpdate = bodyValidator<Partial<Body>>(updateWindowBody);
const readSnooze = bodyValidator<Wire<typeof snoozeIncidentBody>>(snoozeIncidentBody);

const userIdOf = (ctx: Context) => ctx.state.session.userId as string;
const windowId = (ctx: Context) => requireUuidParam('window_id', ctx.params.window_id, isUuid);
const workflowId = (ctx: Context) => requireUuidParam('workflow_id', ctx.params.workflow_id, isUuid);

export function presentWindow(w: MaintenanceWindow, now: number): Wire<typeof windowSchema> {
  const next = currentOrNextSpan(w, now);
  return {
    id: w.id,
    name: w.name,
    mode: w.mode,
    ...(w.workflowId !== undefined ? { workflow_id: w.workflowId } : { workflow_query: w.workflowQuery }),
    ...(w.cron === undefined
      ? { starts_at: toIso(w.startsAt), ends_at: toIso(w.endsAt) }
      : { cron: w.cron, timezone: w.timeZone, duration_minutes: w.durationMinutes }),
    active: spanAt(w, now) !== undefined,
    ...(next ? { next_starts_at: toIso(next.start), next_ends_at: toIso(next.end) } : {}),
    created_at: toIso(w.createdAt),
    updated_at: toIso(w.updatedAt),
  };
}

/** The window a body describes, or 400 naming each field at fault; `workflow_id` must be one of the user's workflows. */
async function definitionOf(store: Store, userId: string, b: Body): Promise<WindowDefinition> {
  const errors: FieldError[] = [];
  const fail = (field: string, message: string) => errors.push({ field, message });
  const name = b.name.trim();
  if (name === '') fail('name', 'must not be blank');
  let target: WindowTarget | undefined;
  if ((b.workflow_id === undefined) === (b.workflow_query === undefined)) fail('workflow_id', 'give exactly one of workflow_id and workflow_query');
  else if (b.workflow_id !== undefined) {
    if (await store.workflows.findForUser(userId, b.workflow_id)) target = { workflowId: b.workflow_id };
    else fail('workflow_id', 'is not a workflow of yours');
  } else if (b.workflow_query!.trim() === '') fail('workflow_query', 'must not be blank');
  else target = { workflowQuery: b.workflow_query!.trim() };
  const timing = timingOf(b, fail);
  if (errors.length > 0 || !target || !timing) throw validationError(errors);
  return { name, mode: b.mode, ...target, ...timing };
}

function timingOf(b: Body, fail: (field: string, message: string) => void): WindowTiming | undefined {
  const oneOff = b.starts_at !== undefined || b.ends_at !== undefined;
  const recurring = b.cron !== undefined || b.timezone !== undefined || b.duration_minutes !== undefined;
  if (oneOff === recurring) {
    fail(oneOff ? 'cron' : 'starts_at', 'give either starts_at and ends_at (one-off) or cron and duration_minutes (recurring)');
    return undefined;
  }
  if (recurring) {
    const cron = b.cron === undefined ? 'is required with duration_minutes' : cronProblem(b.cron);
    const timeZone = b.timezone ?? 'UTC';
    const zone = timeZoneProblem(timeZone);
    if (cron !== undefined) fail('cron', cron);
    if (zone !== undefined) fail('timezone', zone);
    if (b.duration_minutes === undefined) fail('duration_minutes', 'is required with cron');
    return cron === undefined && zone === undefined && b.duration_minutes !== undefined ? { cron: b.cron!.trim(), timeZone, durationMinutes: b.duration_minutes } : undefined;
  }
  const startsAt = b.starts_at === undefined ? NaN : Date.parse(b.starts_at);
  const endsAt = b.ends_at === undefined ? NaN : Date.parse(b.ends_at);
  if (Number.isNaN(startsAt)) fail('starts_at', 'must be an RFC 3339 date-time');
  if (Number.isNaN(endsAt)) fail('ends_at', 'must be an RFC 3339 date-time');
  else if (endsAt <= startsAt) fail('ends_at', 'must be after starts_at');
  else if (endsAt - startsAt > ONE_OFF_MAX_MS) fail('ends_at', 'must be at most a year after starts_at');
  return Number.isNaN(startsAt) || Number.isNaN(endsAt) || endsAt <= startsAt || endsAt - startsAt > ONE_OFF_MAX_MS ? undefined : { startsAt, endsAt };
}

/** The wire fields of a stored window, for a PATCH to be laid over. */
function bodyOf(w: MaintenanceWindow): Body {
  const { created_at: _c, updated_at: _u, id: _i, active: _a, next_starts_at: _s, next_ends_at: _e, ...body } = presentWindow(w, 0);
  return body;
}

/** A PATCH over the stored body: a target or a timing given replaces the other kind. */
function patched(stored: Body, patch: Partial<Body>): Body {
  const merged: Partial<Body> = { ...stored };
  if (patch.workflow_id !== undefined) delete merged.workflow_query;
  if (patch.workflow_query !== undefined) delete merged.workflow_id;
  if (patch.starts_at !== undefined || patch.ends_at !== undefined) for (const k of ['cron', 'timezone', 'duration_minutes'] as const) delete merged[k];
  if (patch.cron !== undefined || patch.timezone !== undefined || patch.duration_minutes !== undefined) for (const k of ['starts_at', 'ends_at'] as const) delete merged[k];
  return { ...merged, ...patch } as Body;
}

async function list({ store, clock }: ApiDeps, ctx: Context): Promise<void> {
  const q = new QueryReader(ctx.query);
  const cursor = q.text(cursorParam);
  const limit = q.integer(limitParam);
  q.done();
  const after = decodeCursor(LIST, cursor);
  const rows = await store.maintenanceWindows.list(userIdOf(ctx), limit + 1, after);
  const shown = rows.slice(0, limit);
  const last = shown[shown.length - 1];
  const now = clock.now();
  ctx.body = {
    windows: shown.map((w) => presentWindow(w, now)),
    cursor: rows.length > limit && last ? encodeCursor(LIST, { k: last.createdAt, id: last.id }) : '',
  } satisfies Wire<typeof windowPageSchema>;
}

async function create({ store, clock }: ApiDeps, ctx: Context): Promise<void> {
  const body = readCreate(await readJsonBody(ctx));
  const userId = userIdOf(ctx);
  const now = clock.now();
  const created = await store.transaction(async (tx) => {
    await tx.users.lock(userId); // the bound holds under concurrent creates
    if ((await tx.maintenanceWindows.count(userId)) >= WINDOWS_PER_USER_MAX) {
      throw new OrlojError('window_limit_reached', `You already have ${WINDOWS_PER_USER_MAX} maintenance windows; delete one first.`);
    }
    return tx.maintenanceWindows.insert(newId(), userId, await definitionOf(tx, userId, body), now);
  });
  ctx.status = 201;
  ctx.set('Location', `/maintenance-windows/${created.id}`);
  ctx.body = presentWindow(created, now);
}

async function show({ store, clock }: ApiDeps, ctx: Context): Promise<void> {
  const w = await store.maintenanceWindows.findForUser(userIdOf(ctx), windowId(ctx));
  if (!w || w.snooze) throw notFound('The maintenance window');
  ctx.body = presentWindow(w, clock.now());
}

async function update({ store, clock }: ApiDeps, ctx: Context): Promise<void> {
  const id = windowId(ctx);
  const patch = readUpdate(await readJsonBody(ctx));
  const userId = userIdOf(ctx);
  const now = clock.now();
  const updated = await store.transaction(async (tx) => {
    const stored = await tx.maintenanceWindows.findForUser(userId, id);
    if (!stored || stored.snooze) throw notFound('The maintenance window');
    return tx.maintenanceWindows.update(userId, id, await definitionOf(tx, userId, patched(bodyOf(stored), patch)), now);
  });
  if (!updated) throw notFound('The maintenance window');
  ctx.body = presentWindow(updated, now);
}

async function remove({ store }: ApiDeps, ctx: Context): Promise<void> {
  if (!(await store.maintenanceWindows.delete(userIdOf(ctx), windowId(ctx)))) throw notFound('The maintenance window');
  ctx.status = 204;
}

function presentSnooze(id: string, w: MaintenanceWindow | undefined, now: number): Wire<typeof workflowSnoozeSchema> {
  const until = w && w.cron === undefined ? w.endsAt : undefined;
  return { workflow_id: id, snoozed: until !== undefined && until > now, ...(until !== undefined ? { snoozed_until: toIso(until) } : {}) };
}

async function ownWorkflow(store: Store, ctx: Context): Promise<string> {
  const id = workflowId(ctx);
  if (!(await store.workflows.findForUser(userIdOf(ctx), id))) throw notFound('The workflow');
  return id;
}

async function showSnooze({ store, clock }: ApiDeps, ctx: Context): Promise<void> {
  const id = await ownWorkflow(store, ctx);
  ctx.body = presentSnooze(id, await store.maintenanceWindows.snoozeOf(id), clock.now());
}

async function snooze({ store, clock }: ApiDeps, ctx: Context): Promise<void> {
  const id = workflowId(ctx);
  const body = readSnooze(await readJsonBody(ctx));
  const until = Date.parse(body.until);
  const now = clock.now();
  const problem = snoozeProblem(until, now);
  if (problem !== undefined) throw validationError([{ field: 'until', message: problem }]);
  const userId = userIdOf(ctx);
  const window = await store.transaction(async (tx) => {
    if (!(await tx.workflows.findForUser(userId, id))) throw notFound('The workflow');
    return tx.maintenanceWindows.snooze(newId(), userId, id, until, now);
  });
  ctx.body = presentSnooze(id, window, now);
}

async function unsnooze({ store }: ApiDeps, ctx: Context): Promise<void> {
  await store.maintenanceWindows.unsnooze(await ownWorkflow(store, ctx));
  ctx.status = 204;
}

const notYours = problem('No such maintenance window of yours.');
const noWorkflow = problem('No such workflow of yours.');
const badWindow = problem('A field is missing, malformed or inconsistent; `errors` names each.');

export const maintenanceWindowsOperations: readonly Operation[] = [
  {
    method: 'get',
    path: '/maintenance-windows',
    summary: 'List your maintenance windows, newest first',
    description: 'An addition to the contract (issue 25). Cursor-paged (created_at, then id). Snoozes are not listed here (GET /workflows/{workflow_id}/snooze).',
    access: 'session',
    parameters: [cursorParam, limitParam],
    responses: { '200': { description: 'A page.', content: json(windowPageSchema) } },
    handler: list,
  },
  {
    method: 'post',
    path: '/maintenance-windows',
    summary: 'Create a maintenance window',
    description: `An addition to the contract (issue 25). One-off (starts_at, ends_at) or recurring (cron, timezone, duration_minutes), over one workflow (workflow_id) or those whose name contains workflow_query. At most ${WINDOWS_PER_USER_MAX} a user (409 \`window_limit_reached\` beyond).`,
    access: 'session',
    body: { schema: createWindowBody, required: true },
    responses: {
      '201': { description: 'The window.', headers: { Location: { description: 'Its URL.', schema: { type: 'string' } } }, content: json(windowSchema) },
      '400': badWindow,
      '409': problem(`You already have ${WINDOWS_PER_USER_MAX} windows (code window_limit_reached).`),
    },
    handler: create,
  },
  {
    method: 'get',
    path: '/maintenance-windows/{window_id}',
    summary: 'A maintenance window',
    access: 'session',
    responses: { '200': { description: 'The window.', content: json(windowSchema) }, '404': notYours },
    handler: show,
  },
  {
    method: 'patch',
    path: '/maintenance-windows/{window_id}',
    summary: 'Change a maintenance window',
    description: 'Any fields of the create body; the result is checked as a whole (400 naming each field at fault).',
    access: 'session',
    body: { schema: updateWindowBody, required: true },
    responses: { '200': { description: 'The window.', content: json(windowSchema) }, '400': badWindow, '404': notYours },
    handler: update,
  },
  {
    method: 'delete',
    path: '/maintenance-windows/{window_id}',
    summary: 'Delete a maintenance window',
    description: 'Its slots already skipped read skipped, not_run from then on.',
    access: 'session',
    responses: { '204': { description: 'Deleted.' }, '404': notYours },
    handler: remove,
  },
  {
    method: 'get',
    path: '/workflows/{workflow_id}/snooze',
    summary: "A workflow's snooze",
    access: 'session',
    responses: { '200': { description: 'The snooze.', content: json(workflowSnoozeSchema) }, '404': noWorkflow },
    handler: showSnooze,
  },
  {
    method: 'post',
    path: '/workflows/{workflow_id}/snooze',
    summary: "Snooze a workflow's alerts until a time",
    description:
      'An addition to the contract (issue 25). Until `until` its failures turn nothing down, open no incident and notify nobody; its runs go on. The same body and bounds as POST /incidents/{incident_id}/snooze (in the future, at most 30 days ahead; 400 naming `until`); a later snooze replaces an earlier one.',
    access: 'session',
    body: { schema: snoozeIncidentBody, required: true },
    responses: { '200': { description: 'The snooze.', content: json(workflowSnoozeSchema) }, '400': problem('`until` is missing, malformed, past or too far ahead.'), '404': noWorkflow },
    handler: snooze,
  },
  {
    method: 'delete',
    path: '/workflows/{workflow_id}/snooze',
    summary: "End a workflow's snooze",
    description: 'Its alerts are heard again at once. Harmless when it is not snoozed.',
    access: 'session',
    responses: { '204': { description: 'Not snoozed (any more).' }, '404': noWorkflow },
    handler: unsnooze,
  },
];
