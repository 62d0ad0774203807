import type { Context } from 'koa';
import { decodeCursor, encodeCursor, isUuid, notFound, OrlojError, validationError, type FieldError } from '@orloj/common/core';
import {
  ATTENTION_STATES,
  attentionOf,
  attentionRank,
  BUILD_STATUSES,
  containerLimitErrors,
  jitterOffsetMs as jitterOffsetMsOf,
  newWorkflow,
  scheduleOf,
  parsePayload,
  WORKFLOW_KINDS,
  type Workflow,
  type WorkflowHealth,
  type WorkflowKind,
} from '@orloj/common/domain';
import type { ContainerLimits } from '@orloj/common/config';
import { cancelOutdatedJobs, createWorkflow, deleteWorkflow, readHealth, terminateWorkflow, type ActiveSession, type Store } from '@orloj/common/store';
import { nudgeScheduler, type ApiDeps } from '../deps.js';
import { json, type Wire } from '../contract/components.js';
import type { Operation } from '../contract/operation.js';
import { createWorkflowBody, updateWorkflowBody, type CreateWorkflowBody, type UpdateWorkflowBody } from '../contract/requests.js';
import { attentionSummarySchema, createdSchema, workflowPageSchema, workflowSchema } from '../contract/responses.js';
import { cursorParam, idempotencyKey, INT32_MAX, problem, replayed } from '../contract/shared.js';
import { readJsonBody } from '../http/body.js';
import { readIdempotencyKey } from '../http/idempotency.js';
import { presentHealth, presentWorkflow } from '../http/present.js';
import { holdHeavyPlace } from '../http/heavy-requests.js';
import { bodyValidator, QueryReader, requireUuidParam } from '../http/validate.js';
import { readSchedule, type ScheduleChoice } from './schedules.routes.js';

const readCreate = bodyValidator<CreateWorkflowBody>(createWorkflowBody);
const readUpdate = bodyValidator<UpdateWorkflowBody>(updateWorkflowBody);

export const WORKFLOW_PAGE_SIZE = 20;
/**
 * The most payload text (UTF-8) one page of `GET /workflows` carries: a page
 * ends before the workflow that would pass it (its first workflow always
 * comes), with a cursor to the rest, so a page stays a few MiB whatever the
 * payloads (docs/api.md, "Listing").
 */
export const WORKFLOW_PAGE_MAX_PAYLOAD_BYTES = 4 * 1024 * 1024;
/** `include=health` adds each workflow's monitoring state (docs/api.md, "Checks and health"). */
const INCLUDES = ['health'] as const;
const includeParam = {
  name: 'include',
  in: 'query',
  description: 'health: each workflow carries its `health` (state, recent runs, uptime), read fresh.',
  schema: { enum: [...INCLUDES] },
} as const;
const intervalMinParam = { name: 'interval_min', in: 'query', schema: { type: 'integer', minimum: 0, maximum: INT32_MAX } } as const;
const intervalMaxParam = { name: 'interval_max', in: 'query', schema: { type: 'integer', minimum: 0, maximum: INT32_MAX } } as const;
const limitParam = { name: 'limit', in: 'query', schema: { type: 'integer', minimum: 1, maximum: 100, default: WORKFLOW_PAGE_SIZE } } as const;
const SORTS = ['newest', 'attention'] as const;
const sortParam = {
  name: 'sort',
  in: 'query',
  description:
    'newest (default): newest first. attention: down first, then degraded, building, healthy, terminated (docs/api.md, "Attention"), newest first within each; the cursor keeps the order.',
  schema: { enum: [...SORTS], default: 'newest' },
} as const;
const attentionParam = {
  name: 'attention',
  in: 'query',
  description: 'Only workflows in this attention state (counts: GET /workflow-summary).',
  schema: { enum: [...ATTENTION_STATES] },
} as const;
/**
 * A `sort=attention` cursor's position in the one number a cursor carries:
 * the attention rank above the creation time (epoch ms stay below 10^14 until
 * the year 5138), so a cursor of one order is refused by the other (its list name).
 */
const RANK_SPAN = 1e14;
const nameQueryParam = { name: 'query', in: 'query', description: 'Case-insensitive literal substring of the name.', schema: { type: 'string', maxLength: 200 } } as const;

