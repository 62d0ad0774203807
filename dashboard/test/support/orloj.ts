/** What the browser suites share: a real `orloj start` from sources, and where its screenshots go. */
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
export const BIN = path.join(ROOT, 'server/src/bin.ts');
export const DASHBOARD_DIST = path.join(ROOT, 'dashboard/dist');
export const SCREENSHOTS = path.join(ROOT, 'artifacts/screenshots');
export const CHROMIUM = process.env.TEST_CHROMIUM || '/usr/bin/chromium';
export const CHROMIUM_ARGS = ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];

export interface RunningOrloj {
  child: ChildProcess;
  port: number;
  output: () => string;
}

/** `orloj start` from sources; resolves with its port once it prints that it runs. */
export async function startOrloj(env: Record<string, string>): Promise<RunningOrloj> {
  const child = spawn(process.execPath, ['--import', 'tsx', '--conditions=orloj-src', BIN, 'start'], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const port = await new Promise<number>((resolve, reject) => {
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /orloj is running .*listening on [^:]+:(\d+)\)/.exec(out);
      if (m) resolve(Number(m[1]));
    });
    child.once('exit', (code) => reject(new Error(`orloj exited with ${code} before it ran:\n${out}`)));
  });
  return { child, port, output: () => out };
}

/** Stops it with SIGTERM and waits for the exit. */
export async function stopOrloj(orloj: RunningOrloj | undefined): Promise<void> {
  if (!orloj || orloj.child.exitCode !== null) return;
  const exited = new Promise((r) => orloj.child.once('exit', r));
  orloj.child.kill('SIGTERM');
  await exited;
}
