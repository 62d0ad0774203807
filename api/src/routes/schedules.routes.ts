/**
 * Schedules people use (issue 25, ADR 0015, ADR 0020): the schedule fields of
 * the create and update bodies (cron, timezone, jitter_seconds and the run
 * policy), and the pause and resume commands.
 */
import type { Context } from 'koa';
import { isUuid, notFound, OrlojError, toIso, type FieldError } from '@orloj/common/core';
import {
  contractInterval,
  cronProblem,
  DEFAULT_RUN_POLICY,
  scheduleOf,
  skipsSlot,
  slotFates,
  SLOTS_MAX,
  timeZoneProblem,
  type CatchUpPolicy,
  type FirstRun,
  type OverlapPolicy,
  type RunPolicy,
  type Workflow,
} from '@orloj/common/domain';
import type { Store } from '@orloj/common/store';
import { nudgeScheduler, type ApiDeps } from '../deps.js';
import { json, type Wire } from '../contract/components.js';
import type { Operation } from '../contract/operation.js';
import { slotListSchema } from '../contract/schedules.js';
import { idempotencyKey, problem, replayed } from '../contract/shared.js';
import { readIdempotencyKey } from '../http/idempotency.js';
import { QueryReader, requireUuidParam } from '../http/validate.js';

/** A workflow's schedule as its owner chose it, with its run policy. */
export interface ScheduleChoice extends RunPolicy {
  cron: string | null;
  timeZone: string;
  jitterSeconds: number;
  /** What `interval` holds: the body's for an interval workflow, the longest gap for a cron one. */
  intervalMinutes: number;
}

interface ScheduleBody {
  interval?: number;
  cron?: string | null;
  timezone?: string;
  jitter_seconds?: number;
  overlap_policy?: OverlapPolicy;
  catch_up_policy?: CatchUpPolicy;
  first_run?: FirstRun;
}

/**
 * The schedule a create (no `current`) or update body chooses, and what is
 * wrong with it (each field named). A field absent from an update keeps the
 * workflow's current value; `cron: null` makes it an interval workflow again.
 */
export function readSchedule(body: ScheduleBody, current: Workflow | undefined, now: number): { choice?: ScheduleChoice; errors: FieldError[] } {
  const errors: FieldError[] = [];
  const cron = body.cron === undefined ? (current?.cron ?? null) : body.cron === null ? null : body.cron.trim();
  const timeZone = body.timezone ?? current?.timeZone ?? 'UTC';
  const jitterSeconds = body.jitter_seconds ?? current?.jitterSeconds ?? 0;
  const policy = current ?? DEFAULT_RUN_POLICY;
  const runPolicy: RunPolicy = {
    overlapPolicy: body.overlap_policy ?? policy.overlapPolicy,
    catchUpPolicy: body.catch_up_policy ?? policy.catchUpPolicy,
    firstRun: body.first_run ?? policy.firstRun,
  };
  const zoneProblem = timeZoneProblem(timeZone);
  if (zoneProblem) errors.push({ field: 'timezone', message: zoneProblem });
  const expressionProblem = cron === null ? undefined : cronProblem(cron);
  if (expressionProblem) errors.push({ field: 'cron', message: expressionProblem });
  if (cron === null && body.interval === undefined) errors.push({ field: 'interval', message: 'is required unless cron is set' });
  if (errors.length > 0) return { errors };
  return { choice: { cron, timeZone, jitterSeconds, intervalMinutes: contractInterval(cron, timeZone, body.interval ?? 0, now), ...runPolicy }, errors };
}

const workflowId = (ctx: Context) => requireUuidParam('workflow_id', ctx.params.workflow_id, isUuid);
const userIdOf = (ctx: Context) => ctx.state.session.userId as string;

/** Runs a command once per Idempotency-Key when the request sends one; the commands are harmless to repeat, so the key is optional. */
async function command(deps: ApiDeps, ctx: Context, scope: string, change: (tx: Store, userId: string, id: string) => Promise<void>): Promise<void> {
  const id = workflowId(ctx);
  const userId = userIdOf(ctx);
  if (ctx.get('idempotency-key') !== '') {
    const key = readIdempotencyKey(ctx);
    await deps.idempotency.run(ctx, userId, key, { scope: `POST /workflows/${id}/${scope}`, body: {} }, async (tx) => {
      await change(tx, userId, id);
      return { status: 204 };
    });
    return;
  }
  await deps.store.transaction((tx) => change(tx, userId, id));
  ctx.status = 204;
}

/** The workflow, locked, or the command's 404 / 412. */
async function activeWorkflow(tx: Store, userId: string, id: string): Promise<Workflow> {
  const workflow = await tx.workflows.findForUser(userId, id, { lock: true });
  if (!workflow) throw notFound('The workflow');
  if (workflow.terminatedAt !== null) throw new OrlojError('workflow_terminated', 'The workflow is terminated; update it (PUT) to reactivate it.');
  return workflow;
}

async function handlePause(deps: ApiDeps, ctx: Context): Promise<void> {
  await command(deps, ctx, 'pause', async (tx, userId, id) => {
    if (await tx.workflows.pause(userId, id, deps.clock.now())) return;
    await activeWorkflow(tx, userId, id); // 404, 412, or paused already: nothing to do
  });
}

