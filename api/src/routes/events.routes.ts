import Router from '@koa/router';
import type { Context } from 'koa';
import { isOrlojError, OrlojError } from '@orloj/common/core';
import type { ApiDeps } from '../deps.js';
import { problemOf, withHeaders } from '../http/problem.js';
import { requireSession } from '../http/session.js';
import { SseStream } from '../http/sse.js';
import { QueryReader } from '../http/validate.js';
import { logPathParams, openJobLogs } from './logs.routes.js';

const MAX_SEQUENCE = 2_147_483_647;

/**
 * Where a (re)connecting client left off: the Last-Event-ID header (sent by
 * EventSource on reconnection, so it wins over `since`, which stays in the
 * URL), else the `lastEventId` query parameter (what EventSource polyfills
 * send instead of the header), else `since`, else -1 (every stored line).
 * `resumed`: the client says it is reconnecting (header or lastEventId).
 */
function resumeAfter(ctx: Context, q: QueryReader): { after: number; resumed: boolean } {
  const since = q.int('since', 0, MAX_SEQUENCE);
  const alias = q.int('lastEventId', 0, MAX_SEQUENCE);
  const header = ctx.get('Last-Event-ID').trim();
  if (header !== '') {
    if (!/^\d{1,10}$/.test(header) || Number(header) > MAX_SEQUENCE) {
      q.fail('Last-Event-ID', `must be a sequence_num: an integer from 0 to ${MAX_SEQUENCE}`);
      return { after: -1, resumed: false };
    }
    return { after: Number(header), resumed: true };
  }
  if (alias !== undefined) return { after: alias, resumed: true };
  return { after: since ?? -1, resumed: false };
}

const TERMINAL: ReadonlySet<string> = new Set(['COMPLETED', 'FAILED', 'CANCELED']);

export function eventsRoutes(deps: ApiDeps): Router {
  const { store, tails } = deps;
  const router = new Router();
  const session = requireSession(deps.sessions, deps.config);

  /**
   * Live tail of a job's log as server-sent events: `connected`, then one
   * `log` event per line (id = sequence_num), `end` once the job is terminal
   * and its lines are all sent; `error` (data = problem document) instead
   * when the open is refused (not found, retention off), then the stream
   * closes. Request errors (401, 400, 429) are plain problem responses.
   */
  router.get('/workflows/:workflow_id/jobs/:job_id/events', session, async (ctx) => {
    const { workflowId, jobId } = logPathParams(ctx);
    const q = new QueryReader(ctx.query);
    const { after, resumed } = resumeAfter(ctx, q);
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
      if (access && TERMINAL.has(access.status) && (await store.logQueries.after({ jobId, attempt: access.attempts, after, limit: 1 })).length === 0) {
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
      await tails.open({ sse, jobId, workflowId, attempt: opened.attempts, after });
    } catch (err) {
      sse.body.destroy();
      release();
      throw err;
    }
  });

  return router;
}
