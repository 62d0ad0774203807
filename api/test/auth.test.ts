import assert from 'node:assert/strict';
import { describeApi, uniqueEmail } from './support/harness.js';
import { TestClient } from './support/client.js';

function cookieAttributes(setCookies: string[], name: string): Map<string, string> {
  const line = setCookies.find((c) => c.startsWith(`${name}=`));
  assert.ok(line, `Set-Cookie for ${name} missing`);
  const attrs = new Map<string, string>();
  for (const part of line.split(';').slice(1)) {
    const [k, v = ''] = part.trim().split('=');
    attrs.set(k!.toLowerCase(), v);
  }
  return attrs;
}

describeApi('auth', (h) => {
  describe('POST /auth/register', () => {
    it('creates the user, answers 201 with it and sets both cookies', async () => {
      const c = h().client();
      const email = uniqueEmail();
      const res = await c.post('/auth/register', { email: `  ${email.toUpperCase()} `, password: 'password123' });
      assert.equal(res.status, 201);
      assert.equal(res.json.email, email);
      assert.equal(res.json.notification_preference, 'ALL');
      assert.match(res.json.created_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      assert.ok(c.cookies.has('session'));
      assert.ok(c.cookies.has('csrf'));
    });

    it('sets HttpOnly, SameSite=Lax, Path=/ cookies with the configured Max-Age and no Secure on http', async () => {
      const res = await h().client().post('/auth/register', { email: uniqueEmail(), password: 'password123' });
      for (const name of ['session', 'csrf']) {
        const attrs = cookieAttributes(res.setCookies, name);
        assert.ok(attrs.has('httponly'), `${name} HttpOnly`);
        assert.equal(attrs.get('samesite'), 'Lax');
        assert.equal(attrs.get('path'), '/');
        assert.equal(attrs.get('max-age'), String(7 * 24 * 3600));
        assert.ok(!attrs.has('secure'), `${name} not Secure on http`);
      }
    });

    it('answers 409 for an email that is already registered, in any case', async () => {
      const email = uniqueEmail();
      assert.equal((await h().client().post('/auth/register', { email, password: 'password123' })).status, 201);
      const res = await h().client().post('/auth/register', { email: email.toUpperCase(), password: 'password456' });
      assert.equal(res.status, 409);
      assert.equal(res.json.code, 'email_taken');
    });

    it('answers 400 naming each invalid field', async () => {
      const res = await h().client().post('/auth/register', { email: 'not-an-email', password: 'short' });
      assert.equal(res.status, 400);
      assert.equal(res.headers['content-type'], 'application/problem+json');
      assert.deepEqual(res.json.errors.map((e: { field: string }) => e.field).sort(), ['password']);
      const res2 = await h().client().post('/auth/register', { email: 'not-an-email', password: 'long enough' });
      assert.deepEqual(res2.json.errors.map((e: { field: string }) => e.field), ['email']);
      const res3 = await h().client().post('/auth/register', { email: uniqueEmail(), password: 'x'.repeat(129) });
      assert.deepEqual(res3.json.errors.map((e: { field: string }) => e.field), ['password']);
      const res4 = await h().client().post('/auth/register', { email: uniqueEmail() });
      assert.deepEqual(res4.json.errors, [{ field: 'password', message: 'is required' }]);
    });
  });

  describe('POST /auth/login', () => {
    it('signs in with fresh cookies and answers the user', async () => {
      const email = uniqueEmail();
      await h().client().post('/auth/register', { email, password: 'password123' });
      const c = h().client();
      const res = await c.post('/auth/login', { email, password: 'password123' });
      assert.equal(res.status, 200);
      assert.equal(res.json.email, email);
      assert.equal((await c.post('/auth/validate')).status, 200);
    });

    it('answers an identical 401 for an unknown email and for a wrong password', async () => {
      const email = uniqueEmail();
      await h().client().post('/auth/register', { email, password: 'password123' });
      const wrong = await h().client().post('/auth/login', { email, password: 'password124' });
      const unknown = await h().client().post('/auth/login', { email: uniqueEmail(), password: 'password123' });
      assert.equal(wrong.status, 401);
      assert.equal(unknown.status, 401);
      assert.equal(wrong.text, unknown.text);
      assert.equal(wrong.json.code, 'invalid_credentials');
      assert.deepEqual(wrong.setCookies, []);
    });

    it('revokes the session it replaces', async () => {
      const c = await h().user();
      const old = c.clone();
      assert.equal((await c.post('/auth/login', { email: c.email, password: 'correct horse' })).status, 200);
      assert.equal((await old.get('/users')).status, 401);
      assert.equal((await c.get('/users')).status, 200);
    });
  });

  describe('POST /auth/validate', () => {
    it('answers 200 with the email when session and CSRF are valid', async () => {
      const c = await h().user();
      const res = await c.post('/auth/validate');
      assert.equal(res.status, 200);
      assert.deepEqual(res.json, { email: c.email });
    });

    it('answers 401 without a session, and 401 for a forged session cookie', async () => {
      assert.equal((await h().client().post('/auth/validate')).status, 401);
      const forged = h().client();
      forged.cookies.set('session', 'Fe26.2*1*forged');
      forged.cookies.set('csrf', '1.x');
      const res = await forged.post('/auth/validate');
      assert.equal(res.status, 401);
      assert.equal(res.json.code, 'unauthenticated');
    });

    it('answers 403 csrf_failed when the CSRF cookie is missing', async () => {
      const c = await h().user();
      c.cookies.delete('csrf');
      const res = await c.post('/auth/validate');
      assert.equal(res.status, 403);
      assert.equal(res.json.code, 'csrf_failed');
    });

    it('answers 403 when the CSRF cookie is wrong', async () => {
      const c = await h().user();
      const [issued, mac] = c.cookies.get('csrf')!.split('.');
      c.cookies.set('csrf', `${issued}.${mac!.slice(0, -2)}AA`);
      assert.equal((await c.post('/auth/validate')).status, 403);
      c.cookies.set('csrf', `${Number(issued) + 1}.${mac}`);
      assert.equal((await c.post('/auth/validate')).status, 403);
    });

    it('answers 403 for a CSRF cookie issued to another session', async () => {
      const a = await h().user();
      const b = await h().user();
      a.cookies.set('csrf', b.cookies.get('csrf')!);
      assert.equal((await a.post('/auth/validate')).status, 403);
    });

    it('answers 403 when an X-CSRF-Token header does not match the cookie', async () => {
      const c = await h().user();
      assert.equal((await c.post('/auth/validate', undefined, { headers: { 'x-csrf-token': 'nope' } })).status, 403);
      assert.equal((await c.post('/auth/validate', undefined, { headers: { 'x-csrf-token': c.cookies.get('csrf')! } })).status, 200);
    });

    it('refuses a mutating request from a foreign origin but accepts its own', async () => {
      const c = await h().user();
      const foreign = await c.post('/auth/validate', undefined, { headers: { origin: 'https://evil.example' } });
      assert.equal(foreign.status, 403);
      const own = await c.post('/auth/validate', undefined, { headers: { origin: h().config.serverHostUrl } });
      assert.equal(own.status, 200);
      const crossSite = await c.post('/auth/validate', undefined, { headers: { 'sec-fetch-site': 'cross-site', origin: 'null' } });
      assert.equal(crossSite.status, 403);
    });

    it('does not require CSRF on GET', async () => {
      const c = await h().user();
      c.cookies.delete('csrf');
      assert.equal((await c.get('/users')).status, 200);
    });
  });

  describe('POST /auth/logout', () => {
    it('answers 204, expires both cookies and revokes the session so a copied cookie stops working', async () => {
      const c = await h().user();
      const copy = c.clone();
      const res = await c.post('/auth/logout');
      assert.equal(res.status, 204);
      assert.equal(res.text, '');
      for (const name of ['session', 'csrf']) assert.equal(cookieAttributes(res.setCookies, name).get('max-age'), '0');
      assert.equal(c.cookies.size, 0);
      assert.equal((await copy.get('/users')).status, 401);
      assert.equal((await copy.post('/auth/validate')).status, 401);
    });

    it('answers 401 without a session', async () => {
      assert.equal((await h().client().post('/auth/logout')).status, 401);
    });
  });

  describe('session expiry', () => {
    it('refuses a session cookie sealed with another secret', async () => {
      const c = await h().user();
      const other = new TestClient(h().baseUrl);
      other.cookies.set('session', c.cookies.get('session')!.replace(/\*[^*]+~2$/, '*AAAA~2'));
      assert.equal((await other.get('/users')).status, 401);
    });
  });
});

describeApi(
  'auth with short expiries',
  (h) => {
    it('sets Secure cookies and honours the configured Max-Age on an https host', async () => {
      const res = await h().client().post('/auth/register', { email: uniqueEmail(), password: 'password123' });
      const line = res.setCookies.find((c) => c.startsWith('session='))!;
      assert.match(line, /; Secure/);
      assert.match(line, /Max-Age=7200/);
      assert.match(res.setCookies.find((c) => c.startsWith('csrf='))!, /Max-Age=3600/);
      assert.match(line, /SameSite=Strict/);
    });
  },
  { env: { SERVER_HOST_URL: 'https://orloj.example.com', SESSION_EXPIRY: '2h', CSRF_EXPIRY: '1h', SERVER_SAME_SITE_MODE: 'Strict' } },
);