async function handleResume(deps: ApiDeps, ctx: Context): Promise<void> {
  await command(deps, ctx, 'resume', async (tx, userId, id) => {
    const workflow = await activeWorkflow(tx, userId, id);
    if (workflow.pausedAt === null) return;
    const now = deps.clock.now();
    // As it was: its next slot after now, without catching up the slots of the pause.
    await tx.workflows.resume(id, scheduleOf(workflow)?.firstSlotAfter(now) ?? null, now);
  });
  nudgeScheduler(deps);
}

const DAY = 24 * 3_600_000;
const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})$/i;
const fromParam = { name: 'from', in: 'query', description: 'RFC 3339; default `to` minus one day.', schema: { type: 'string', format: 'date-time', maxLength: 40 } } as const;
const toParam = { name: 'to', in: 'query', description: 'RFC 3339, after `from`; default one hour from now.', schema: { type: 'string', format: 'date-time', maxLength: 40 } } as const;

function instant(q: QueryReader, p: typeof fromParam | typeof toParam): number | undefined {
  const text = q.text(p);
  if (text === undefined) return undefined;
  const t = RFC3339.test(text) ? Date.parse(text) : NaN;
  if (Number.isNaN(t)) q.fail(p.name, 'must be an RFC 3339 date-time such as 2026-03-29T01:00:00Z');
  return Number.isNaN(t) ? undefined : t;
}

async function handleSlots(deps: ApiDeps, ctx: Context): Promise<void> {
  const id = workflowId(ctx);
  const q = new QueryReader(ctx.query);
  const now = deps.clock.now();
  const to = instant(q, toParam) ?? now + 3_600_000;
  const from = instant(q, fromParam) ?? to - DAY;
  if (to <= from) q.fail('to', 'must be after from');
  q.done();
  const workflow = await deps.store.workflows.findForUser(userIdOf(ctx), id);
  if (!workflow) throw notFound('The workflow');
  const schedule = scheduleOf(workflow);
  if (schedule && schedule.countIn(from, to) > SLOTS_MAX) {
    q.fail('to', `must be close enough to from to hold at most ${SLOTS_MAX} slots of this workflow`);
    q.done();
  }
  const jobs = schedule ? await deps.store.jobs.automaticAround(id, from, to, 2 * SLOTS_MAX) : [];
  const downtime = await deps.store.uptime.downtime(from, to);
  const windows = schedule ? await deps.store.maintenanceWindows.inForce([workflow.userId], from) : [];
  const slots = schedule ? slotFates(workflow, schedule, jobs, { from, to, now }, { downtime, inMaintenance: (slotAt) => skipsSlot(windows, workflow, slotAt) }) : [];
  ctx.body = {
    from: toIso(from),
    to: toIso(to),
    slots: slots.map((s) => ({
      slot_at: toIso(s.slotAt),
      fate: s.fate,
      ...(s.jobId !== undefined ? { job_id: s.jobId } : {}),
      ...(s.lateMs !== undefined ? { late_ms: s.lateMs } : {}),
      ...(s.reason !== undefined ? { reason: s.reason } : {}),
      ...(s.afterOverlap ? { after_overlap: true as const } : {}),
    })),
    downtime: downtime.map((d) => ({ from: toIso(d.from), to: toIso(d.to) })),
  } satisfies Wire<typeof slotListSchema>;
}

const notYours = problem('No such workflow of yours.');
const optionalKey = { ...idempotencyKey, required: false, description: `Optional (the command is harmless to repeat). ${idempotencyKey.description ?? ''}` };

export const schedulesOperations: readonly Operation[] = [
  {
    method: 'post',
    path: '/workflows/{workflow_id}/pause',
    summary: 'Pause a workflow',
    description:
      'No automatic runs until resumed; history, a job already queued or running, and manual runs (POST …/jobs/schedule) are unaffected. Pausing a paused workflow changes nothing.',
    access: 'session',
    parameters: [optionalKey],
    responses: {
      '204': { description: 'Paused (or paused already).', headers: replayed },
      '404': notYours,
      '409': problem('Idempotency-Key reused for a different request.'),
      '412': problem('The workflow is terminated (code workflow_terminated).'),
    },
    handler: handlePause,
  },
  {
    method: 'post',
    path: '/workflows/{workflow_id}/resume',
    summary: 'Resume a paused workflow',
    description: 'Automatic runs start again at the next slot after now; the slots of the pause are not caught up. Resuming a workflow that is not paused changes nothing.',
    access: 'session',
    parameters: [optionalKey],
    responses: {
      '204': { description: 'Resumed (or not paused).', headers: replayed },
      '404': notYours,
      '409': problem('Idempotency-Key reused for a different request.'),
      '412': problem('The workflow is terminated (code workflow_terminated).'),
    },
    handler: handleResume,
  },
  {
    method: 'get',
    path: '/workflows/{workflow_id}/slots',
    summary: "Each automatic slot in a range and what became of it",
    description: `At most ${SLOTS_MAX} slots (400 naming \`to\` beyond). Fates: ran (with late_ms), running, pending, canceled, skipped (reason still_running, orloj_down, not_run, catch_up_none or maintenance), with the times orloj itself was down, paused, upcoming; after_overlap marks a run that waited for the previous one. A workflow not built yet has no slots. docs/api.md, "Schedules", says what can and cannot be told.`,
    access: 'session',
    heavy: true,
    parameters: [fromParam, toParam],
    responses: { '200': { description: 'The slots, oldest first.', content: json(slotListSchema) }, '404': notYours },
    handler: handleSlots,
  },
];
