import Router from '@koa/router';
import { isUuid, notFound } from '@orloj/common/core';
import type { ApiDeps } from '../deps.js';
import { presentUserAnalytics, presentWorkflowAnalytics } from '../http/present.js';
import { requireSession } from '../http/session.js';
import { requireUuidParam } from '../http/validate.js';

/** Analytics are counters the notifier keeps from domain events (docs/notifications.md). */
export function analyticsRoutes(deps: ApiDeps): Router {
  const { store } = deps;
  const router = new Router();
  const session = requireSession(deps.sessions, deps.config);

  router.get('/analytics', session, async (ctx) => {
    ctx.body = presentUserAnalytics(await store.analytics.forUser(ctx.state.session.userId as string));
  });

  router.get('/analytics/:workflow_id', session, async (ctx) => {
    const workflowId = requireUuidParam('workflow_id', ctx.params.workflow_id, isUuid);
    // A deleted workflow of the caller still answers with its final totals.
    const totals = await store.analytics.forWorkflow(ctx.state.session.userId as string, workflowId);
    if (!totals) throw notFound('The workflow');
    ctx.body = presentWorkflowAnalytics(workflowId, totals);
  });

  return router;
}
