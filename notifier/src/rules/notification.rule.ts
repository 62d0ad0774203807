import type { DomainEvent, JobEventData, RecoveryEventData, TerminationEventData } from '@orloj/common/domain';
import type { NotificationKind } from '@orloj/common/store';

/** What a user sees of an event (api-decisions.md, Notifications); the payload is stored as JSON text. */
export interface NotificationContent {
  kind: NotificationKind;
  payload: {
    title: string;
    message: string;
    entity_type: 'WORKFLOW' | 'JOB';
    entity_id: string;
    workflow_id: string;
    action_url: string;
  };
}

function forWorkflow(e: DomainEvent, kind: NotificationKind, title: string, message: string): NotificationContent {
  return {
    kind,
    payload: { title, message, entity_type: 'WORKFLOW', entity_id: e.workflow_id, workflow_id: e.workflow_id, action_url: `/workflows/${e.workflow_id}` },
  };
}

function forJob(e: DomainEvent, kind: NotificationKind, title: string, message: string): NotificationContent {
  const jobId = (e.data as JobEventData).job_id;
  return {
    kind,
    payload: { title, message, entity_type: 'JOB', entity_id: jobId, workflow_id: e.workflow_id, action_url: `/workflows/${e.workflow_id}/jobs/${jobId}` },
  };
}

/**
 * The notification an event produces, or undefined for events users are not
 * notified of (a workflow created or deleted: they did it themselves, and a
 * deleted workflow's notifications go with it).
 */
export function notificationFor(e: DomainEvent): NotificationContent | undefined {
  const name = JSON.stringify(e.data.workflow_name);
  switch (e.kind) {
    case 'build.completed':
      return forWorkflow(e, 'WEB_SUCCESS', 'Build completed', `Workflow ${name} is built; its runs are scheduled.`);
    case 'build.failed':
      return forWorkflow(e, 'WEB_ERROR', 'Build failed', `Workflow ${name} could not be built; it will not run until it is updated.`);
    case 'job.completed':
      return forJob(e, 'WEB_SUCCESS', 'Job completed', `A job of workflow ${name} completed.`);
    case 'job.failed':
      return forJob(e, 'WEB_ERROR', 'Job failed', `A job of workflow ${name} failed: ${(e.data as JobEventData).reason_message ?? 'The job failed.'}`);
    case 'job.canceled':
      return forJob(e, 'WEB_INFO', 'Job canceled', `A job of workflow ${name} was canceled: ${(e.data as JobEventData).reason_message ?? 'The job was canceled.'}`);
    case 'workflow.terminated': {
      const t = e.data as TerminationEventData;
      return t.automatic
        ? forWorkflow(
            e,
            'WEB_ALERT',
            'Workflow terminated automatically',
            `Workflow ${name} was terminated automatically after ${t.consecutive_failures} consecutive failed jobs (its limit is ${t.max_consecutive_failures}). Update it to resume.`,
          )
        : forWorkflow(e, 'WEB_INFO', 'Workflow terminated', `Workflow ${name} was terminated by you.`);
    }
    case 'workflow.recovered': {
      const failures = (e.data as RecoveryEventData).consecutive_failures;
      const after = failures > 0 ? `${failures} consecutive failed job${failures === 1 ? '' : 's'}` : 'failed jobs';
      return forWorkflow(e, 'WEB_RECOVERED', 'Workflow recovered', `Workflow ${name} is up again: a job completed after ${after}.`);
    }
    case 'workflow.created':
    case 'workflow.deleted':
      return undefined;
  }
}
