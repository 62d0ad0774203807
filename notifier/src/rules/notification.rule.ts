import type { DomainEvent, JobEvent } from '@orloj/common/domain';
import type { NotificationKind, NotificationStateChange } from '@orloj/common/store';

/** What a user sees of an event (api-decisions.md, Notifications); the payload is stored as JSON text. */
export interface NotificationContent {
  kind: NotificationKind;
  /** The workflow's state changed (docs/notifications.md, "State changes"); also in the payload, and stored for the api's filter. */
  stateChange?: NotificationStateChange;
  payload: {
    title: string;
    message: string;
    entity_type: 'WORKFLOW' | 'JOB';
    entity_id: string;
    workflow_id: string;
    action_url: string;
    /** Present only on a state change. */
    state_change?: NotificationStateChange;
  };
}

function content(kind: NotificationKind, payload: Omit<NotificationContent['payload'], 'state_change'>, stateChange?: NotificationStateChange): NotificationContent {
  return stateChange ? { kind, stateChange, payload: { ...payload, state_change: stateChange } } : { kind, payload };
}

function forWorkflow(e: DomainEvent, kind: NotificationKind, title: string, message: string, stateChange?: NotificationStateChange): NotificationContent {
  return content(
    kind,
    { title, message, entity_type: 'WORKFLOW', entity_id: e.workflow_id, workflow_id: e.workflow_id, action_url: `/workflows/${e.workflow_id}` },
    stateChange,
  );
}

function forJob(e: JobEvent, kind: NotificationKind, title: string, message: string, stateChange?: NotificationStateChange): NotificationContent {
  const jobId = e.data.job_id;
  return content(
    kind,
    { title, message, entity_type: 'JOB', entity_id: jobId, workflow_id: e.workflow_id, action_url: `/workflows/${e.workflow_id}/jobs/${jobId}` },
    stateChange,
  );
}

/**
 * The notification an event produces, or undefined for events users are not
 * notified of (a workflow created or deleted: they did it themselves, and a
 * deleted workflow's notifications go with it; a failure or a recovery
 * while the workflow's alerts were muted). Kinds are the contract's
 * four; a state change (down, recovered, terminated automatically, build
 * failed) is marked by `stateChange`, not by a kind of its own.
 */
export function notificationFor(e: DomainEvent): NotificationContent | undefined {
  const name = JSON.stringify(e.data.workflow_name);
  switch (e.kind) {
    case 'build.completed':
      return forWorkflow(e, 'WEB_SUCCESS', 'Build completed', `Workflow ${name} is built; its runs are scheduled.`);
    case 'build.failed':
      return forWorkflow(e, 'WEB_ERROR', 'Build failed', `Workflow ${name} could not be built; it will not run until it is updated.`, 'build_failed');
    case 'job.completed':
      return forJob(e, 'WEB_SUCCESS', 'Job completed', `A job of workflow ${name} completed.`);
    case 'job.failed': {
      // A maintenance window or a snooze muted it (docs/adr/0019-maintenance-windows.md): the run is recorded, nobody alerted.
      if (e.data.muted) return undefined;
      const message = `A job of workflow ${name} failed: ${e.data.reason_message ?? 'The job failed.'}`;
      // Every failure has its notification; only the one that turns the workflow down is a state change.
      return e.data.down
        ? forJob(e, 'WEB_ERROR', 'Job failed', `${message} The workflow is down.`, 'down')
        : forJob(e, 'WEB_ERROR', 'Job failed', message);
    }
    case 'job.canceled':
      return forJob(e, 'WEB_INFO', 'Job canceled', `A job of workflow ${name} was canceled: ${e.data.reason_message ?? 'The job was canceled.'}`);
    case 'workflow.terminated': {
      const t = e.data;
      return t.automatic
        ? forWorkflow(
            e,
            'WEB_ALERT',
            'Workflow terminated automatically',
            `Workflow ${name} was terminated automatically after ${t.consecutive_failures} consecutive failed jobs (its limit is ${t.max_consecutive_failures}). Update it to resume.`,
            'terminated',
          )
        : forWorkflow(e, 'WEB_INFO', 'Workflow terminated', `Workflow ${name} was terminated by you.`);
    }
    case 'workflow.recovered': {
      if (e.data.muted) return undefined;
      const failures = e.data.consecutive_failures;
      const after = failures > 0 ? `${failures} consecutive failed job${failures === 1 ? '' : 's'}` : 'failed jobs';
      return forWorkflow(e, 'WEB_SUCCESS', 'Workflow recovered', `Workflow ${name} is up again: a job completed after ${after}.`, 'recovered');
    }
    case 'workflow.created':
    case 'workflow.deleted':
      return undefined;
  }
}
