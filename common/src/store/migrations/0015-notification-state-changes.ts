import { sql, type Kysely } from 'kysely';
import type { DialectHelpers } from '../dialect.js';

/**
 * Which notifications are state changes (docs/notifications.md, "State
 * changes"): `state_change` is `down`, `recovered`, `terminated` or
 * `build_failed`, null for the rest, so `GET /notifications?state_change=true`
 * reads them by an index of their own however many routine ones there are.
 *
 * Rows from before it are marked as the notifier marks new ones, in the
 * column and in the payload (`"state_change"` appended to the JSON object):
 *  - the fifth kind an earlier version made, WEB_RECOVERED, becomes the
 *    contract's WEB_SUCCESS, marked `recovered`;
 *  - failed builds and automatic terminations, by their event identity;
 *  - a failed job whose run before it (COMPLETED or FAILED, in the order the
 *    health state reads them) did not fail, or that had none: `down`.
 */
export async function up(db: Kysely<any>, _d: DialectHelpers): Promise<void> {
  await db.schema.alterTable('notifications').addColumn('state_change', 'text').execute();
  await db.schema
    .createIndex('notifications_state_change_idx')
    .on('notifications')
    .columns(['user_id', 'created_at desc', 'id desc'])
    .where(sql.ref('state_change'), 'is not', null)
    .execute();

  await sql`update notifications set kind = 'WEB_SUCCESS', state_change = 'recovered' where kind = 'WEB_RECOVERED'`.execute(db);
  await sql`update notifications set state_change = 'build_failed' where state_change is null and dedupe_key like '%:build.failed:%'`.execute(db);
  await sql`update notifications set state_change = 'terminated'
    where state_change is null and kind = 'WEB_ALERT' and dedupe_key like '%:workflow.terminated:%'`.execute(db);
  await sql`update notifications set state_change = 'down'
    where state_change is null and kind = 'WEB_ERROR' and dedupe_key like '%:job.failed:%' and dedupe_key in (
      select cast(r.user_id as text) || ':job.failed:' || cast(r.id as text) from (
        select j.id, j.user_id, j.status,
          lag(j.status) over (partition by j.workflow_id order by j.scheduled_at, j.id) as before_status
        from jobs j where j.status in ('COMPLETED', 'FAILED')
      ) r
      where r.status = 'FAILED' and (r.before_status is null or r.before_status <> 'FAILED'))`.execute(db);
  // The payload says it too, as the notifier writes it: the field last in the object.
  await sql`update notifications
    set payload = substr(payload, 1, length(payload) - 1) || ',"state_change":"' || state_change || '"}'
    where state_change is not null and payload like '{%"%}' and payload not like '%"state_change"%'`.execute(db);
}
