import Router from '@koa/router';
import { OrlojError } from '@orloj/common/core';
import type { ApiDeps } from '../deps.js';
import { readJsonBody } from '../http/body.js';
import { bodyValidator } from '../http/validate.js';
import { presentUser } from '../http/present.js';
import { requireSession } from '../http/session.js';
import { updateUserBody, type UpdateUserBody } from '../schemas.js';

const readUpdate = bodyValidator<UpdateUserBody>(updateUserBody);

export function usersRoutes(deps: ApiDeps): Router {
  const { store, clock } = deps;
  const router = new Router();
  const session = requireSession(deps.sessions, deps.config);

  router.get('/users', session, async (ctx) => {
    const user = await store.users.findById(ctx.state.session.userId as string);
    if (!user) throw new OrlojError('unauthenticated', 'The account no longer exists.');
    ctx.body = presentUser(user);
  });

  router.put('/users', session, async (ctx) => {
    const body = readUpdate(await readJsonBody(ctx));
    await store.users.setNotificationPreference(ctx.state.session.userId as string, body.notification_preference, clock.now());
    ctx.status = 204;
  });

  return router;
}
