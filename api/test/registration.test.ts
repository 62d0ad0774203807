import assert from 'node:assert/strict';
import { mintInvitation } from '@orloj/api';
import { describeApi, uniqueEmail } from './support/harness.js';
import type { HttpResponse } from './support/client.js';

/**
 * REGISTRATION (docs/security.md, "Registration"): open, closed, or by
 * invitation; the first account of an empty installation is always let in.
 * Each block runs on a database of its own, empty at its first test.
 */
const credentials = () => ({ email: uniqueEmail(), password: 'correct horse' });

function assertRefused(res: HttpResponse, code: string): void {
  assert.equal(res.status, 403, res.text);
  assert.equal(res.headers['content-type'], 'application/problem+json');
  assert.equal(res.json.type, `urn:orloj:problem:${code}`);
  assert.equal(res.json.status, 403);
  assert.equal(res.json.code, code);
  assert.deepEqual(res.setCookies, [], 'no session for a refused registration');
}

describeApi(
  'registration closed (REGISTRATION=closed)',
  (h) => {
    it('lets exactly one of several concurrent first registrations in, then refuses every other with 403', async () => {
      const attempts = Array.from({ length: 5 }, credentials);
      const answers = await Promise.all(attempts.map((body) => h().client().post('/auth/register', body)));
      assert.deepEqual(
        answers.map((r) => r.status).sort(),
        [201, 403, 403, 403, 403],
        answers.map((r) => r.text).join('\n'),
      );
      for (const r of answers.filter((a) => a.status === 403)) assertRefused(r, 'registration_closed');
      // Only the first account exists: it signs in, the others do not.
      const signIns = await Promise.all(attempts.map((body) => h().client().post('/auth/login', body)));
      assert.deepEqual(signIns.map((r) => r.status).sort(), [200, 401, 401, 401, 401]);
    });

    it('refuses a registration with 403 registration_closed whatever it carries, before any other check', async () => {
      assertRefused(await h().client().post('/auth/register', credentials()), 'registration_closed');
      assertRefused(await h().client().post('/auth/register', { ...credentials(), invitation: mintInvitation(h().config, 'x@example.com', Date.now() + 60_000) }), 'registration_closed');
      // Bad input is still 400 naming the field; the refusal does not say whether an email is taken.
      assert.equal((await h().client().post('/auth/register', { email: 'nope', password: 'correct horse' })).status, 400);
    });

  },
  { env: { REGISTRATION: 'closed' } },
);

describeApi(
  'registration by invitation (REGISTRATION=invitation)',
  (h) => {
    const invite = (email: string, validMs = 60_000) => mintInvitation(h().config, email, Date.now() + validMs);

    it('lets the first account in without an invitation', async () => {
      assert.equal((await h().client().post('/auth/register', credentials())).status, 201);
    });

    it('answers 403 invitation_invalid naming `invitation` without one, or with one for another email, expired or forged', async () => {
      const body = credentials();
      const none = await h().client().post('/auth/register', body);
      assertRefused(none, 'invitation_invalid');
      assert.deepEqual(none.json.errors, [{ field: 'invitation', message: 'is required' }]);
      const other = invite('someone.else@example.com');
      const forged = `${Math.floor(Date.now() / 1000) + 600}.${'A'.repeat(43)}`;
      for (const invitation of [other, invite(body.email, -1_000), forged, 'not-an-invitation']) {
        const res = await h().client().post('/auth/register', { ...body, invitation });
        assertRefused(res, 'invitation_invalid');
        assert.deepEqual(res.json.errors, [{ field: 'invitation', message: 'is not valid for this email or has expired' }]);
      }
      assert.equal((await h().client().post('/auth/login', body)).status, 401, 'no account was made');
    });

    it('creates the account with a valid invitation (any case and spacing of the email), once', async () => {
      const body = credentials();
      const invitation = invite(body.email);
      const res = await h().client().post('/auth/register', { email: ` ${body.email.toUpperCase()} `, password: body.password, invitation });
      assert.equal(res.status, 201, res.text);
      assert.equal(res.setCookies.length, 2);
      // Used: the email is registered now.
      assert.equal((await h().client().post('/auth/register', { ...body, invitation })).status, 409);
      assert.equal((await h().client().post('/auth/login', body)).status, 200);
    });
  },
  { env: { REGISTRATION: 'invitation' } },
);

describeApi('registration open (the default)', (h) => {
  it('registers anyone, an invitation or not', async () => {
    assert.equal(h().config.registration, 'open');
    assert.equal((await h().client().post('/auth/register', credentials())).status, 201);
    assert.equal((await h().client().post('/auth/register', { ...credentials(), invitation: 'ignored' })).status, 201);
  });
});
