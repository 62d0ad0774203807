import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { tempDir } from '@orloj/common/test-support';
import { parseRoles } from '@orloj/server';
import { finish, orloj, waitForLine } from './support/cli.js';

describe('orloj command', function () {
  this.timeout(60_000);
  const dir = tempDir('orloj-cli-', { each: true });

  it('prints help with --help', async () => {
    const r = await finish(orloj(['--help'], {}));
    assert.equal(r.code, 0);
    assert.match(r.stdout, /orloj start \[--roles/);
    assert.match(r.stdout, /orloj migrate/);
  });

  it('migrates a new database and reports it up to date the second time', async () => {
    const env = { DATA_DIR: dir() };
    const first = await finish(orloj(['migrate'], env));
    assert.equal(first.code, 0, first.stderr);
    assert.match(first.stdout, /applied: 0001-initial/);
    const second = await finish(orloj(['migrate'], env));
    assert.match(second.stdout, /up to date/);
  });

  it('refuses to start with invalid configuration, naming the variable', async () => {
    const r = await finish(orloj(['start'], { DATA_DIR: dir(), PORT: 'x', SERVER_SAME_SITE_MODE: 'Maybe' }));
    assert.equal(r.code, 1);
    assert.match(r.stderr, /PORT must be an integer/);
    assert.match(r.stderr, /SERVER_SAME_SITE_MODE/);
    assert.doesNotMatch(r.stderr, /at .*\.ts:\d+/);
  });

  it('refuses an unknown command and a role that does not exist', async () => {
    assert.equal((await finish(orloj(['launch'], { DATA_DIR: dir() }))).code, 2);
    const r = await finish(orloj(['start', '--roles', 'api,nonsense'], { DATA_DIR: dir() }));
    assert.equal(r.code, 1);
    assert.match(r.stderr, /unknown role "nonsense"/);
  });

  it('starts on the embedded default with no setup, serves requests, and drains on SIGTERM', async () => {
    const child = orloj(['start'], { DATA_DIR: dir(), PORT: '0' });
    const exit = finish(child);
    await waitForLine(child, /orloj is running \(api, scheduler, runners, log-ingest, notifier\)/);
    const secrets = JSON.parse(fs.readFileSync(path.join(dir(), 'secrets.json'), 'utf8')) as Record<string, string>;
    assert.ok(secrets.sessionSecret && secrets.csrfSecret);
    assert.ok(fs.existsSync(path.join(dir(), 'orloj.db')));
    child.kill('SIGTERM');
    const r = await exit;
    assert.equal(r.code, 0, JSON.stringify(r));
    assert.match(r.stdout, /SIGTERM: shutting down/);
  });

  it('serves the API on the port it reports', async () => {
    const child = orloj(['start', '--roles', 'api'], { DATA_DIR: dir(), PORT: '0' });
    const exit = finish(child);
    const line = await waitForLine(child, /orloj is running \(api\) at http:\/\/localhost:\d+ \(listening on 127\.0\.0\.1:\d+\)/);
    const [, advertised, port] = /at http:\/\/localhost:(\d+) .*:(\d+)\)"/.exec(line)!.map(Number);
    assert.equal(advertised, port, 'with PORT=0 the line gives the port it took');
    const res = await fetch(`http://127.0.0.1:${port}/openapi.json`);
    assert.equal(res.status, 200);
    assert.equal(((await res.json()) as { openapi: string }).openapi, '3.1.0');
    child.kill('SIGINT');
    assert.equal((await exit).code, 0);
  });
});

