import { fork, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import { Session } from 'node:inspector/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * Servers under test run in their own process, never in the load generator's.
 * A child entry (bench/servers/*.ts) calls `serveParent()` once it listens;
 * the parent starts it with `startServer()` and may call the handlers the
 * child registered (seeding, page capture…) over the IPC channel.
 *
 * Children run through tsx with the `orloj-src` export condition, so they
 * import the TypeScript sources of @orloj/* (like the tests), not dist/.
 */

export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const SERVERS_DIR = path.join(REPO_ROOT, 'bench', 'servers');

type ToChild = { type: 'call'; id: number; method: string; arg: unknown };
type FromChild =
  | { type: 'ready'; port: number }
  | { type: 'reply'; id: number; ok: true; result: unknown }
  | { type: 'reply'; id: number; ok: false; error: string };

export interface ServerProcess {
  readonly pid: number;
  readonly port: number;
  readonly url: string;
  /** Calls a handler the child registered with serveParent(). */
  call<T = unknown>(method: string, arg?: unknown): Promise<T>;
  /**
   * With BENCH_CPU_PROF=<dir>: starts a V8 CPU profile of the child and returns
   * the function that ends it and writes <dir>/<child>-<name>-<pid>.cpuprofile
   * (resolving with the file), so a profile covers exactly the stretch a suite
   * measures. Without it: a no-op.
   */
  profile(name: string): Promise<() => Promise<string | undefined>>;
  /** SIGTERM, then SIGKILL after 5 s. */
  stop(): Promise<void>;
}

/**
 * Starts `bench/servers/<name>.ts` and resolves once it listens. `env` is the
 * child's whole environment apart from PATH/HOME (so nothing leaks in from the
 * caller's shell unless passed on purpose).
 */
export async function startServer(name: string, env: Record<string, string>, timeoutMs = 60_000): Promise<ServerProcess> {
  const child = fork(path.join(SERVERS_DIR, `${name}.ts`), [], {
    cwd: REPO_ROOT,
    execArgv: ['--import', 'tsx', '--conditions=orloj-src', ...profileArgs()],
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '',
      NODE_ENV: 'production',
      ...(process.env.BENCH_SQL_PROFILE?.trim() ? { BENCH_SQL_PROFILE: path.resolve(process.env.BENCH_SQL_PROFILE.trim()) } : {}),
      ...env,
    },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  let nextId = 1;
  let exited: string | undefined;
  const exitedPromise = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.on('exit', (code, signal) => {
    exited = `${name} exited (${signal ?? `code ${code}`})`;
    for (const p of pending.values()) p.reject(new Error(exited));
    pending.clear();
  });
  child.on('message', (raw) => {
    const m = raw as FromChild;
    if (m.type !== 'reply') return;
    const p = pending.get(m.id);
    if (!p) return;
    pending.delete(m.id);
    if (m.ok) p.resolve(m.result);
    else p.reject(new Error(`${name}: ${m.error}`));
  });

  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${name} did not start within ${timeoutMs} ms`));
    }, timeoutMs);
    const onMessage = (raw: unknown) => {
      const m = raw as FromChild;
      if (m.type !== 'ready') return;
      clearTimeout(timer);
      child.off('message', onMessage);
      resolve(m.port);
    };
    child.on('message', onMessage);
    child.once('exit', () => {
      clearTimeout(timer);
      reject(new Error(`${exited ?? name + ' exited'} before listening`));
    });
  });

  const call = <T>(method: string, arg?: unknown): Promise<T> => {
    if (exited) return Promise.reject(new Error(exited));
    const id = nextId++;
    return new Promise<T>((resolve, reject) => {
      pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
      child.send({ type: 'call', id, method, arg } satisfies ToChild);
    });
  };
  return {
    pid: child.pid!,
    port,
    url: `http://127.0.0.1:${port}`,
    call,
    async profile(what) {
      const dir = process.env.BENCH_CPU_PROF?.trim();
      if (!dir) return async () => undefined;
      await call('profileStart');
      const file = path.resolve(dir, `${name}-${what.replace(/[^A-Za-z0-9_.-]+/g, '-')}-${child.pid}.cpuprofile`);
      return () => call<{ file: string }>('profileStop', { file }).then((r) => r.file);
    },
    stop: () => stopChild(child, exitedPromise),
  };
}

async function stopChild(child: ChildProcess, exited: Promise<void>): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
  await exited;
  clearTimeout(timer);
}

/**
 * BENCH_CPU_PROF=<dir>: every server child also writes a V8 CPU profile of its
 * whole life there when it exits (open in Chrome DevTools).
 */
export function profileArgs(): string[] {
  const dir = process.env.BENCH_CPU_PROF?.trim();
  return [...(dir ? ['--cpu-prof', `--cpu-prof-dir=${path.resolve(dir)}`] : []), ...sqlProfileArgs()];
}

/**
 * BENCH_SQL_PROFILE=<dir>: every server child times each better-sqlite3
 * statement per SQL text (bench/lib/sql-profile.cjs) and writes
 * <dir>/<child>-<pid>.sql-profile.json when it exits; `npx tsx
 * bench/tools/sql-profile-table.ts <file>` prints the top statements.
 */
function sqlProfileArgs(): string[] {
  const dir = process.env.BENCH_SQL_PROFILE?.trim();
  return dir ? ['--require', path.join(REPO_ROOT, 'bench', 'lib', 'sql-profile.cjs')] : [];
}

export type Handlers = Record<string, (arg: any) => Promise<unknown>>;

/**
 * Child side: reports the port to the parent and serves its calls, the
 * child's own `handlers` and `profileStart` / `profileStop` (behind
 * ServerProcess.profile; unlike --cpu-prof, they do not depend on a clean exit
 * of a process that may be overloaded). `shutdown` runs on SIGTERM/SIGINT or
 * when the parent goes away; the process then exits.
 */
export function serveParent(port: number, own: Handlers, shutdown: () => Promise<void>): void {
  let profiler: Session | undefined;
  const handlers: Handlers = {
    ...own,
    async profileStart() {
      profiler = new Session();
      profiler.connect();
      await profiler.post('Profiler.enable');
      await profiler.post('Profiler.start');
    },
    /** Writes the profile since profileStart() to `file` (a .cpuprofile for Chrome DevTools). */
    async profileStop(arg: { file: string }) {
      if (!profiler) throw new Error('profileStart() was not called');
      const { profile } = await profiler.post('Profiler.stop');
      profiler.disconnect();
      profiler = undefined;
      fs.mkdirSync(path.dirname(arg.file), { recursive: true });
      fs.writeFileSync(arg.file, JSON.stringify(profile));
      return { file: arg.file };
    },
  };
  let closing = false;
  const close = () => {
    if (closing) return;
    closing = true;
    const stopProfiler = profiler ? profiler.post('Profiler.stop').then(() => undefined, () => undefined) : Promise.resolve();
    stopProfiler.then(shutdown).then(
      () => process.exit(0),
      (err: unknown) => {
        console.error('shutdown failed:', err);
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', close);
  process.on('SIGINT', close);
  if (!process.send) {
    // Started by hand (no IPC channel): just say where it listens.
    console.log(`listening on http://127.0.0.1:${port}`);
    return;
  }
  process.on('disconnect', close);
  process.on('message', (raw) => {
    const m = raw as ToChild;
    if (m.type !== 'call') return;
    const handler = handlers[m.method];
    const reply = (msg: FromChild) => process.send?.(msg);
    if (!handler) {
      reply({ type: 'reply', id: m.id, ok: false, error: `no handler "${m.method}"` });
      return;
    }
    handler(m.arg).then(
      (result) => reply({ type: 'reply', id: m.id, ok: true, result }),
      (err: unknown) => reply({ type: 'reply', id: m.id, ok: false, error: err instanceof Error ? (err.stack ?? err.message) : String(err) }),
    );
  });
  process.send({ type: 'ready', port } satisfies FromChild);
}
