import Router from '@koa/router';
import { Ajv } from 'ajv';
import addFormats from 'ajv-formats';
import { newId, OrlojError, validationError } from '@orloj/common/core';
import type { ApiDeps } from '../deps.js';
import { readJsonBody } from '../http/body.js';
import { bodyValidator } from '../http/validate.js';
import { dummyHash, hashPassword, verifyPassword } from '../http/password.js';
import { presentUser } from '../http/present.js';
import { requireOwnOrigin, requireSession } from '../http/session.js';
import { credentialsBody, type CredentialsBody } from '../schemas.js';

const formats = new Ajv();
(addFormats as unknown as (a: Ajv, only: string[]) => void)(formats, ['email']);
const isEmail = formats.compile({ type: 'string', format: 'email' });

const readCredentials = bodyValidator<CredentialsBody>(credentialsBody);

/** Email trimmed and lower-cased; password 8 to 128 characters. */
function normalizeCredentials(body: CredentialsBody): CredentialsBody {
  const email = body.email.trim().toLowerCase();
  const errors = [];
  if (Buffer.byteLength(email, 'utf8') > 254 || !isEmail(email)) {
    errors.push({ field: 'email', message: 'must be a valid email address of at most 254 bytes' });
  }
  const length = [...body.password].length;
  if (length < 8 || length > 128) errors.push({ field: 'password', message: 'must be 8 to 128 characters' });
  if (errors.length) throw validationError(errors);
  return { email, password: body.password };
}

export function authRoutes(deps: ApiDeps): Router {
  const { store, sessions, clock } = deps;
  const router = new Router();
  const session = requireSession(sessions, deps.config);
  // No session yet, so no CSRF cookie: the Origin rule alone keeps other sites' pages out.
  const ownOrigin = requireOwnOrigin(deps.config);

  router.post('/auth/register', ownOrigin, async (ctx) => {
    const { email, password } = normalizeCredentials(readCredentials(await readJsonBody(ctx)));
    const passwordHash = await hashPassword(password);
    const now = clock.now();
    const user = { id: newId(), email, passwordHash, notificationPreference: 'ALL' as const, createdAt: now, updatedAt: now };
    await store.transaction(async (tx) => {
      if (!(await tx.users.insert(user))) {
        throw new OrlojError('email_taken', 'An account with this email already exists.', {
          fields: [{ field: 'email', message: 'is already registered' }],
        });
      }
      await sessions.begin(ctx, user.id, tx);
    });
    ctx.status = 201;
    ctx.body = presentUser(user);
  });

  router.post('/auth/login', ownOrigin, async (ctx) => {
    const body = readCredentials(await readJsonBody(ctx));
    const email = body.email.trim().toLowerCase();
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
