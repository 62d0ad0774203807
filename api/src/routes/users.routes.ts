import { OrlojError } from '@orloj/common/core';
import { json } from '../contract/components.js';
import type { Operation } from '../contract/operation.js';
import { updateUserBody, type UpdateUserBody } from '../contract/requests.js';
import { userSchema } from '../contract/responses.js';
import { readJsonBody } from '../http/body.js';
import { bodyValidator } from '../http/validate.js';
import { presentUser } from '../http/present.js';

const readUpdate = bodyValidator<UpdateUserBody>(updateUserBody);

export const usersOperations: readonly Operation[] = [
  {
    method: 'get',
    path: '/users',
    summary: 'The signed-in user',
    access: 'session',
    responses: { '200': { description: 'The user.', content: json(userSchema) } },
    handler: async ({ store }, ctx) => {
      const user = await store.users.findById(ctx.state.session.userId as string);
      if (!user) throw new OrlojError('unauthenticated', 'The account no longer exists.');
      ctx.body = presentUser(user);
    },
  },
  {
    method: 'put',
    path: '/users',
    summary: 'Update the notification preference',
    access: 'session',
    body: { schema: updateUserBody, required: true },
    responses: { '204': { description: 'Updated.' } },
    handler: async ({ store, clock }, ctx) => {
      const body = readUpdate(await readJsonBody(ctx));
      await store.users.setNotificationPreference(ctx.state.session.userId as string, body.notification_preference, clock.now());
      ctx.status = 204;
    },
  },
];
