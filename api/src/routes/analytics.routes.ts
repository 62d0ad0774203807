import { isUuid, notFound } from '@orloj/common/core';
import { json } from '../contract/components.js';
import type { Operation } from '../contract/operation.js';
import { userAnalyticsSchema, workflowAnalyticsSchema } from '../contract/responses.js';
import { problem } from '../contract/shared.js';
import { presentUserAnalytics, presentWorkflowAnalytics } from '../http/present.js';
import { requireUuidParam } from '../http/validate.js';

/** Analytics are counters the notifier keeps from domain events (docs/notifications.md). */
export const analyticsOperations: readonly Operation[] = [
  {
    method: 'get',
    path: '/analytics',
    summary: "The signed-in user's analytics",
    description: 'Counters kept from domain events; eventually consistent (docs/notifications.md).',
    access: 'session',
    responses: { '200': { description: 'The totals.', content: json(userAnalyticsSchema) } },
    handler: async ({ store }, ctx) => {
      ctx.body = presentUserAnalytics(await store.analytics.forUser(ctx.state.session.userId as string));
    },
  },
  {
    method: 'get',
    path: '/analytics/{workflow_id}',
    summary: "A workflow's analytics",
    description: 'A deleted workflow of yours still answers with its final totals.',
    access: 'session',
    responses: {
      '200': { description: 'The totals.', content: json(workflowAnalyticsSchema) },
      '404': problem('The workflow never was yours.'),
    },
    handler: async ({ store }, ctx) => {
      const workflowId = requireUuidParam('workflow_id', ctx.params.workflow_id, isUuid);
      // A deleted workflow of the caller still answers with its final totals.
      const totals = await store.analytics.forWorkflow(ctx.state.session.userId as string, workflowId);
      if (!totals) throw notFound('The workflow');
      ctx.body = presentWorkflowAnalytics(workflowId, totals);
    },
  },
];
