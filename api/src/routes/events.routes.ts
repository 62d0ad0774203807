import type { Context } from 'koa';
import { isOrlojError, OrlojError } from '@orloj/common/core';
import type { ApiDeps } from '../deps.js';
import type { Operation } from '../contract/operation.js';
import { INT32_MAX, problem, rateLimited } from '../contract/shared.js';
import { problemOf, withHeaders } from '../http/problem.js';
import { SseStream } from '../http/sse.js';
import { QueryReader } from '../http/validate.js';
import { logPathParams, openJobLogs } from './logs.routes.js';

const MAX_SEQUENCE = INT32_MAX;
const sequenceSchema = { type: 'integer', minimum: 0, maximum: MAX_SEQUENCE } as const;
const sinceParam = {
  name: 'since',
  in: 'query',
  description: 'Replay lines with a sequence_num above this one. Last-Event-ID wins when both are sent.',
  schema: sequenceSchema,
} as const;
const lastEventIdHeader = {
  name: 'Last-Event-ID',
  in: 'header',
  description: 'The id of the last `log` event received (EventSource sends it when it reconnects).',
  schema: { type: 'string', pattern: '^\\d{1,10}$' },
} as const;
const LAST_EVENT_ID = new RegExp(lastEventIdHeader.schema.pattern);
const lastEventIdParam = {
  name: 'lastEventId',
  in: 'query',
  description: 'The same as Last-Event-ID, for EventSource polyfills that send it in the URL. Last-Event-ID wins when both are sent; this wins over since.',
  schema: sequenceSchema,
} as const;

const attemptParam = {
  name: 'attempt',
  in: 'query',
  description:
    "The attempt the client's Last-Event-ID (or since, or lastEventId) belongs to. When the job has moved on to another attempt since, that position is not this attempt's: the replay starts at line 0 of the job's current attempt instead. An addition to the contract (issue 26); without it the position is read as the current attempt's.",
  schema: { type: 'integer', minimum: 1, maximum: MAX_SEQUENCE },
} as const;

/** Where to resume in the job's current attempt: the client's position, unless it was another attempt's. */
function resumeIn(current: number, attempt: number | undefined, after: number): number {
  return attempt === undefined || attempt === current ? after : -1;
}

/**
 * Where a (re)connecting client left off: the Last-Event-ID header (sent by
 * EventSource on reconnection, so it wins over `since`, which stays in the
 * URL), else the `lastEventId` query parameter (what EventSource polyfills
 * send instead of the header), else `since`, else -1 (every stored line).
 * `resumed`: the client says it is reconnecting (header or lastEventId).
 */
function resumeAfter(ctx: Context, q: QueryReader): { after: number; resumed: boolean } {
  const since = q.integer(sinceParam);
  const alias = q.integer(lastEventIdParam);
  const header = ctx.get(lastEventIdHeader.name).trim();
  if (header !== '') {
    if (!LAST_EVENT_ID.test(header) || Number(header) > MAX_SEQUENCE) {
      q.fail('Last-Event-ID', `must be a sequence_num: an integer from 0 to ${MAX_SEQUENCE}`);
      return { after: -1, resumed: false };
    }
    return { after: Number(header), resumed: true };
  }
  if (alias !== undefined) return { after: alias, resumed: true };
  return { after: since ?? -1, resumed: false };
}

const TERMINAL: ReadonlySet<string> = new Set(['COMPLETED', 'FAILED', 'CANCELED']);

/**
 * Live tail of a job's log as server-sent events: `connected`, then one
 * `log` event per line (id = sequence_num), `end` once the job is terminal
 * and its lines are all sent; `error` (data = problem document) instead
 * when the open is refused (not found, retention off), then the stream
 * closes. Request errors (401, 400, 429) are plain problem responses.
 */
async function liveTail({ store, tails }: ApiDeps, ctx: Context): Promise<void> {
  const { workflowId, jobId } = logPathParams(ctx);
  const q = new QueryReader(ctx.query);
  const { after, resumed } = resumeAfter(ctx, q);
  const attempt = q.integer(attemptParam);
  q.done();
  if (ctx.method === 'HEAD') {
    ctx.status = 200;
    ctx.type = 'text/event-stream';
    return;
  }
  if (resumed) {
    // A reconnect after `end` (whose id is the last line's, or 0 without lines):
    // nothing is left to send, and 204 is what tells EventSource to stop
    // reconnecting, instead of replaying the end in a loop.
    const access = await openJobLogs(store, ctx.state.session.userId as string, workflowId, jobId).catch(() => undefined);
    const from = access ? resumeIn(access.attempts, attempt, after) : after;
    if (access && TERMINAL.has(access.status) && (await store.logQueries.after({ jobId, attempt: access.attempts, after: from, limit: 1 })).length === 0) {
      ctx.status = 204;
      return;
    }
  }
  const release = tails.acquire(ctx.state.clientAddress as string, ctx.state.session.userId as string);
  if (typeof release !== 'function') {
    const limit =
      release === 'client'
        ? `At most ${tails.settings.maxStreamsPerClient} event streams may be open at once from one address`
        : `At most ${tails.settings.maxStreamsPerUser} event streams may be open at once for one user`;
    throw withHeaders(new OrlojError('rate_limited', `${limit}; close one first.`), { 'Retry-After': '1' });
  }
  const sse = new SseStream();
  void sse.closed.then(release);
  try {
    let opened;
    try {
      opened = await openJobLogs(store, ctx.state.session.userId as string, workflowId, jobId);
    } catch (err) {
      if (!isOrlojError(err)) throw err;
      sse.respond(ctx);
      sse.event('error', problemOf(err));
      sse.end();
      return;
    }
    sse.respond(ctx);
    await tails.open({ sse, jobId, workflowId, attempt: opened.attempts, after: resumeIn(opened.attempts, attempt, after) });
  } catch (err) {
    sse.body.destroy();
    release();
    throw err;
  }
}

export const eventsOperations: readonly Operation[] = [
  {
    method: 'get',
    path: '/workflows/{workflow_id}/jobs/{job_id}/events',
    summary: "Live tail of a job's log (server-sent events)",
    description: [
      'Events: `connected` (first; data `{id, workflow_id}`), one `log` per line (`id:` = sequence_num, data = a LogEntry),',
      '`end` once the job is terminal and every line was sent (data `{id, workflow_id, status}`), then the stream closes.',
      'A refused open is a 200 stream with a single `error` event whose data is a problem document',
      '(404 `not_found`, 412 `log_retention_disabled`), then the stream closes.',
      'Lines after `Last-Event-ID` (or else `since`) are replayed from the store first; without either, every stored line is.',
      "The tail follows the job's current attempt: when a new attempt starts, its lines follow from sequence_num 0 (each LogEntry's event_id names its attempt).",
      'Comment lines keep the stream alive every 15 s. At most 5 concurrent streams per client address (the sixth is 429).',
    ].join(' '),
    access: 'session',
    parameters: [
      sinceParam,
      lastEventIdParam,
      lastEventIdHeader,
      attemptParam,
    ],
    responses: {
      '200': { description: 'The event stream.', content: { 'text/event-stream': {} } },
      '204': {
        description:
          'A reconnect (Last-Event-ID or lastEventId) to a job that has ended, with no line after that id: nothing to send. EventSource stops reconnecting on 204. The `end` event carries the id of the last line (0 when there are none) for this.',
      },
      '400': problem('Invalid path parameter, since, lastEventId, Last-Event-ID or attempt.'),
      '429': { ...rateLimited, description: 'Rate limit exceeded, or 5 streams from this client address are open already.' },
    },
    handler: liveTail,
  },
];
