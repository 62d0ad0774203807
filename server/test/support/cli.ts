import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { orlojNodeArgs } from '@orloj/common/test-support';

/** Runs the real `orloj` command (orlojNodeArgs: from sources, or built) with the given env. */
export function orloj(args: string[], env: Record<string, string>): ChildProcess {
  return spawn(process.execPath, [...orlojNodeArgs(), ...args], {
    env: { PATH: process.env.PATH ?? '', LOG_LEVEL: 'silent', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

export async function finish(child: ChildProcess): Promise<{ code: number | null; signal: string | null; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const [code, signal] = (await once(child, 'exit')) as [number | null, string | null];
  return { code, signal, stdout, stderr };
}

/** Resolves with the first stdout line matching `pattern`. */
export async function waitForLine(child: ChildProcess, pattern: RegExp): Promise<string> {
  let buffer = '';
  return new Promise((resolve, reject) => {
    child.stdout!.on('data', (d: Buffer) => {
      buffer += d.toString();
      const line = buffer.split('\n').find((l) => pattern.test(l));
      if (line) resolve(line);
    });
    child.once('exit', (code) => reject(new Error(`exited with ${code} before printing ${pattern}: ${buffer}`)));
  });
}