function withHealth<T extends object>(body: T, health: WorkflowHealth | undefined): T & { health?: ReturnType<typeof presentHealth> } {
  return health ? { ...body, health: presentHealth(health) } : body;
}

/**
 * Validates the payload for the kind, the operator's container limits (registry,
 * network, resources) and the log_retention rule; throws 400 naming each field.
 */
function checkPayloadAndRetention(kind: WorkflowKind, payload: string, logRetention: boolean | undefined, limits: ContainerLimits, scheduleErrors: readonly FieldError[] = []) {
  const errors: FieldError[] = [...scheduleErrors];
  const parsed = parsePayload(kind, payload);
  if (!parsed.ok) errors.push(...parsed.errors);
  else if (parsed.value.kind === 'CONTAINER') errors.push(...containerLimitErrors(parsed.value.payload, limits));
  if (kind === 'HEARTBEAT' && logRetention === true) {
    errors.push({ field: 'log_retention', message: 'is not supported for HEARTBEAT workflows' });
  }
  if (errors.length) throw validationError(errors);
  return parsed.ok ? parsed.value : undefined;
}

function imageOf(w: Workflow): string | undefined {
  const parsed = parsePayload(w.kind, w.payload);
  return parsed.ok && parsed.value.kind === 'CONTAINER' ? parsed.value.payload.image : undefined;
}

/**
 * The create body, every bad field reported in one pass: when the body's own
 * fields are refused, the payload's fields are checked too (if its kind and
 * payload text are usable), so a form learns of all its mistakes at once.
 */
