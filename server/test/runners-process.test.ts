import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { finish, waitForLine } from './support/cli.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const BIN = path.join(HERE, '../src/bin.ts');
const PROBE = path.join(HERE, 'support/loaded-modules.ts');
const DRIVERS = /[\\/]node_modules[\\/](better-sqlite3|pg|pg-pool)[\\/]/;

/**
 * Starts `orloj start --roles <roles>` on the in-process bus, stops it with SIGTERM
 * once it runs, and returns the CommonJS modules it had loaded by then (at exit).
 */
async function loadedModules(roles: string, dir: string): Promise<string[]> {
  const out = path.join(dir, `loaded-${roles}.json`);
  const child = spawn(process.execPath, ['--import', 'tsx', '--conditions=orloj-src', '--import', PROBE, BIN, 'start', '--roles', roles], {
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? os.homedir(),
      DATA_DIR: dir,
      DATABASE_URL: `sqlite:${path.join(dir, 'orloj.db')}`,
      BUS_URL: 'memory:',
      LOG_LEVEL: 'info',
      OPS_PORT: '0',
      ORLOJ_LOADED_MODULES_FILE: out,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const done = finish(child);
  await waitForLine(child, /orloj is running/);
  child.kill('SIGTERM');
  const result = await done;
  assert.equal(result.code, 0, `orloj exited with ${result.code}: ${result.stderr}`);
  return JSON.parse(fs.readFileSync(out, 'utf8')) as string[];
}

describe('a runners-only process', function () {
  this.timeout(120_000);
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'orloj-runners-modules-'));
    fs.chmodSync(dir, 0o700);
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('loads neither better-sqlite3 nor pg (it has no database)', async () => {
    const loaded = await loadedModules('runners', dir);
    assert.ok(loaded.some((m) => m.includes(`${path.sep}node_modules${path.sep}`)), 'the probe saw no modules at all');
    assert.deepEqual(loaded.filter((m) => DRIVERS.test(m)), []);
  });

  it('while a process with a store role loads them (the probe sees the drivers)', async () => {
    const loaded = await loadedModules('scheduler', dir);
    assert.ok(loaded.some((m) => /[\\/]node_modules[\\/]better-sqlite3[\\/]/.test(m)), 'better-sqlite3 not among the loaded modules');
    assert.ok(loaded.some((m) => /[\\/]node_modules[\\/]pg[\\/]/.test(m)), 'pg not among the loaded modules');
  });
});
