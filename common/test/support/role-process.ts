import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ensureKeyDir } from '@orloj/common/envelope';
import { orlojNodeArgs } from './orloj-command.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');

/** What a crash test gives the role process: the store, the broker, and a DATA_DIR holding the signing keys. */
export interface RoleProcessEnv {
  databaseUrl: string;
  amqpUrl: string;
  busPrefix: string;
  dataDir: string;
}

/**
 * One `orloj start --roles <role>` process (orlojNodeArgs: from sources, or built) on
 * PostgreSQL and RabbitMQ, for crash tests: start it, wait for its "<role>
 * started" (or "orloj is running") log line, SIGKILL it, start it again.
 */
export class RoleProcess {
  child: ChildProcess | undefined;
  /** stdout and stderr of the current process. */
  output = '';

  /** `extraEnv`: more settings for this process (OPS_PORT, PORT, rate limits, …). */
  constructor(
    readonly role: string,
    private readonly env: RoleProcessEnv,
    /** More environment variables for this process (they win). */
    private readonly extraEnv: Record<string, string> = {},
    /** The log line that says the role runs. */
    private readonly startedLine: RegExp = new RegExp(`${role} started|orloj is running`),
  ) {}

  /** Starts the process and resolves once it logged that the role started and announced itself ("orloj is running"). */
  async start(): Promise<void> {
    this.output = '';
    // The operator's step: a distributed process never makes keys of its own, it reads them (here from DATA_DIR/keys).
    await ensureKeyDir(this.env.dataDir);
    const c = spawn(process.execPath, [...orlojNodeArgs(), 'start', '--roles', this.role], {
      cwd: ROOT,
      env: {
        PATH: process.env.PATH ?? '',
        HOME: process.env.HOME ?? os.homedir(),
        DATABASE_URL: this.env.databaseUrl,
        DB_POOL_SIZE: '8',
        BUS_URL: this.env.amqpUrl,
        BUS_PREFIX: this.env.busPrefix,
        DATA_DIR: this.env.dataDir,
        LOG_LEVEL: 'info',
        // Several processes share this host: each takes a free port for its probes unless told otherwise.
        OPS_PORT: '0',
        ...this.extraEnv,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child = c;
    c.stdout!.on('data', (d: Buffer) => (this.output += d.toString()));
    c.stderr!.on('data', (d: Buffer) => (this.output += d.toString()));
    // Generous: several tsx processes starting at once on a loaded machine.
    const deadline = Date.now() + 120_000;
    const started = this.startedLine;
    // The announcement comes last, after the role's own line: a test reads its port from it (probePort).
    while (!started.test(this.output) || !/orloj is running/.test(this.output)) {
      if (c.exitCode !== null) throw new Error(`${this.role} exited early:\n${this.output}`);
      if (Date.now() > deadline) throw new Error(`${this.role} did not start:\n${this.output}`);
      await new Promise((r) => setTimeout(r, 50)); // poll interval: the process announces itself on a pipe read here
    }
  }

  /** Sends the signal (if the process still runs) and waits for the exit. */
  stop(signal: NodeJS.Signals): Promise<void> {
    return stopChild(this.child, signal);
  }
}

/** Sends the signal to a child process (if it still runs) and waits for its exit. */
export async function stopChild(c: ChildProcess | undefined, signal: NodeJS.Signals): Promise<void> {
  if (!c || c.exitCode !== null || c.signalCode !== null) return;
  const exited = once(c, 'exit');
  c.kill(signal);
  await exited;
}
