import crypto from 'node:crypto';
import { Readable } from 'node:stream';
import type { Context } from 'koa';
import { checkCursorList, encodeCursor, isUuid, notFound, OrlojError, parseCursor } from '@orloj/common/core';
import type { Job } from '@orloj/common/domain';
import type { JobLogAccess, LogLine, Store } from '@orloj/common/store';
import type { ApiDeps } from '../deps.js';
import { json, ref, type Wire } from '../contract/components.js';
import type { Operation, Parameter } from '../contract/operation.js';
import { logDownloadSchema, logPageSchema, logRangeSchema } from '../contract/responses.js';
import { cursorParam, INT32_MAX, problem } from '../contract/shared.js';
import { logDownloadEntryJson, presentLogEntry } from '../http/present.js';
import { QueryReader, requireUuidParams } from '../http/validate.js';

export const LOG_PAGE_SIZE = 100;
export const LOG_PAGE_MAX = 1000;
/**
 * The most message text (UTF-16 code units, highlights included) one page of
 * list or search carries: the page ends before the line that would pass it
 * (its first line always comes), with a cursor to the rest.
 */
export const LOG_PAGE_MAX_TEXT = 4 * 1024 * 1024;
/** Longest search text `q`, in UTF-16 code units. */
export const LOG_QUERY_MAX = 1000;
/** Rows per store query while streaming a download. */
export const DOWNLOAD_BATCH = 1000;
/** Highest `from` of GET …/logs/lines (sequence numbers are PostgreSQL integers). */
export const LOG_LINE_MAX = INT32_MAX;

export const LOG_STREAMS = ['stdout', 'stderr'] as const;
export const DOWNLOAD_FORMATS = ['txt', 'json', 'jsonl'] as const;

const limitParam = { name: 'limit', in: 'query', schema: { type: 'integer', minimum: 1, maximum: LOG_PAGE_MAX, default: LOG_PAGE_SIZE } } as const;
const fromParam = {
  name: 'from',
  in: 'query',
  description: 'The first sequence_num to return.',
  schema: { type: 'integer', minimum: 0, maximum: LOG_LINE_MAX, default: 0 },
} as const;
const attemptParam = {
  name: 'attempt',
  in: 'query',
  description: "Which attempt's lines (GET …/attempts lists them), from 1 to the job's current attempt; default the current one. An addition to the contract.",
  schema: { type: 'integer', minimum: 1, maximum: LOG_LINE_MAX },
} as const;
const streamParam: Parameter = { name: 'stream', in: 'query', description: 'Exact match.', schema: { enum: [...LOG_STREAMS] } };
const searchTextParam = (more: string): Parameter => ({
  name: 'q',
  in: 'query',
  description: `Case-insensitive literal substring of the message (no pattern characters: % _ \\ * are plain). Omit it to filter by stream only. ${more}`,
  schema: { type: 'string', minLength: 1, maxLength: LOG_QUERY_MAX },
});
const TERMINAL: ReadonlySet<Job['status']> = new Set(['COMPLETED', 'FAILED', 'CANCELED']);

type LogMatcher = ReturnType<Store['logQueries']['matcher']>;

const userIdOf = (ctx: Context) => ctx.state.session.userId as string;

export function logPathParams(ctx: Context): { workflowId: string; jobId: string } {
  const p = requireUuidParams({ workflow_id: ctx.params.workflow_id, job_id: ctx.params.job_id }, isUuid);
  return { workflowId: p.workflow_id, jobId: p.job_id };
}

/** `q`: a case-insensitive literal substring, 1 to LOG_QUERY_MAX characters; absent means no text filter. */
export function readSearchText(q: QueryReader): string | undefined {
  const text = q.string('q', LOG_QUERY_MAX);
  if (text === '') q.fail('q', `must be 1 to ${LOG_QUERY_MAX} characters (omit it to filter by stream only)`);
  return text || undefined;
}

/**
 * The attempt a read asked for (`attempt`, read before `q.done()`), checked
 * against the job's: one it has had, or its current one when not given.
 */
