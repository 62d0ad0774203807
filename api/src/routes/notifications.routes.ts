import type { Context } from 'koa';
import { decodeCursor, encodeCursor, isUuid, notFound, OrlojError, validationError } from '@orloj/common/core';
import { NOTIFICATION_KINDS, NOTIFICATION_STATE_CHANGES, type NotificationKind } from '@orloj/common/store';
import type { ApiDeps } from '../deps.js';
import { json, type Wire } from '../contract/components.js';
import type { Operation } from '../contract/operation.js';
import { markNotificationsBody, markNotificationsDocument, type MarkNotificationsBody } from '../contract/requests.js';
import { notificationPageSchema } from '../contract/responses.js';
import { cursorParam, problem } from '../contract/shared.js';
import { readJsonBody } from '../http/body.js';
import { presentNotification } from '../http/present.js';
import { bodyValidator, QueryReader } from '../http/validate.js';

const readMark = bodyValidator<MarkNotificationsBody>(markNotificationsBody);

export const NOTIFICATION_PAGE_SIZE = 50;
const limitParam = { name: 'limit', in: 'query', schema: { type: 'integer', minimum: 1, maximum: 100, default: NOTIFICATION_PAGE_SIZE } } as const;
const LIST = 'notifications';
const kindParam = {
  name: 'kind',
  in: 'query',
  description: `Only these kinds, comma-separated (e.g. WEB_ALERT,WEB_ERROR); every kind when absent. Kinds: ${NOTIFICATION_KINDS.join(', ')}.`,
  schema: { type: 'string', maxLength: 200, pattern: `^(${NOTIFICATION_KINDS.join('|')})(,(${NOTIFICATION_KINDS.join('|')}))*$` },
} as const;

const userIdOf = (ctx: Context) => ctx.state.session.userId as string;

/** `kind`: a comma-separated list of notification kinds (docs/api.md, "Notifications"); undefined = every kind. */
function readKinds(q: QueryReader): NotificationKind[] | undefined {
  const text = q.text(kindParam);
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

async function list({ store }: ApiDeps, ctx: Context): Promise<void> {
  const q = new QueryReader(ctx.query);
  const cursor = q.text(cursorParam);
  const unreadOnly = readUnreadOnly(q);
  const limit = q.integer(limitParam);
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
  } satisfies Wire<typeof notificationPageSchema>;
}

async function markRead({ store, clock }: ApiDeps, ctx: Context): Promise<void> {
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
}

export const notificationsOperations: readonly Operation[] = [
  {
    method: 'get',
    path: '/notifications',
    summary: 'List notifications, newest first',
    description:
      'Unread ones only, as the reference implementation lists them, unless include_read=true (then read ones too, carrying read_at). Empty while the notification preference is NONE (they are still recorded).',
    access: 'session',
    parameters: [
      cursorParam,
      {
        name: 'include_read',
        in: 'query',
        description: 'An addition to the contract. true: read notifications too (a history); false or absent: unread ones only.',
        schema: { type: 'boolean', default: false },
      },
      {
        name: 'unread',
        in: 'query',
        description: 'true: unread ones only (the default, accepted as such); false: read ones too, like include_read=true. Contradicting include_read is 400.',
        schema: { type: 'boolean', default: true },
      },
      kindParam,
      {
        name: 'state_change',
        in: 'query',
        description: `An addition to the contract. true: only state changes (payload \`state_change\` one of ${NOTIFICATION_STATE_CHANGES.join(', ')}); false: only the other notifications; both when absent. Combines with include_read, unread, kind and the cursor.`,
        schema: { type: 'boolean' },
      },
      limitParam,
    ],
    responses: { '200': { description: 'A page.', content: json(notificationPageSchema) } },
    handler: list,
  },
  {
    method: 'put',
    path: '/notifications',
    summary: 'Mark notifications read, all or none',
    description: 'A repeated id is ignored. Already-read notifications keep their first read_at.',
    access: 'session',
    body: { schema: markNotificationsDocument, required: true },
    responses: {
      '204': { description: 'Every listed notification is read.' },
      '404': problem("An id is missing or another user's; no notification was changed."),
    },
    handler: markRead,
  },
];
