import Router from '@koa/router';
import { OrlojError } from '@orloj/common/core';
import type { ApiDeps } from '../deps.js';
import { readJsonBody } from '../http/body.js';
import { bodyValidator } from '../http/validate.js';
import { checkRegistration, insertAccount, newAccount, normalizeCredentials, normalizeEmail } from '../http/accounts.js';
import { dummyHash, verifyPassword } from '../http/password.js';
import { presentUser } from '../http/present.js';
import { requireOwnOrigin, requireSession } from '../http/session.js';
import { credentialsBody, registerBody, type CredentialsBody, type RegisterBody } from '../schemas.js';

const readCredentials = bodyValidator<CredentialsBody>(credentialsBody);
const readRegistration = bodyValidator<RegisterBody>(registerBody);

export function authRoutes(deps: ApiDeps): Router {
  const { store, sessions, clock } = deps;
  const router = new Router();
  const session = requireSession(sessions, deps.config);
  // No session yet, so no CSRF cookie: the Origin rule alone keeps other sites' pages out.
  const ownOrigin = requireOwnOrigin(deps.config);

  router.post('/auth/register', ownOrigin, async (ctx) => {
    const body = readRegistration(await readJsonBody(ctx));
    const credentials = normalizeCredentials(body);
    const now = clock.now();
    const request = { email: credentials.email, invitation: body.invitation, now };
    // Before the hashing work, so a refused registration costs none; and again where the
    // account is inserted, so the first account of an empty installation is let in once.
    await checkRegistration(store, deps.config, request);
    const user = await newAccount(credentials, now);
    await store.transaction(async (tx) => {
      await checkRegistration(tx, deps.config, request, true);
      await insertAccount(tx, user);
      await sessions.begin(ctx, user.id, tx);
    });
    ctx.status = 201;
    ctx.body = presentUser(user);
  });

  router.post('/auth/login', ownOrigin, async (ctx) => {
    const body = readCredentials(await readJsonBody(ctx));
    const email = normalizeEmail(body.email);
    const user = await store.users.findByEmail(email);
    // Same work and same answer whether or not the email exists.
    const ok = await verifyPassword(body.password, user?.passwordHash ?? (await dummyHash));
    if (!user || !ok) throw new OrlojError('invalid_credentials', 'The email or password is incorrect.');
    const previous = await sessions.current(ctx);
    if (previous) await store.sessions.revoke(previous.id, clock.now());
    await sessions.begin(ctx, user.id);
    ctx.body = presentUser(user);
  });

  router.post('/auth/validate', session, async (ctx) => {
    const user = await store.users.findById(ctx.state.session.userId as string);
    if (!user) throw new OrlojError('unauthenticated', 'The account no longer exists.');
    ctx.body = { email: user.email };
  });

  router.post('/auth/logout', session, async (ctx) => {
    await sessions.end(ctx, ctx.state.session);
    ctx.status = 204;
  });

  return router;
}