function attemptOf(q: QueryReader, asked: number | undefined, job: JobLogAccess): number {
  if (asked === undefined) return job.attempts;
  if (asked > job.attempts) {
    q.fail('attempt', job.attempts === 0 ? 'the job has not been handed to a runner yet: it has no attempt' : `must be from 1 to ${job.attempts}, the job's attempts so far`);
    q.done();
  }
  return asked;
}

export function isTerminal(status: Job['status']): boolean {
  return TERMINAL.has(status);
}

/**
 * The job whose logs are asked for, or the refusal: 404 when the job is not
 * the caller's (or not this workflow's), 412 when its workflow keeps no logs
 * (every HEARTBEAT workflow, CONTAINER with log_retention=false).
 */
export async function openJobLogs(store: Store, userId: string, workflowId: string, jobId: string): Promise<JobLogAccess> {
  const job = await store.jobs.logAccess(userId, workflowId, jobId);
  if (!job) throw notFound('The job');
  if (!job.logRetention) {
    throw new OrlojError('log_retention_disabled', "The workflow does not retain logs (log_retention is off, as for every HEARTBEAT workflow).");
  }
  return job;
}

/** A fresh token: 32 random lowercase hex characters that occur in none of the page's messages. */
function highlightToken(messages: readonly string[]): string {
  for (;;) {
    const token = crypto.randomBytes(16).toString('hex');
    if (!messages.some((m) => m.includes(token))) return token;
  }
}

/**
 * What a search result puts around each match, as the reference
 * implementation does (its dashboard looks for exactly this pair). Since the
 * token occurs in no message, and a run of hex digits cannot reach across
 * the underscores that close each marker, every marker in a result is one
 * the api inserted.
 */
function highlightMarkers(token: string): { start: string; end: string } {
  return { start: `__CV_HL_START_${token}__`, end: `__CV_HL_END_${token}__` };
}

/**
 * Lines by position, oldest first: `limit` lines from sequence_num `from`
 * (0 when absent) of the current attempt, and how many are stored so far.
 * What a virtualized viewer needs to open a log at its end, jump to any line
 * or show a search hit in context without walking the pages.
 */
async function logLines(deps: ApiDeps, ctx: Context): Promise<void> {
  const { store } = deps;
  const { workflowId, jobId } = logPathParams(ctx);
  const q = new QueryReader(ctx.query);
  const from = q.integer(fromParam);
  const limit = q.integer(limitParam);
  const asked = q.integer(attemptParam);
  q.done();
  const attempt = attemptOf(q, asked, await openJobLogs(store, userIdOf(ctx), workflowId, jobId));
  const [lines, total] = await Promise.all([
    store.logQueries.after({ jobId, attempt, limit, ...(from > 0 ? { after: from - 1 } : {}) }),
    store.logQueries.stored({ jobId, attempt }),
  ]);
  ctx.body = {
    id: jobId,
    workflow_id: workflowId,
    from,
    // A line stored between the two reads can make the page reach past the count read.
    total: Math.max(total, lines.length ? lines[lines.length - 1]!.sequenceNum + 1 : 0),
    logs: lines.map((l) => presentLogEntry(l, l.message)),
  } satisfies Wire<typeof logRangeSchema>;
}

/**
 * The whole log of a finished job, oldest first, streamed: the store is
 * read in keyset batches as the client takes the bytes (Readable.from pulls
 * the next batch only when the socket has drained), so memory stays bounded
 * by one batch whatever the log's size.
 */
