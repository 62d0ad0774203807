import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');

/**
 * A harness script (scripts/chaos.ts, scripts/restart.ts) running as a child
 * process of a test, on the test's services; its stdout and stderr are
 * collected, interleaved as they come, for the failure message.
 */
export class HarnessScript {
  readonly child: ChildProcess;
  private collected = '';
  private readonly exited: Promise<[number | null, string | null]>;

  constructor(
    private readonly name: 'chaos' | 'restart',
    args: string[],
    env: { databaseUrl: string; amqpUrl: string; more?: Record<string, string> },
  ) {
    this.child = spawn(process.execPath, ['--import', 'tsx', '--conditions=orloj-src', path.join(ROOT, `scripts/${name}.ts`), ...args], {
      cwd: ROOT,
      env: {
        PATH: process.env.PATH ?? '',
        HOME: process.env.HOME ?? '',
        TEST_DATABASE_URL: env.databaseUrl,
        TEST_AMQP_URL: env.amqpUrl,
        // Its orloj processes run as this run's do (orlojNodeArgs).
        ...(process.env.ORLOJ_TEST_BUILT ? { ORLOJ_TEST_BUILT: process.env.ORLOJ_TEST_BUILT } : {}),
        ...env.more,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child.stdout!.on('data', (d: Buffer) => (this.collected += d.toString()));
    this.child.stderr!.on('data', (d: Buffer) => (this.collected += d.toString()));
    this.exited = once(this.child, 'exit') as Promise<[number | null, string | null]>;
  }

  /** What the script printed so far, stdout and stderr interleaved. */
  get output(): string {
    return this.collected;
  }

  /** Waits for the script; it passes when it exits 0 after printing `result  PASS`. */
  async assertPasses(): Promise<void> {
    const [code, signal] = await this.exited;
    assert.equal(code, 0, `${this.name} exited with ${signal ?? `code ${code}`}:\n${this.output}`);
    assert.match(this.output, /result\s+PASS/);
  }

  /**
   * For an after hook, when a test timed out: SIGTERM lets the script kill its
   * processes and clean up; it gets graceMs for that, and then SIGKILL when
   * `thenKill`.
   */
  async stop(graceMs: number, thenKill = false): Promise<void> {
    const running = () => this.child.exitCode === null && this.child.signalCode === null;
    if (!running()) return;
    this.child.kill('SIGTERM');
    await Promise.race([this.exited, new Promise((resolve) => setTimeout(resolve, graceMs))]); // bounds the grace: the exit event comes first
    if (thenKill && running()) this.child.kill('SIGKILL');
  }
}
