import type { Context } from 'koa';
import { OrlojError } from '@orloj/common/core';
import type { ApiDeps } from '../deps.js';
import { json } from '../contract/components.js';
import type { Operation } from '../contract/operation.js';
import { credentialsBody, credentialsDocument, registerBody, registrationDocument, type CredentialsBody, type RegisterBody } from '../contract/requests.js';
import { userSchema } from '../contract/responses.js';
import { problem, setCookies } from '../contract/shared.js';
import { readJsonBody } from '../http/body.js';
import { bodyValidator } from '../http/validate.js';
import { checkRegistration, insertAccount, newAccount, normalizeCredentials, normalizeEmail } from '../http/accounts.js';
import { dummyHash, verifyPassword } from '../http/password.js';
import { presentUser } from '../http/present.js';

const readCredentials = bodyValidator<CredentialsBody>(credentialsBody);
const readRegistration = bodyValidator<RegisterBody>(registerBody);

async function register({ store, sessions, clock, config }: ApiDeps, ctx: Context): Promise<void> {
  const body = readRegistration(await readJsonBody(ctx));
  const credentials = normalizeCredentials(body);
  const now = clock.now();
  const request = { email: credentials.email, invitation: body.invitation, now };
  // Before the hashing work, so a refused registration costs none; and again where the
  // account is inserted, so the first account of an empty installation is let in once.
  await checkRegistration(store, config, request);
  const user = await newAccount(credentials, now);
  await store.transaction(async (tx) => {
    await checkRegistration(tx, config, request, true);
    await insertAccount(tx, user);
    await sessions.begin(ctx, user.id, tx);
  });
  ctx.status = 201;
  ctx.body = presentUser(user);
}

async function login({ store, sessions, clock }: ApiDeps, ctx: Context): Promise<void> {
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
}

// Register and login have no session yet, so no CSRF cookie: the Origin rule alone keeps other sites' pages out.
export const authOperations: readonly Operation[] = [
  {
    method: 'post',
    path: '/auth/register',
    summary: 'Create an account and sign in',
    access: 'origin',
    authRateLimited: true,
    body: { schema: registrationDocument, required: true },
    responses: {
      '201': { description: 'Created; sets the session and csrf cookies.', headers: setCookies, content: json(userSchema) },
      '403': problem(
        'A cross-site origin (forbidden_origin); registration closed on this installation (registration_closed); or, when it registers by invitation, no invitation, or one not valid for this email or expired (invitation_invalid). The first account of an empty installation is always accepted.',
      ),
      '409': problem('The email is already registered.'),
    },
    handler: register,
  },
  {
    method: 'post',
    path: '/auth/login',
    summary: 'Sign in',
    access: 'origin',
    authRateLimited: true,
    body: { schema: credentialsDocument, required: true },
    responses: {
      '200': { description: 'Signed in; sets fresh cookies.', headers: setCookies, content: json(userSchema) },
      '401': problem('Invalid credentials (identical for unknown email and wrong password).'),
    },
    handler: login,
  },
  {
    method: 'post',
    path: '/auth/validate',
    summary: 'Check the session and CSRF state',
    access: 'session',
    responses: {
      '200': {
        description: 'Both are valid.',
        content: json({ type: 'object', required: ['email'], properties: { email: { type: 'string' } }, additionalProperties: false }),
      },
    },
    handler: async ({ store }, ctx) => {
      const user = await store.users.findById(ctx.state.session.userId as string);
      if (!user) throw new OrlojError('unauthenticated', 'The account no longer exists.');
      ctx.body = { email: user.email };
    },
  },
  {
    method: 'post',
    path: '/auth/logout',
    summary: 'Sign out: revokes the session and removes both cookies',
    access: 'session',
    responses: { '204': { description: 'Signed out; both cookies are expired (Max-Age=0).', headers: setCookies } },
    handler: async ({ sessions }, ctx) => {
      await sessions.end(ctx, ctx.state.session);
      ctx.status = 204;
    },
  },
];
