// The orloj processes of a harness run: the roles they start with, one
// Member per replica slot (started, killed and started again under a new
// incarnation), the environment every process gets, the orderly SIGTERM at the
// end, and the error lines of their logs.
import { spawn, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { orlojNodeArgs } from '@orloj/common/test-support';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/**
 * `combined` runs `--roles api,scheduler,runners` in one process; `embedded`
 * is `orloj start` without `--roles` (every role) and without BUS_URL: the
 * in-process bus of the default installation.
 */
export type Role = 'scheduler' | 'runners' | 'combined' | 'embedded';

const ROLE_ARGS: Record<Role, string[]> = {
  scheduler: ['--roles', 'scheduler'],
  runners: ['--roles', 'runners'],
  combined: ['--roles', 'api,scheduler,runners'],
  embedded: [],
};
const ROLE_NAMES: Record<Role, string> = { scheduler: 'scheduler', runners: 'runner', combined: 'combined', embedded: 'embedded' };

/** What sets one member apart from the others of its role. */
export interface MemberOptions {
  /** the log file's and the id's name instead of `<role>-<index>` */
  name?: string;
  /** added to (or, as undefined, removed from) the run's environment */
  env?: Record<string, string | undefined>;
  /**
   * Misconfigured on purpose (chaos.ts: a runner with wrong keys): expected to
   * consume only while it is alive (allUp() does not wait for it once it has
   * been stopped), and the script never restarts it.
   */
  misconfigured?: boolean;
}

export interface Incident {
  name: string;
  code: number | null;
  signal: string | null;
}

/** One replica slot (scheduler-2, runner-1…): a process, restarted under a new incarnation after each kill. */
export class Member {
  child: ChildProcess | undefined;
  /** The SCHEDULER_ID of a scheduler or combined process, the RUNNER_ID of a runner. */
  id = '';
  incarnation = 0;
  /** Date.now() of the latest start. */
  startedAt = 0;
  /** The latest incarnation has printed "orloj is running": it serves, schedules and runs. */
  ready = false;
  /** Set before we signal it: an exit then is expected. */
  private expectExit = false;
  exited: Promise<void> = Promise.resolve();

  constructor(
    readonly role: Role,
    readonly index: number,
    private readonly env: Record<string, string>,
    private readonly logDir: string,
    private readonly onUnexpectedExit: (incident: Incident, member: Member) => void,
    private readonly idPrefix = 'chaos-',
    private readonly options: MemberOptions = {},
  ) {}

  get name(): string {
    return this.options.name ?? `${ROLE_NAMES[this.role]}-${this.index}`;
  }

  get misconfigured(): boolean {
    return this.options.misconfigured === true;
  }

  /** Consumes the job-events queue (a scheduler replica). */
  get schedules(): boolean {
    return this.role !== 'runners';
  }

  /** Consumes the jobs queue (a runner). */
  get runs(): boolean {
    return this.role !== 'scheduler';
  }

  get alive(): boolean {
    return this.child !== undefined && this.child.exitCode === null && this.child.signalCode === null;
  }

  start(): void {
    if (this.alive) return;
    this.incarnation += 1;
    this.startedAt = Date.now();
    this.expectExit = false;
    this.ready = false;
    // Schedulers get a new id per incarnation (the default id carries the pid);
    // runner ids stay stable across restarts, as docs/operations.md asks.
    this.id = this.role === 'runners' ? `${this.idPrefix}${this.name}` : `${this.idPrefix}${this.name}.${this.incarnation}`;
    const idEnv: Record<string, string> =
      this.role === 'scheduler'
        ? { SCHEDULER_ID: this.id }
        : this.role === 'runners'
          ? { RUNNER_ID: this.id }
          : { SCHEDULER_ID: this.id, RUNNER_ID: `${this.idPrefix}${this.name}`, PORT: '0' };
    const env: Record<string, string> = { ...this.env, ...idEnv };
    for (const [k, v] of Object.entries(this.options.env ?? {})) {
      if (v === undefined) delete env[k];
      else env[k] = v;
    }
    const child = spawn(process.execPath, [...orlojNodeArgs(), 'start', ...ROLE_ARGS[this.role]], {
      cwd: ROOT,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const out = fs.createWriteStream(path.join(this.logDir, `${this.name}.log`), { flags: 'a' });
    out.write(`--- ${this.id} (incarnation ${this.incarnation}) pid ${child.pid} at ${new Date().toISOString()}\n`);
    child.stdout!.pipe(out, { end: false });
    child.stderr!.pipe(out, { end: false });
    // bin.ts announces readiness at info level whatever LOG_LEVEL is; a line may arrive in pieces.
    let tail = '';
    child.stdout!.on('data', (d: Buffer) => {
      if (this.ready || this.child !== child) return;
      tail = (tail + d.toString()).slice(-4096);
      if (tail.includes('orloj is running')) this.ready = true;
    });
    this.child = child;
    this.exited = new Promise((resolve) => {
      child.once('exit', (code, signal) => {
        out.end(`--- ${this.id} exited (${signal ?? `code ${code}`})\n`);
        if (!this.expectExit) this.onUnexpectedExit({ name: this.id, code, signal }, this);
        resolve();
      });
    });
  }

  kill(signal: 'SIGKILL' | 'SIGTERM'): void {
    if (!this.alive) return;
    this.expectExit = true;
    this.child!.kill(signal);
  }
}

/** The environment every orloj process of a run gets (ids and PORT are added per process). */
export function processEnv(o: {
  dbUrl: string;
  amqpUrl: string;
  prefix: string;
  dataDir: string;
  origin: number;
  speed: number;
  logLevel: string;
  jobLeaseTtl: string;
  tick: string;
  queueTimeout: string;
  runnerConcurrency: number;
}): Record<string, string> {
  return {
    PATH: process.env.PATH ?? '',
    HOME: process.env.HOME ?? os.homedir(),
    DATABASE_URL: o.dbUrl,
    DB_POOL_SIZE: '4',
    BUS_URL: o.amqpUrl,
    BUS_PREFIX: o.prefix,
    DATA_DIR: o.dataDir,
    SESSION_SECRET: crypto.randomBytes(32).toString('hex'),
    CSRF_HMAC_SECRET: crypto.randomBytes(32).toString('hex'),
    ORLOJ_CLOCK: `accelerated:${o.origin}:${o.speed}`,
    LOG_LEVEL: o.logLevel,
    JOB_LEASE_TTL: o.jobLeaseTtl,
    SCHEDULER_TICK: o.tick,
    JOB_QUEUE_TIMEOUT: o.queueTimeout,
    RUNNER_ALLOW_TARGETS: '127.0.0.0/8',
    RUNNER_CONCURRENCY: String(o.runnerConcurrency),
    RUNNER_SHUTDOWN_GRACE: '30s',
    // Many processes on one host: each takes a free port for its probes and metrics.
    OPS_PORT: '0',
    // Chaos and restart runs measure recovery of one user's many workflows, not fairness between users.
    MAX_ACTIVE_JOBS_PER_USER: '1000000',
    MAX_WORKFLOWS_PER_USER: '10000000',
  };
}

/**
 * SIGTERMs every live member and waits for it (SIGKILL after 30 s); returns
 * the problems: a process that did not exit in time or exited non-zero.
 */
export async function stopMembers(members: readonly Member[]): Promise<string[]> {
  const problems: string[] = [];
  await Promise.all(
    members.map(async (m) => {
      if (!m.alive) return;
      const child = m.child!;
      m.kill('SIGTERM');
      const force = setTimeout(() => {
        problems.push(`${m.id} did not exit within 30 s of SIGTERM`);
        child.kill('SIGKILL');
      }, 30_000);
      await m.exited;
      clearTimeout(force);
      if (child.exitCode !== 0 && child.signalCode !== 'SIGKILL') problems.push(`${m.id} exited with ${child.signalCode ?? `code ${child.exitCode}`} after SIGTERM`);
    }),
  );
  return problems;
}

/** Lines at pino level error (50) or fatal (60) in the processes' logs. */
export function countErrorLines(dir: string): number {
  let n = 0;
  for (const f of fs.readdirSync(dir)) {
    for (const line of fs.readFileSync(path.join(dir, f), 'utf8').split('\n')) if (/"level":(50|60)\b/.test(line)) n += 1;
  }
  return n;
}