describe('orloj invite and orloj user add: adding people to a closed installation', function () {
  this.timeout(120_000);
  const dir = tempDir('orloj-cli-', { each: true });

  /** `orloj start --roles api` with `env`; its base URL and a way to stop it. */
  async function api(env: Record<string, string>): Promise<{ base: string; stop: () => Promise<unknown> }> {
    const child = orloj(['start', '--roles', 'api'], { DATA_DIR: dir(), PORT: '0', ...env });
    const exit = finish(child);
    const line = await waitForLine(child, /orloj is running/);
    const port = /listening on 127\.0\.0\.1:(\d+)/.exec(line)![1];
    return {
      base: `http://127.0.0.1:${port}`,
      stop: () => {
        child.kill('SIGTERM');
        return exit;
      },
    };
  }

  const register = (base: string, body: Record<string, string>) =>
    fetch(`${base}/auth/register`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const login = (base: string, email: string, password: string) =>
    fetch(`${base}/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email, password }) });

  it('orloj user add creates an account that signs in while registration is closed', async () => {
    const server = await api({ REGISTRATION: 'closed' });
    try {
      assert.equal((await register(server.base, { email: 'first@example.com', password: 'correct horse' })).status, 201, 'the first account');
      const refused = await register(server.base, { email: 'second@example.com', password: 'battery staple' });
      assert.equal(refused.status, 403);
      assert.equal(((await refused.json()) as { code: string }).code, 'registration_closed');
      const passwordFile = path.join(dir(), 'password');
      fs.writeFileSync(passwordFile, 'battery staple\n', { mode: 0o600 });
      const added = await finish(orloj(['user', 'add', 'Second@Example.com', '--password-file', passwordFile], { DATA_DIR: dir() }));
      assert.equal(added.code, 0, added.stderr);
      assert.match(added.stdout, /account created: second@example.com/);
      assert.equal((await login(server.base, 'second@example.com', 'battery staple')).status, 200);
      // Taken, and refused input, named on stderr.
      const again = await finish(orloj(['user', 'add', 'second@example.com', '--password-file', passwordFile], { DATA_DIR: dir() }));
      assert.equal(again.code, 1);
      assert.match(again.stderr, /email is already registered/);
      fs.writeFileSync(passwordFile, 'short\n');
      const short = await finish(orloj(['user', 'add', 'third@example.com', '--password-file', passwordFile], { DATA_DIR: dir() }));
      assert.equal(short.code, 1);
      assert.match(short.stderr, /password must be 8 to 128 characters/);
      assert.equal((await finish(orloj(['user', 'add', 'x@example.com'], { DATA_DIR: dir() }))).code, 2);
    } finally {
      await server.stop();
    }
  });

  it('orloj invite mints an invitation the api takes for that email only (REGISTRATION=invitation)', async () => {
    const server = await api({ REGISTRATION: 'invitation', SERVER_HOST_URL: 'https://orloj.example.com' });
    try {
      assert.equal((await register(server.base, { email: 'first@example.com', password: 'correct horse' })).status, 201, 'the first account');
      const minted = await finish(orloj(['invite', 'Guest@Example.com', '--expires', '2d'], { DATA_DIR: dir(), SERVER_HOST_URL: 'https://orloj.example.com' }));
      assert.equal(minted.code, 0, minted.stderr);
      const invitation = /^(\d+\.[A-Za-z0-9_-]{43})$/m.exec(minted.stdout)?.[1];
      assert.ok(invitation, minted.stdout);
      assert.match(minted.stdout, new RegExp(`sign-up link: https://orloj\\.example\\.com/signup\\?invitation=${invitation.replace('.', '\\.')}`));
      assert.equal((await register(server.base, { email: 'other@example.com', password: 'correct horse', invitation })).status, 403);
      assert.equal((await register(server.base, { email: 'guest@example.com', password: 'correct horse', invitation })).status, 201);
      const tooLong = await finish(orloj(['invite', 'x@example.com', '--expires', '100d'], { DATA_DIR: dir() }));
      assert.equal(tooLong.code, 1);
      assert.match(tooLong.stderr, /--expires/);
    } finally {
      await server.stop();
    }
  });
});

describe('parseRoles', () => {
  it('expands all to the available roles and refuses unknown ones', () => {
    assert.deepEqual(parseRoles('all'), ['api', 'scheduler', 'runners', 'log-ingest', 'notifier']);
    assert.deepEqual(parseRoles('notifier'), ['notifier']);
    assert.deepEqual(parseRoles('api,api'), ['api']);
    assert.throws(() => parseRoles('web'), /unknown role/);
  });
});
