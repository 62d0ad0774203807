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

