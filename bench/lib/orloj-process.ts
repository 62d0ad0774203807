import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sleep } from './stats.js';

/**
 * orloj as a user runs it: `node server/dist/bin.js start` of a built tree
 * (this one, or an older commit built from history), its own process, its
 * output in a file. Unlike bench/servers/orloj-embedded.ts nothing of the
 * bench runs inside it, so any version can be measured the same way: CPU and
 * memory from /proc, the schedule from its SQLite file after it stops.
 */
export interface OrlojProcess {
  readonly pid: number;
  readonly url: string;
  /** DATA_DIR: the SQLite file (orloj.db, the default DATABASE_URL), secrets.json, the output. */
  readonly dataDir: string;
  readonly databaseFile: string;
  readonly outputFile: string;
  /** Peak and current resident set of the process (bytes, /proc/<pid>/status VmHWM and VmRSS); undefined once it is gone. */
  memory(): { peak: number; current: number } | undefined;
  /** SIGTERM (orloj drains), SIGKILL after `graceMs`. */
  stop(graceMs?: number): Promise<void>;
  /** Deletes DATA_DIR. */
  remove(): void;
}

/** The line both the current and older versions print once the api listens (a pino line now, plain text before). */
const READY = /orloj is running[^\n]*listening on [^\n:]+:(\d+)/;

/**
 * Starts `<root>/server/dist/bin.js start` with only PATH, HOME, DATA_DIR (a
 * fresh temp dir), PORT=0 and `env`: every other setting at its default, as
 * in a user's `npm start`. Resolves once the api listens.
 */
export async function startOrlojProcess(root: string, env: Record<string, string>, timeoutMs = 120_000): Promise<OrlojProcess> {
  const bin = path.join(root, 'server', 'dist', 'bin.js');
  if (!fs.existsSync(bin)) throw new Error(`${bin} is missing: build that tree first (node scripts/build.mjs or npm run build)`);
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'orloj-bench-user-'));
  const outputFile = path.join(dataDir, 'output.log');
  const out = fs.openSync(outputFile, 'a');
  let child: ChildProcess;
  try {
    child = spawn(process.execPath, [bin, 'start'], {
      cwd: root,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? os.homedir(), DATA_DIR: dataDir, PORT: '0', ...env },
      stdio: ['ignore', out, out],
    });
  } finally {
    fs.closeSync(out);
  }
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const pid = child.pid!;
  const deadline = Date.now() + timeoutMs;
  let port: number | undefined;
  while (port === undefined) {
    const text = fs.readFileSync(outputFile, 'utf8');
    const m = READY.exec(text);
    if (m) port = Number(m[1]);
    else if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`orloj exited (${child.signalCode ?? `code ${child.exitCode}`}) before listening:\n${text.slice(-4000)}`);
    } else if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`orloj did not listen within ${timeoutMs} ms:\n${text.slice(-4000)}`);
    } else await sleep(100); // the start line is all there is to wait on: poll the output file
  }
  return {
    pid,
    url: `http://127.0.0.1:${port}`,
    dataDir,
    databaseFile: path.join(dataDir, 'orloj.db'),
    outputFile,
    memory() {
      try {
        const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
        const kib = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? Number.NaN) * 1024;
        return { peak: kib('VmHWM'), current: kib('VmRSS') };
      } catch {
        return undefined;
      }
    },
    async stop(graceMs = 30_000) {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      await exited;
      clearTimeout(timer);
    },
    remove() {
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
