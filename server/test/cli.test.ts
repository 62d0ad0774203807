import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseRoles } from '@orloj/server';
import { finish, orloj, waitForLine } from './support/cli.js';

describe('orloj command', function () {
  this.timeout(60_000);
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'orloj-cli-'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('prints help with --help', async () => {
    const r = await finish(orloj(['--help'], {}));
    assert.equal(r.code, 0);
    assert.match(r.stdout, /orloj start \[--roles/);
    assert.match(r.stdout, /orloj migrate/);
  });

  it('migrates a new database and reports it up to date the second time', async () => {
    const env = { DATA_DIR: dir };
    const first = await finish(orloj(['migrate'], env));
    assert.equal(first.code, 0, first.stderr);
    assert.match(first.stdout, /applied: 0001-initial/);
    const second = await finish(orloj(['migrate'], env));
    assert.match(second.stdout, /up to date/);
  });

  it('refuses to start with invalid configuration, naming the variable', async () => {
    const r = await finish(orloj(['start'], { DATA_DIR: dir, PORT: 'x', SERVER_SAME_SITE_MODE: 'Maybe' }));
    assert.equal(r.code, 1);
    assert.match(r.stderr, /PORT must be an integer/);
    assert.match(r.stderr, /SERVER_SAME_SITE_MODE/);
    assert.doesNotMatch(r.stderr, /at .*\.ts:\d+/);
  });

  it('refuses an unknown command and a role that does not exist', async () => {
    assert.equal((await finish(orloj(['launch'], { DATA_DIR: dir }))).code, 2);
    const r = await finish(orloj(['start', '--roles', 'api,nonsense'], { DATA_DIR: dir }));
    assert.equal(r.code, 1);
    assert.match(r.stderr, /unknown role "nonsense"/);
  });

  it('starts on the embedded default with no setup, serves requests, and drains on SIGTERM', async () => {
    const child = orloj(['start'], { DATA_DIR: dir, PORT: '0' });
    const exit = finish(child);
    await waitForLine(child, /orloj is running \(api, scheduler, runners, log-ingest, notifier\)/);
    const secrets = JSON.parse(fs.readFileSync(path.join(dir, 'secrets.json'), 'utf8')) as Record<string, string>;
    assert.ok(secrets.sessionSecret && secrets.csrfSecret);
    assert.ok(fs.existsSync(path.join(dir, 'orloj.db')));
    child.kill('SIGTERM');
    const r = await exit;
    assert.equal(r.code, 0, JSON.stringify(r));
    assert.match(r.stdout, /SIGTERM: shutting down/);
  });

  it('serves the API on the port it reports', async () => {
    const child = orloj(['start', '--roles', 'api'], { DATA_DIR: dir, PORT: '0' });
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

describe('parseRoles', () => {
  it('expands all to the available roles and refuses unknown ones', () => {
    assert.deepEqual(parseRoles('all'), ['api', 'scheduler', 'runners', 'log-ingest', 'notifier']);
    assert.deepEqual(parseRoles('notifier'), ['notifier']);
    assert.deepEqual(parseRoles('api,api'), ['api']);
    assert.throws(() => parseRoles('web'), /unknown role/);
  });
});
