import Router from '@koa/router';
import type { Context } from 'koa';
import { decodeCursor, encodeCursor, isUuid, notFound, OrlojError, validationError } from '@orloj/common/core';
import { NOTIFICATION_KINDS, type NotificationKind } from '@orloj/common/store';
import type { ApiDeps } from '../deps.js';
import { readJsonBody } from '../http/body.js';
import { presentNotification } from '../http/present.js';
import { requireSession } from '../http/session.js';
import { bodyValidator, QueryReader } from '../http/validate.js';
import { markNotificationsBody, type MarkNotificationsBody } from '../schemas.js';

const readMark = bodyValidator<MarkNotificationsBody>(markNotificationsBody);

export const NOTIFICATION_PAGE_SIZE = 50;
const LIST = 'notifications';

const userIdOf = (ctx: Context) => ctx.state.session.userId as string;

/** `kind`: a comma-separated list of notification kinds (docs/api.md, "Notifications"); undefined = every kind. */
function readKinds(q: QueryReader): NotificationKind[] | undefined {
  const text = q.string('kind', 200);
  if (text === undefined) return undefined;
  const kinds = text.split(',');
  if (!kinds.every((k): k is NotificationKind => (NOTIFICATION_KINDS as readonly string[]).includes(k))) {
    q.fail('kind', `must be one or more of ${NOTIFICATION_KINDS.join(', ')}, separated by commas`);
    return undefined;
  }
  return [...new Set(kinds)];
}

/**
 * Unread ones only unless `include_read=true`, as the reference
 * implementation lists them (its dashboard counts every listed notification
 * as unread). `unread=true` says the default; `unread=false` asks for the read
 * ones too, as it always did. Two parameters that contradict each other are 400.
 */
function readUnreadOnly(q: QueryReader): boolean {
  const unread = q.bool('unread');
  const includeRead = q.bool('include_read');
  if (unread !== undefined && includeRead !== undefined && unread === includeRead) {
    q.fail('include_read', `contradicts unread=${unread}: give one of them (include_read=true lists read notifications too; unread only by default)`);
  }
  return !(includeRead ?? unread === false);
}

export function notificationsRoutes(deps: ApiDeps): Router {
  const { store, clock } = deps;
  const router = new Router();
  const session = requireSession(deps.sessions, deps.config);

  router.get('/notifications', session, async (ctx) => {
    const q = new QueryReader(ctx.query);
    const cursor = q.string('cursor', 512);
    const unreadOnly = readUnreadOnly(q);
    const limit = q.int('limit', 1, 100) ?? NOTIFICATION_PAGE_SIZE;
    const kinds = readKinds(q);
    const stateChange = q.bool('state_change');
    q.done();
    const after = decodeCursor(LIST, cursor);
    const userId = userIdOf(ctx);
    const user = await store.users.findById(userId);
    if (!user) throw new OrlojError('unauthenticated', 'The account no longer exists.');
    // With preference NONE notifications are still recorded, but none is listed.
    const rows = user.notificationPreference === 'NONE' ? [] : await store.notifications.list({ userId, unreadOnly, kinds, stateChange, after, limit: limit + 1 });
    const page = rows.slice(0, limit);
    const last = page[page.length - 1];
    ctx.body = {
      notifications: page.map(presentNotification),
      cursor: rows.length > limit && last ? encodeCursor(LIST, { k: last.createdAt, id: last.id }) : '',
    };
  });

  router.put('/notifications', session, async (ctx) => {
    const body = readMark(await readJsonBody(ctx));
    const bad = body.ids.flatMap((id, i) => (isUuid(id) ? [] : [{ field: `ids.${i}`, message: 'must be a UUID' }]));
    if (bad.length) throw validationError(bad);
    const ids = [...new Set(body.ids)];
    const userId = userIdOf(ctx);
    await store.transaction(async (tx) => {
      if (!(await tx.notifications.markRead(userId, ids, clock.now()))) {
        throw notFound(ids.length === 1 ? 'The notification' : 'One or more of the notifications');
      }
    });
    ctx.status = 204;
  });

  return router;
}
