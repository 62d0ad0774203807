import type { Context } from 'koa';
import { decodeCursor, encodeCursor, isUuid, notFound, validationError, type FieldError } from '@orloj/common/core';
import { createManualJob, JOB_STATUSES, JOB_TRIGGERS, jobAttempts } from '@orloj/common/domain';
import { nudgeScheduler, type ApiDeps } from '../deps.js';
import { json, ref, type Wire } from '../contract/components.js';
import type { Operation } from '../contract/operation.js';
import { scheduleJobBody, type ScheduleJobBody } from '../contract/requests.js';
import { createdSchema, jobPageSchema, jobSchema } from '../contract/responses.js';
import { attemptListSchema } from '../contract/attempt-responses.js';
import { cursorParam, idempotencyKey, problem, replayed } from '../contract/shared.js';
import { readJsonBody } from '../http/body.js';
import { readIdempotencyKey } from '../http/idempotency.js';
import { presentAttempt, presentJob } from '../http/present.js';
import { bodyValidator, QueryReader, requireUuidParam } from '../http/validate.js';
import { logPathParams } from './logs.routes.js';

const readSchedule = bodyValidator<ScheduleJobBody>(scheduleJobBody);

export const JOB_PAGE_SIZE = 20;
const limitParam = { name: 'limit', in: 'query', schema: { type: 'integer', minimum: 1, maximum: 100, default: JOB_PAGE_SIZE } } as const;

/**
 * `GET /workflows/{workflow_id}/jobs/{job_id}`, as a pattern that never takes
 * `schedule` for a job id: a plain `:job_id` route would also match the
 * schedule command's path, so GET on it would answer 400 instead of 405 and
 * `Allow` would list GET. Case-insensitive and with an optional trailing slash,
 * like the string routes.
 */
const JOB_PATH = /^\/workflows\/([^/]+)\/jobs\/(?!schedule\/?$)([^/]+)\/?$/i;

const userIdOf = (ctx: Context) => ctx.state.session.userId as string;
const workflowId = (ctx: Context) => requireUuidParam('workflow_id', ctx.params.workflow_id, isUuid);

function decodeSegment(raw: string | undefined): string | undefined {
  if (raw === undefined) return undefined;
  try {
    return decodeURIComponent(raw);
  } catch {
    return undefined;
  }
}

/** Both path parameters of the single-job route, each checked; 400 names every one that is not a UUID. */
function jobParams(ctx: Context): { workflowId: string; jobId: string } {
  const captures = (ctx as Context & { captures?: string[] }).captures ?? [];
  const values = { workflow_id: decodeSegment(captures[0]), job_id: decodeSegment(captures[1]) };
  const errors: FieldError[] = [];
  for (const [name, value] of Object.entries(values)) {
    if (!isUuid(value)) errors.push({ field: name, message: 'must be a UUID' });
  }
  if (errors.length) {
    throw validationError(errors, `The path parameter${errors.length > 1 ? 's' : ''} ${errors.map((e) => e.field).join(' and ')} must be a UUID.`);
  }
  return { workflowId: values.workflow_id!, jobId: values.job_id! };
}

async function schedule(deps: ApiDeps, ctx: Context): Promise<void> {
  const { clock, idempotency } = deps;
  const id = workflowId(ctx);
  const key = readIdempotencyKey(ctx);
  const raw = await readJsonBody(ctx);
  // No body and `{}` are the same logical request (one fingerprint).
  const body: ScheduleJobBody = raw === undefined ? {} : readSchedule(raw);
  const userId = userIdOf(ctx);
  await idempotency.run(ctx, userId, key, { scope: `POST /workflows/${id}/jobs/schedule`, body }, async (tx) => {
    // Locked so a concurrent terminate or update cannot slip between the check and the insert.
    const workflow = await tx.workflows.findForUser(userId, id, { lock: true });
    if (!workflow) throw notFound('The workflow');
    // A manual run: due now, waits its turn behind a running job; the automatic schedule is untouched.
    // The request's id travels with the job (job.run carries it), so the runner's lines for it carry this reqId.
    const job = createManualJob(workflow, clock.now(), typeof ctx.state.reqId === 'string' ? ctx.state.reqId : undefined);
    await tx.jobs.insert(job);
    return { status: 201, body: { id: job.id } };
  });
  nudgeScheduler(deps);
}