async function rawLog(deps: ApiDeps, ctx: Context): Promise<void> {
  const { store, logger } = deps;
  const { workflowId, jobId } = logPathParams(ctx);
  const q = new QueryReader(ctx.query);
  const format = q.enumOf('format', DOWNLOAD_FORMATS) ?? 'txt';
  const stream = q.enumOf('stream', LOG_STREAMS);
  const text = readSearchText(q);
  const asked = q.integer(attemptParam);
  q.done();
  const job = await openJobLogs(store, userIdOf(ctx), workflowId, jobId);
  const attempt = attemptOf(q, asked, job);
  // An attempt given up is finished whatever the job does now.
  if (attempt === job.attempts && !isTerminal(job.status)) {
    throw new OrlojError('job_not_terminal', `The job is ${job.status}: its log can be downloaded once it has COMPLETED, FAILED or been CANCELED.`);
  }
  const filter = {
    jobId,
    attempt,
    ...(stream ? { stream } : {}),
    ...(text !== undefined ? { match: store.logQueries.matcher(text) } : {}),
  };
  const render: (l: LogLine) => string = format === 'txt' ? (l) => `${l.message}\n` : format === 'jsonl' ? (l) => `${logDownloadEntryJson(l)}\n` : logDownloadEntryJson;
  const separator = format === 'json' ? ',' : '';
  async function* body(): AsyncGenerator<string> {
    try {
      if (format === 'json') {
        yield `{"id":"${jobId}","workflow_id":"${workflowId}","filters":${JSON.stringify({ q: text ?? '', stream: stream ?? 'all' })},"logs":[`;
      }
      let first = true;
      for await (const batch of store.logQueries.scan(filter, DOWNLOAD_BATCH)) {
        let chunk = '';
        for (const line of batch) {
          chunk += (first ? '' : separator) + render(line);
          first = false;
        }
        yield chunk;
      }
      if (format === 'json') yield ']}';
    } catch (err) {
      // Headers are gone: the response is cut short (no final chunk), which clients see as an incomplete download.
      logger.error({ err, jobId, reqId: ctx.state.reqId as string | undefined }, 'log download failed midway');
      throw err;
    }
  }
  ctx.status = 200;
  ctx.type = format === 'txt' ? 'text/plain; charset=utf-8' : format === 'json' ? 'application/json; charset=utf-8' : 'application/x-ndjson; charset=utf-8';
  ctx.set('Content-Disposition', `attachment; filename="${jobId}.${format}"`);
  ctx.body = Readable.from(body(), { objectMode: false, highWaterMark: 64 * 1024 });
}

/** One page, newest first; cursors are keyset positions (sequence_num). */
async function logPage(deps: ApiDeps, ctx: Context, search: boolean): Promise<void> {
  const { store } = deps;
  const { workflowId, jobId } = logPathParams(ctx);
  const q = new QueryReader(ctx.query);
  const cursor = q.text(cursorParam);
  const limit = q.integer(limitParam);
  const text = search ? readSearchText(q) : undefined;
  const stream = search ? q.enumOf('stream', LOG_STREAMS) : undefined;
  q.done();
  const claimed = parseCursor(cursor);
  const match: LogMatcher | undefined = text === undefined ? undefined : store.logQueries.matcher(text);
  const filter = { jobId, ...(stream ? { stream } : {}), ...(match ? { match } : {}), ...(claimed ? { before: claimed.k } : {}), limit: limit + 1 };
  // The access check rides in the page's statement; only an empty answer needs
  // the check alone, to tell an empty page from a job that is not the caller's.
  const owned = await store.logQueries.ownedPage({ userId: userIdOf(ctx), workflowId }, filter);
  const attempt = owned?.attempt ?? (await openJobLogs(store, userIdOf(ctx), workflowId, jobId)).attempts;
  // Cursors are bound to the job and its current attempt (a retry starts a new list: the old cursor is 400).
  const list = `logs:${jobId}:${attempt}`;
  checkCursorList(list, claimed);
  const rows = owned?.lines ?? [];
  const token = highlightToken(rows.slice(0, limit).map((l) => l.message));
  const { start, end } = highlightMarkers(token);
  // Highlights can make a message many times longer (markers around every character): the page ends at a budget.
  const logs = [];
  let length = 0;
  for (const line of rows.slice(0, limit)) {
    const message = match ? match.highlight(line.message, start, end) : line.message;
    if (logs.length > 0 && length + message.length > LOG_PAGE_MAX_TEXT) break;
    length += message.length;
    logs.push(presentLogEntry(line, message));
  }
  const last = rows[logs.length - 1];
  ctx.body = {
    id: jobId,
    workflow_id: workflowId,
    logs,
    cursor: rows.length > logs.length && last ? encodeCursor(list, { k: last.sequenceNum, id: jobId }) : '',
    highlight_token: token,
  } satisfies Wire<typeof logPageSchema>;
}

