import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { orlojNodeArgs, stopChild } from '@orloj/common/test-support';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');

/**
 * One `orloj start` process (orlojNodeArgs: from the sources, or built), with exactly
 * the environment given (plus PATH and HOME): start it and wait for a line of
 * its output, or for its exit; signal it and wait for the exit.
 */
export class OrlojProcess {
  child: ChildProcess | undefined;
  /** stdout and stderr of the current process. */
  output = '';

  constructor(
    readonly args: readonly string[],
    readonly env: Record<string, string>,
  ) {}

  /** Spawns the process (a previous one must have exited). */
  spawn(env: Record<string, string> = {}): ChildProcess {
    this.output = '';
    const c = spawn(process.execPath, [...orlojNodeArgs(), 'start', ...this.args], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? os.homedir(), ...this.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child = c;
    c.stdout!.on('data', (d: Buffer) => (this.output += d.toString()));
    c.stderr!.on('data', (d: Buffer) => (this.output += d.toString()));
    return c;
  }

  /** Resolves once the output matches `pattern`; rejects if the process exits first or after `timeoutMs`. */
  async waitFor(pattern: RegExp, timeoutMs = 60_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!pattern.test(this.output)) {
      const c = this.child;
      if (!c || c.exitCode !== null || c.signalCode !== null) throw new Error(`orloj exited before ${pattern}:\n${this.output}`);
      if (Date.now() > deadline) throw new Error(`orloj did not print ${pattern} within ${timeoutMs} ms:\n${this.output}`);
      await new Promise((r) => setTimeout(r, 50)); // poll interval: the output arrives on a pipe read here
    }
  }

  /** Waits for the process to exit on its own; returns its exit code. */
  async exitCode(timeoutMs = 60_000): Promise<number | null> {
    const c = this.child!;
    if (c.exitCode === null && c.signalCode === null) {
      const timer = setTimeout(() => c.kill('SIGKILL'), timeoutMs); // bounds the wait: the exit event comes first
      await once(c, 'exit');
      clearTimeout(timer);
    }
    return c.exitCode;
  }

  /** Sends the signal (if the process still runs) and waits for the exit. */
  stop(signal: NodeJS.Signals): Promise<void> {
    return stopChild(this.child, signal);
  }
}