function readCreateWithPayload(raw: unknown, limits: ContainerLimits): CreateWorkflowBody {
  try {
    return readCreate(raw);
  } catch (thrown) {
    if (!(thrown instanceof OrlojError) || thrown.code !== 'validation_failed' || !thrown.fields || typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw thrown;
    const { kind, payload, log_retention: logRetention, interval, cron } = raw as Record<string, unknown>;
    // interval is required unless cron is set (readSchedule): named with the schema's findings
    const err = interval === undefined && typeof cron !== 'string' ? validationError([...thrown.fields, { field: 'interval', message: 'is required unless cron is set' }]) : thrown;
    if (!err.fields) throw err;
    if (typeof payload !== 'string' || !(WORKFLOW_KINDS as readonly unknown[]).includes(kind) || err.fields.some((f) => f.field === 'payload')) throw err;
    let more: readonly FieldError[] = [];
    try {
      checkPayloadAndRetention(kind as WorkflowKind, payload, typeof logRetention === 'boolean' ? logRetention : undefined, limits);
    } catch (payloadErr) {
      if (payloadErr instanceof OrlojError && payloadErr.fields) more = payloadErr.fields;
    }
    if (more.length === 0) throw err;
    throw validationError([...err.fields, ...more.filter((f) => !err.fields!.some((e) => e.field === f.field))]);
  }
}

const workflowId = (ctx: Context) => requireUuidParam('workflow_id', ctx.params.workflow_id, isUuid);
const userIdOf = (ctx: Context) => ctx.state.session.userId as string;

async function handleCreate(deps: ApiDeps, ctx: Context): Promise<void> {
  const { clock, idempotency } = deps;
  const key = readIdempotencyKey(ctx);
  const body = readCreateWithPayload(await readJsonBody(ctx), deps.config.containers);
  const { choice, errors } = readSchedule(body, undefined, clock.now());
  checkPayloadAndRetention(body.kind, body.payload, body.log_retention, deps.config.containers, errors);
  const schedule = choice!;
  const userId = userIdOf(ctx);
  await idempotency.run(ctx, userId, key, { scope: 'POST /workflows', body }, async (tx) => {
    // Under the user's row lock, so two concurrent creates cannot both take the last place.
    await tx.users.lock(userId);
    const max = deps.config.tenants.maxWorkflowsPerUser;
    if ((await tx.users.workflowCount(userId)) >= max) {
      throw new OrlojError(
        'workflow_limit_reached',
        `You already have ${max} workflows, the most this installation allows per user; delete terminated ones to make room.`,
      );
    }
    const workflow = newWorkflow(
      {
        userId,
        name: body.name,
        kind: body.kind,
        payload: body.payload,
        intervalMinutes: schedule.intervalMinutes,
        maxConsecutiveJobFailuresAllowed: body.max_consecutive_job_failures_allowed,
        logRetention: body.log_retention,
        // issue 26: the alert policy (default 1 each)
        alertAfterFailures: body.alert_after_failures,
        recoverAfterSuccesses: body.recover_after_successes,
        cron: schedule.cron,
        timeZone: schedule.timeZone,
        jitterSeconds: schedule.jitterSeconds,
        runPolicy: schedule,
      },
      clock.now(),
    );
    await createWorkflow(tx, workflow);
    return { status: 201, body: { id: workflow.id } };
  });
  nudgeScheduler(deps);
}

async function handleList(deps: ApiDeps, ctx: Context): Promise<void> {
  const { store, clock, listPages } = deps;
  const q = new QueryReader(ctx.query);
  const cursor = q.text(cursorParam);
  const query = q.text(nameQueryParam);
  const kind = q.enumOf('kind', WORKFLOW_KINDS);
  const buildStatus = q.enumOf('build_status', BUILD_STATUSES);
  const terminatedOnly = q.bool('terminated');
  const includeTerminated = q.bool('include_terminated') ?? false;
  const include = q.enumOf('include', INCLUDES);
  const intervalMin = q.integer(intervalMinParam);
  const intervalMax = q.integer(intervalMaxParam);
  const limit = q.integer(limitParam);
  const byAttention = q.enumOf(sortParam.name, SORTS) === 'attention';
  const attention = q.enumOf(attentionParam.name, ATTENTION_STATES);
  if (intervalMin && intervalMax && intervalMax < intervalMin) {
    q.fail('interval_max', 'must not be less than interval_min');
  }
  if (includeTerminated && terminatedOnly !== undefined) {
    q.fail('include_terminated', 'cannot be combined with terminated: include_terminated lists active and terminated workflows');
  }
  q.done();
  const terminated: boolean | 'all' = includeTerminated ? 'all' : (terminatedOnly ?? false);
  const list = byAttention ? 'workflows:attention' : 'workflows';
  const position = decodeCursor(list, cursor);
  const after = position && byAttention ? { k: position.k % RANK_SPAN, id: position.id, rank: Math.floor(position.k / RANK_SPAN) } : position;
  const userId = userIdOf(ctx);
  const filter = {
    userId,
    query: query || undefined,
    kind,
    buildStatus,
    terminated,
    intervalMin: intervalMin || undefined,
    intervalMax: intervalMax || undefined,
    attention,
    ...(byAttention ? { sort: 'attention' as const } : {}),
    limit,
  };
  // Read with the session, before the page: a page read later can only be newer than its label.
  const version = (ctx.state.session as ActiveSession).workflowListVersion;
  const key = JSON.stringify([filter, cursor ?? '']);
  ctx.type = 'application/json';
  // Health moves with every run and with time: such a page is read fresh, never kept.
  const cachedPage = () => (include === 'health' ? undefined : listPages.get(key, version));
  // A page in the cache is sent as it is (its memory is the cache's); one to read takes a heavy
  // place first, and may find the page rendered meanwhile by the request it waited behind.
  let cached = cachedPage();
  if (cached === undefined) {
    await holdHeavyPlace(deps.heavy, ctx);
    cached = cachedPage();
  }
  if (cached !== undefined) {
    ctx.body = cached;
    return;
  }
  const { workflows: page, more } = await store.workflows.page({ ...filter, after }, WORKFLOW_PAGE_MAX_PAYLOAD_BYTES);
  const last = page[page.length - 1];
  const health = include === 'health' ? await readHealth(store, page, clock.now()) : undefined;
  const json = JSON.stringify({
    workflows: page.map((w) => withHealth(presentWorkflow(w), health?.get(w.id))),
    cursor: more && last ? encodeCursor(list, { k: (byAttention ? attentionRank(attentionOf(last)) * RANK_SPAN : 0) + last.createdAt, id: last.id }) : '',
  } satisfies Wire<typeof workflowPageSchema>);
  if (!health) listPages.set(key, version, json);
  ctx.body = json;
}

/** Counts per attention state over all of the user's workflows, for the list's filters and the first screen. */
async function handleSummary(deps: ApiDeps, ctx: Context): Promise<void> {
  new QueryReader(ctx.query).done();
  const counts = await deps.store.workflows.attentionCounts(userIdOf(ctx));
  ctx.body = {
    attention: counts,
    total: Object.values(counts).reduce((a, b) => a + b, 0),
  } satisfies Wire<typeof attentionSummarySchema>;
}

async function handleGet(deps: ApiDeps, ctx: Context): Promise<void> {
  const { store, clock } = deps;
  const q = new QueryReader(ctx.query);
  const include = q.enumOf('include', INCLUDES);
  q.done();
  const workflow = await store.workflows.findForUser(userIdOf(ctx), workflowId(ctx));
  if (!workflow) throw notFound('The workflow');
  const health = include === 'health' ? (await readHealth(store, [workflow], clock.now())).get(workflow.id) : undefined;
  ctx.body = withHealth(
    presentWorkflow(workflow, {
      generation: workflow.generation,
      skipped: { count: workflow.skippedSlots, lastAt: workflow.lastSlotSkippedAt },
    }),
    health,
  );
}

async function handleUpdate(deps: ApiDeps, ctx: Context): Promise<void> {
  const { clock, idempotency } = deps;
  const id = workflowId(ctx);
  const key = readIdempotencyKey(ctx);
  const body = readUpdate(await readJsonBody(ctx));
  const userId = userIdOf(ctx);
  await idempotency.run(ctx, userId, key, { scope: `PUT /workflows/${id}`, body }, async (tx: Store) => {
    const current = await tx.workflows.findForUser(userId, id, { lock: true });
    if (!current) throw notFound('The workflow');
    const now = clock.now();
    const { choice, errors } = readSchedule(body, current, now);
    const parsed = checkPayloadAndRetention(current.kind, body.payload, body.log_retention, deps.config.containers, errors);
    const schedule: ScheduleChoice = choice!;
    const newImage = parsed?.kind === 'CONTAINER' ? parsed.payload.image : undefined;
    const rebuild =
      current.terminatedAt !== null ||
      current.buildStatus === 'FAILED' ||
      current.buildStatus === 'CANCELED' ||
      (current.kind === 'CONTAINER' && newImage !== imageOf(current));
    // A jitter kept keeps its offset (and the slots); a new one takes a new offset.
    const jitterOffsetMs = schedule.jitterSeconds === current.jitterSeconds ? current.jitterOffsetMs : jitterOffsetMsOf(id, schedule.jitterSeconds);
    await tx.workflows.update(
      userId,
      id,
      {
        name: body.name,
        payload: body.payload,
        intervalMinutes: schedule.intervalMinutes,
        maxConsecutiveJobFailuresAllowed: body.max_consecutive_job_failures_allowed,
        logRetention: current.kind === 'CONTAINER' ? (body.log_retention ?? current.logRetention) : false,
        rebuild,
        // the schedule stays anchored to the build; a new interval or cron takes effect from the next slot
        nextDueAt: scheduleOf({ ...current, ...schedule, jitterOffsetMs })?.firstSlotAfter(now) ?? null,
        // issue 26: the alert policy, kept when the body leaves it out
        alertAfterFailures: body.alert_after_failures,
        recoverAfterSuccesses: body.recover_after_successes,
        cron: schedule.cron,
        timeZone: schedule.timeZone,
        jitterSeconds: schedule.jitterSeconds,
        jitterOffsetMs,
        overlapPolicy: schedule.overlapPolicy,
        catchUpPolicy: schedule.catchUpPolicy,
        firstRun: schedule.firstRun,
      },
      now,
    );
    // Jobs not yet running belong to the old definition; a RUNNING job finishes as it started.
    await cancelOutdatedJobs(tx, current, now);
    return { status: 204 };
  });
  nudgeScheduler(deps);
}

async function handleTerminate(deps: ApiDeps, ctx: Context): Promise<void> {
  const { store, clock } = deps;
  const id = workflowId(ctx);
  const userId = userIdOf(ctx);
  await store.transaction(async (tx) => {
    if (await terminateWorkflow(tx, userId, id, clock.now())) return;
    if (!(await tx.workflows.findForUser(userId, id))) throw notFound('The workflow');
    throw new OrlojError('workflow_terminated', 'The workflow is already terminated.');
  });
  ctx.status = 204;
}

async function handleDelete(deps: ApiDeps, ctx: Context): Promise<void> {
  const { store, clock } = deps;
  const id = workflowId(ctx);
  const userId = userIdOf(ctx);
  await store.transaction(async (tx) => {
    const workflow = await tx.workflows.findForUser(userId, id, { lock: true });
    if (!workflow) throw notFound('The workflow');
    if (workflow.terminatedAt === null) {
      throw new OrlojError('workflow_active', 'Only a terminated workflow can be deleted: terminate it first (PATCH).');
    }
    if ((await tx.jobs.withStatus(id, ['RUNNING'])).length > 0) {
      throw new OrlojError('workflow_has_running_jobs', 'The workflow still has a running job; delete it once the job has stopped.');
    }
    await deleteWorkflow(tx, workflow, clock.now());
  });
  ctx.status = 204;
}

const notYours = problem('No such workflow of yours.');

export const workflowsOperations: readonly Operation[] = [
  {
    method: 'post',
    path: '/workflows',
    summary: 'Create a workflow',
    access: 'session',
    parameters: [idempotencyKey],
    body: { schema: createWorkflowBody, required: true },
    responses: {
      '201': { description: 'Created.', headers: replayed, content: json(createdSchema) },
      '409': problem('Idempotency-Key reused for a different request, or (code `workflow_limit_reached`) the user already owns MAX_WORKFLOWS_PER_USER workflows.'),
    },
    handler: handleCreate,
  },
  {
    method: 'get',
    path: '/workflows',
    summary: 'List workflows, newest first or most in need of attention first',
    access: 'session',
    parameters: [
      cursorParam,
      nameQueryParam,
      { name: 'kind', in: 'query', schema: { enum: [...WORKFLOW_KINDS] } },
      { name: 'build_status', in: 'query', schema: { enum: [...BUILD_STATUSES] } },
      { name: 'terminated', in: 'query', schema: { type: 'boolean', default: false } },
      {
        name: 'include_terminated',
        in: 'query',
        description: 'true: active and terminated workflows together; not combined with terminated.',
        schema: { type: 'boolean', default: false },
      },
      includeParam,
      intervalMinParam,
      intervalMaxParam,
      limitParam,
      sortParam,
      attentionParam,
    ],
    responses: { '200': { description: 'A page.', content: json(workflowPageSchema) } },
    // Not `heavy`: a list page is heavy only when it is read (handleList); a cached page is in memory already.
    handler: handleList,
  },
  {
    method: 'get',
    path: '/workflow-summary',
    summary: 'Count workflows per attention state',
    description: 'Over all of the user\'s workflows, terminated ones included, read from an index (docs/api.md, "Attention"). An addition to the contract.',
    access: 'session',
    heavy: true,
    responses: { '200': { description: 'The counts.', content: json(attentionSummarySchema) } },
    handler: handleSummary,
  },
  {
    method: 'get',
    path: '/workflows/{workflow_id}',
    summary: 'Read a workflow',
    access: 'session',
    heavy: true,
    parameters: [includeParam],
    responses: { '200': { description: 'The workflow, with generation.', content: json(workflowSchema) }, '404': notYours },
    handler: handleGet,
  },
  {
    method: 'put',
    path: '/workflows/{workflow_id}',
    summary: 'Update (and reactivate) a workflow',
    access: 'session',
    parameters: [idempotencyKey],
    body: { schema: updateWorkflowBody, required: true },
    responses: {
      '204': { description: 'Updated.', headers: replayed },
      '404': notYours,
      '409': problem('Idempotency-Key reused for a different request.'),
    },
    handler: handleUpdate,
  },
  {
    method: 'patch',
    path: '/workflows/{workflow_id}',
    summary: 'Terminate a workflow',
    access: 'session',
    responses: { '204': { description: 'Terminated.' }, '404': notYours, '412': problem('Already terminated (code workflow_terminated).') },
    handler: handleTerminate,
  },
  {
    method: 'delete',
    path: '/workflows/{workflow_id}',
    summary: 'Delete a terminated workflow',
    access: 'session',
    responses: {
      '204': { description: 'Deleted.' },
      '404': notYours,
      '412': problem('Still active (workflow_active) or has a running job (workflow_has_running_jobs).'),
    },
    handler: handleDelete,
  },
];