const noJob = problem('No such job of this workflow of yours.');
const noLogs = problem('The workflow does not retain logs (log_retention_disabled).');

export const logsOperations: readonly Operation[] = [
  {
    method: 'get',
    path: '/workflows/{workflow_id}/jobs/{job_id}/logs',
    summary: "List a job's log lines, newest first",
    description: "The lines of the job's current attempt. Cursors are bound to the job and that attempt.",
    access: 'session',
    heavy: true,
    parameters: [cursorParam, limitParam],
    responses: {
      '200': { description: 'A page.', content: json(logPageSchema) },
      '404': noJob,
      '412': problem('The workflow does not retain logs (log_retention_disabled): every HEARTBEAT workflow, CONTAINER with log_retention off.'),
    },
    handler: (deps, ctx) => logPage(deps, ctx, false),
  },
  {
    method: 'get',
    path: '/workflows/{workflow_id}/jobs/{job_id}/logs/search',
    summary: "Search a job's log lines, newest first, with highlights",
    access: 'session',
    heavy: true,
    parameters: [cursorParam, limitParam, searchTextParam('Each match is wrapped in `__CV_HL_START_<highlight_token>__` and `__CV_HL_END_<highlight_token>__`.'), streamParam],
    responses: {
      '200': { description: 'A page of matching lines; every match is wrapped in the start and end markers built from highlight_token.', content: json(logPageSchema) },
      '404': noJob,
      '412': noLogs,
    },
    handler: (deps, ctx) => logPage(deps, ctx, true),
  },
  {
    method: 'get',
    path: '/workflows/{workflow_id}/jobs/{job_id}/logs/lines',
    summary: "Read a job's log lines by position, oldest first",
    description:
      "An addition to the contract: the lines of the job's current attempt (or of `attempt`) from sequence_num `from`, with the number stored so far, so a viewer can open a log at its end, jump to any line, or show a search hit among the lines around it. Works while the job runs.",
    access: 'session',
    heavy: true,
    parameters: [fromParam, limitParam, attemptParam],
    responses: {
      '200': { description: 'The lines from `from` (fewer than `limit`, or none, past the end) and `total`.', content: json(logRangeSchema) },
      '404': noJob,
      '412': noLogs,
    },
    handler: logLines,
  },
  {
    method: 'get',
    path: '/workflows/{workflow_id}/jobs/{job_id}/logs/raw',
    summary: "Download a finished job's log, oldest first",
    description:
      'Streamed from the store in sequence_num order. txt: each message followed by a line feed; jsonl: one LogDownloadEntry per line, each followed by a line feed; json: one LogDownload document.',
    access: 'session',
    heavy: true,
    parameters: [
      { name: 'format', in: 'query', schema: { enum: [...DOWNLOAD_FORMATS], default: 'txt' } },
      streamParam,
      searchTextParam('No highlights in downloads.'),
      attemptParam,
    ],
    responses: {
      '200': {
        description:
          'The log, as an attachment named `<job_id>.<format>`: text/plain for txt, application/x-ndjson (one LogDownloadEntry per line) for jsonl, application/json (a LogDownload) for json.',
        headers: {
          'Content-Disposition': {
            description: '`attachment; filename="<job_id>.<format>"`',
            required: true,
            schema: { type: 'string', pattern: '^attachment; filename="[0-9a-f-]{36}\\.(txt|json|jsonl)"$' },
          },
        },
        content: { 'text/plain': {}, 'application/json': { schema: ref(logDownloadSchema) }, 'application/x-ndjson': {} },
      },
      '400': problem('Invalid format, stream, q, attempt or path parameter; or the job (asked for its current attempt) is not terminal yet (job_not_terminal).'),
      '404': noJob,
      '412': noLogs,
    },
    handler: rawLog,
  },
];
