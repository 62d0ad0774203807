import { fork, type ChildProcess } from 'node:child_process';
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
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', NODE_ENV: 'production', ...env },
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

  return {
    pid: child.pid!,
    port,
    url: `http://127.0.0.1:${port}`,
    call<T>(method: string, arg?: unknown): Promise<T> {
      if (exited) return Promise.reject(new Error(exited));
      const id = nextId++;
      return new Promise<T>((resolve, reject) => {
        pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
        child.send({ type: 'call', id, method, arg } satisfies ToChild);
      });
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

/** BENCH_CPU_PROF=<dir>: every server child writes a V8 CPU profile there when it exits (open in Chrome DevTools). */
function profileArgs(): string[] {
  const dir = process.env.BENCH_CPU_PROF?.trim();
  return dir ? ['--cpu-prof', `--cpu-prof-dir=${path.resolve(dir)}`] : [];
}

export type Handlers = Record<string, (arg: any) => Promise<unknown>>;

/**
 * Child side: reports the port to the parent and serves its calls. `shutdown`
 * runs on SIGTERM/SIGINT or when the parent goes away; the process then exits.
 */
export function serveParent(port: number, handlers: Handlers, shutdown: () => Promise<void>): void {
  let closing = false;
  const close = () => {
    if (closing) return;
    closing = true;
    shutdown().then(
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