async function listJobs({ store }: ApiDeps, ctx: Context): Promise<void> {
  const id = workflowId(ctx);
  const q = new QueryReader(ctx.query);
  const cursor = q.text(cursorParam);
  const status = q.enumOf('status', JOB_STATUSES);
  const trigger = q.enumOf('trigger', JOB_TRIGGERS);
  const limit = q.integer(limitParam);
  q.done();
  // Bound to the workflow: a cursor from another workflow's job list is 400.
  const list = `jobs:${id}`;
  const after = decodeCursor(list, cursor);
  if (!(await store.workflows.findForUser(userIdOf(ctx), id))) throw notFound('The workflow');
  const rows = await store.jobs.list({ workflowId: id, status, trigger, after, limit: limit + 1 });
  const page = rows.slice(0, limit);
  const last = page[page.length - 1];
  ctx.body = {
    jobs: page.map((j) => presentJob(j, { inList: true })),
    cursor: rows.length > limit && last ? encodeCursor(list, { k: last.scheduledAt, id: last.id }) : '',
  } satisfies Wire<typeof jobPageSchema>;
}

async function readJob({ store }: ApiDeps, ctx: Context): Promise<void> {
  const { workflowId: wid, jobId } = jobParams(ctx);
  const job = await store.jobs.findForUser(userIdOf(ctx), wid, jobId);
  if (!job) throw notFound('The job');
  ctx.body = presentJob(job);
}

/**
 * The job's attempts, oldest first: those given up (recorded when the job was
 * handed out again) and its current one, each with the lines its log holds.
 */
async function listAttempts({ store }: ApiDeps, ctx: Context): Promise<void> {
  const { workflowId: wid, jobId } = logPathParams(ctx);
  const userId = userIdOf(ctx);
  const [job, access] = await Promise.all([store.jobs.findForUser(userId, wid, jobId), store.jobs.logAccess(userId, wid, jobId)]);
  if (!job || !access) throw notFound('The job');
  const attempts = jobAttempts(job, await store.jobAttempts.ofJob(jobId));
  const lines = access.logRetention ? await Promise.all(attempts.map((a) => store.logQueries.stored({ jobId, attempt: a.attempt }))) : [];
  ctx.body = {
    id: jobId,
    workflow_id: wid,
    attempts: attempts.map((a, i) => presentAttempt(a, lines[i])),
  } satisfies Wire<typeof attemptListSchema>;
}

const notYours = problem('No such workflow of yours.');

export const jobsOperations: readonly Operation[] = [
  {
    method: 'post',
    path: '/workflows/{workflow_id}/jobs/schedule',
    summary: 'Schedule a manual run now',
    description: 'Creates a PENDING MANUAL job due now. It waits while another job of the workflow runs, and does not move the automatic schedule.',
    access: 'session',
    parameters: [idempotencyKey],
    body: { schema: scheduleJobBody, required: false },
    responses: {
      '201': { description: 'Scheduled; the id of the new job.', headers: replayed, content: json(createdSchema) },
      '404': notYours,
      '409': problem('Idempotency-Key reused for a different request.'),
      '412': problem('The workflow is terminated (workflow_terminated) or its build failed (workflow_build_failed).'),
    },
    handler: schedule,
  },
  {
    method: 'get',
    path: '/workflows/{workflow_id}/jobs',
    summary: "List a workflow's jobs, newest first (scheduled_at, then id)",
    access: 'session',
    parameters: [
      cursorParam,
      { name: 'status', in: 'query', description: 'Exact match.', schema: { enum: [...JOB_STATUSES] } },
      { name: 'trigger', in: 'query', description: 'Exact match.', schema: { enum: [...JOB_TRIGGERS] } },
      limitParam,
    ],
    responses: {
      '200': { description: 'A page; jobs carry attempts, and container_id once set.', content: json(jobPageSchema) },
      '404': notYours,
    },
    handler: listJobs,
  },
  {
    method: 'get',
    path: '/workflows/{workflow_id}/jobs/{job_id}',
    route: JOB_PATH,
    summary: 'Read a job',
    access: 'session',
    responses: {
      '200': {
        description: 'The job, without container_id and attempts.',
        content: json({ allOf: [ref(jobSchema), { not: { anyOf: [{ required: ['container_id'] }, { required: ['attempts'] }] } }] }),
      },
      '404': problem('No such job of this workflow of yours.'),
    },
    handler: readJob,
  },
  {
    method: 'get',
    path: '/workflows/{workflow_id}/jobs/{job_id}/attempts',
    summary: "List a job's attempts, oldest first",
    description:
      "An addition to the contract (issue 26): each attempt with its runner, start and end, outcome and, for one given up, why (lease_lost, not_started, orloj_restart, runner_failure). Each attempt's log is read with `attempt` on GET …/logs/lines and …/logs/raw.",
    access: 'session',
    responses: {
      '200': { description: "The job's attempts.", content: json(attemptListSchema) },
      '404': problem('No such job of this workflow of yours.'),
    },
    handler: listAttempts,
  },
];
