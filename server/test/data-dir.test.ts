import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { silentLogger } from '@orloj/common/logging';
import { startOrloj } from '@orloj/server';
import { TestClient } from '@orloj/api/test-support';

/**
 * DATA_DIR at rest (docs/security.md): the embedded default's SQLite
 * database, cookie secrets and signing keys are the service user's alone,
 * whatever the umask, and an open directory is reported at start.
 */

const modeOf = (file: string) => fs.statSync(file).mode & 0o777;
const octal = (mode: number) => mode.toString(8).padStart(4, '0');

function capture() {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const l of chunk.toString('utf8').split('\n')) if (l) lines.push(JSON.parse(l) as Record<string, unknown>);
      done();
    },
  });
  return { logger: pino({ level: 'warn' }, sink), lines };
}

describe('DATA_DIR permissions', function () {
  this.timeout(60_000);
  let root: string;
  let dataDir: string;
  const env = () => ({ DATA_DIR: dataDir, PORT: '0', HOST: '127.0.0.1', BUS_URL: 'memory:', RATE_LIMIT_ENABLED: 'false' });

  before(() => {
    root = fs.mkdtempSync(path.join(os.tmpdir(), 'orloj-data-dir-'));
    dataDir = path.join(root, 'nested', 'data');
  });
  after(() => fs.rmSync(root, { recursive: true, force: true }));

  /** Every file of the embedded default that holds secrets or data. */
  const privateFiles = () => [
    ...['orloj.db', 'orloj.db-wal', 'orloj.db-shm', 'secrets.json'].map((f) => path.join(dataDir, f)),
    ...fs.readdirSync(path.join(dataDir, 'keys')).filter((f) => f.endsWith('.key')).map((f) => path.join(dataDir, 'keys', f)),
  ];

  it('creates DATA_DIR 0700 and the database (with -wal, -shm), secrets and keys 0600, even under umask 000', async () => {
    const previous = process.umask(0o000);
    let orloj;
    try {
      orloj = await startOrloj({ roles: ['api'], env: env(), logger: silentLogger });
    } finally {
      process.umask(previous);
    }
    try {
      // Writes reach the WAL.
      const c = new TestClient(`http://127.0.0.1:${orloj.port}`);
      assert.equal((await c.post('/auth/register', { email: 'owner@example.com', password: 'correct horse' })).status, 201);
      for (const dir of [dataDir, path.dirname(dataDir), path.join(dataDir, 'keys')]) assert.equal(octal(modeOf(dir)), '0700', dir);
      const files = privateFiles();
      assert.ok(files.length >= 7, files.join(' '));
      for (const file of files) assert.equal(octal(modeOf(file)), '0600', file);
    } finally {
      await orloj.stop();
    }
  });

  it('warns at start when an existing DATA_DIR is open to others, and closes the files it made', async () => {
    fs.chmodSync(dataDir, 0o755);
    fs.chmodSync(path.join(dataDir, 'keys'), 0o750);
    for (const file of privateFiles()) if (fs.existsSync(file)) fs.chmodSync(file, 0o644);
    const { logger, lines } = capture();
    const orloj = await startOrloj({ roles: ['api'], env: env(), logger });
    try {
      const warnings = lines.filter((l) => l.level === 40).map((l) => String(l.msg));
      assert.ok(
        warnings.some((w) => w.includes(dataDir) && w.includes('0755') && w.includes('chmod 700')),
        warnings.join('\n'),
      );
      assert.ok(warnings.some((w) => w.includes(path.join(dataDir, 'keys')) && w.includes('0750')), warnings.join('\n'));
      for (const file of privateFiles()) if (fs.existsSync(file)) assert.equal(octal(modeOf(file)), '0600', file);
      // The directory itself is the operator's to change: only reported.
      assert.equal(octal(modeOf(dataDir)), '0755');
    } finally {
      await orloj.stop();
    }
    fs.chmodSync(dataDir, 0o700);
    fs.chmodSync(path.join(dataDir, 'keys'), 0o700);
    const quiet = capture();
    const again = await startOrloj({ roles: ['api'], env: env(), logger: quiet.logger });
    await again.stop();
    assert.deepEqual(quiet.lines.filter((l) => String(l.msg).includes('open to other users')), []);
  });
});
