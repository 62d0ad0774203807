import { sql, type ExpressionBuilder } from 'kysely';
import type { Database } from '../schema.js';
import type { JobStatus } from '../../domain/job.js';

/** A subquery: a job of the given workflow (a column reference) in one of the statuses. */
export function openJobOf(
  selectFrom: ExpressionBuilder<Database, never>['selectFrom'],
  workflowRef: 'j.workflow_id',
  statuses: readonly JobStatus[],
) {
  return selectFrom('jobs as busy')
    .select(sql.lit(1).as('one'))
    .whereRef('busy.workflow_id', '=', workflowRef as never)
    .where('busy.status', 'in', statuses);
}

/**
 * A subquery: the users with at least `cap` jobs handed to the runners
 * (QUEUED or RUNNING), the per-user share (MAX_ACTIVE_JOBS_PER_USER). Their
 * due workflows and pending jobs wait until one of those jobs ends.
 */
export function saturatedUsers(selectFrom: ExpressionBuilder<Database, never>['selectFrom'], cap: number) {
  return selectFrom('jobs as active')
    .select('active.user_id')
    .where('active.status', 'in', ['QUEUED', 'RUNNING'])
    .groupBy('active.user_id')
    .having((eb) => eb.fn.countAll(), '>=', cap);
}
