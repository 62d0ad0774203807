/**
 * Builds the orloj image from the repository's Containerfile, offline: the bases come
 * from deploy/image/make-base.sh (Debian packages and this machine's Node.js, cached
 * outside the repository), the npm dependencies from the registry through podman's
 * layer cache (rebuilt only when a manifest or the lockfile changes). Once per content
 * of the tree: the image and compose suites, and later runs of the same tree, share it.
 */
import { execFile, spawn } from 'node:child_process';
import crypto from 'node:crypto';
import { mkdir, readFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { requireServices, until as kitUntil } from '@orloj/common/test-support';

export const run = promisify(execFile);
export const repoDir = path.resolve(import.meta.dirname, '../../..');
export const IMAGE = 'localhost/orloj/orloj:ci';

const podmanDir = process.env.ORLOJ_PODMAN_DIR || '/var/tmp/orloj-podman';
/** podman's CLI with the runtime settings scripts/container-runtime.sh writes (runc, ulimits). */
export const podmanEnv = { ...process.env, CONTAINERS_CONF: path.join(podmanDir, 'containers.conf') };

export async function podman(args: string[], timeout = 120_000): Promise<string> {
  const { stdout } = await run('podman', args, { env: podmanEnv, timeout, maxBuffer: 64 << 20 });
  return stdout.trim();
}

/** Runs a long command, keeping only the tail of its output for the error message. */
function runLogged(cmd: string, args: string[], timeout: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { env: podmanEnv, cwd: repoDir, stdio: ['ignore', 'pipe', 'pipe'] });
    let tail = '';
    const keep = (b: Buffer) => (tail = (tail + b.toString()).slice(-6000));
    child.stdout.on('data', keep);
    child.stderr.on('data', keep);
    const timer = setTimeout(() => child.kill('SIGTERM'), timeout); // bounds the command: its exit is the event
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      if (code === 0) resolve();
      else reject(new Error(`${cmd} ${args.join(' ')} exited ${code}:\n${tail}`));
    });
  });
}

let built: Promise<void> | undefined;

/**
 * A digest of what the build reads: every file git sees in the tree (tracked, or new and
 * not ignored: the build context less local state) and the base images. Two trees with
 * the same content share it, so a fresh clone of a commit built before reuses the image.
 */
async function contentKey(buildArgs: Record<string, string>): Promise<string> {
  const { stdout } = await run('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: repoDir, maxBuffer: 64 << 20 });
  const hash = crypto.createHash('sha256').update(JSON.stringify(buildArgs));
  for (const file of stdout.split('\0').filter(Boolean).sort()) {
    // A file deleted in the worktree is still in git's index: it is not in the context either.
    const data = await readFile(path.join(repoDir, file)).catch(() => undefined);
    if (data) hash.update(file).update('\0').update(data).update('\0');
  }
  return hash.digest('hex').slice(0, 20);
}

/**
 * Resolves when IMAGE holds the current tree, built once per content (docs/testing.md,
 * "Tiers"): an image already built from the same content is tagged IMAGE again instead
 * of rebuilt. The suite skips (or fails under REQUIRE_SERVICES=1) without podman.
 */
export function buildImage(ctx: Mocha.Context): Promise<void> {
  built ??= (async () => {
    // Installs podman/runc when missing and writes the containers.conf podmanEnv names.
    await run(path.join(repoDir, 'scripts/container-runtime.sh'), ['ensure'], { timeout: 600_000 });
    const { stdout } = await run(path.join(repoDir, 'deploy/image/make-base.sh'), [], { env: podmanEnv, timeout: 900_000 });
    const args = Object.fromEntries(
      stdout
        .trim()
        .split('\n')
        .map((l) => l.split('=') as [string, string]),
    );
    const cached = `${IMAGE}-${await contentKey(args)}`;
    if (await podman(['image', 'exists', cached]).then(() => true, () => false)) {
      await podman(['tag', cached, IMAGE]);
      return;
    }
    // This machine's npm cache, overlaid (never written), spares the registry most downloads.
    const cache = (await run('npm', ['config', 'get', 'cache'])).stdout.trim();
    // And the better-sqlite3 addons the host's installs kept (scripts/build.mjs): the bases carry
    // the host's Node.js on the same Debian, so the image's install copies the one it needs
    // instead of compiling SQLite (minutes of CPU); one that does not load there is compiled.
    const addons = path.join(process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache'), 'orloj');
    await mkdir(addons, { recursive: true });
    // At most this process's own limit: the kernel refuses to raise it in a container.
    const nofile = Math.min(65536, Number((await run('sh', ['-c', 'ulimit -Hn'])).stdout.trim()) || 1024);
    await runLogged(
      'podman',
      [
        'build', '--format', 'docker', '-v', `${cache}:/root/.npm:O`, '-v', `${addons}:/root/.cache/orloj:O`, '--build-arg', 'NPM_CI_FLAGS=--prefer-offline',
        // npm reading a warm cache opens more files than containers.conf's default 1024.
        '--ulimit', `nofile=${nofile}:${nofile}`,
        '--build-arg', `NODE_IMAGE=${args.NODE_IMAGE}`, '--build-arg', `BUILD_IMAGE=${args.BUILD_IMAGE}`,
        '-t', IMAGE, '-t', cached, '-f', 'Containerfile', '.',
      ], // prettier-ignore
      900_000,
    );
  })();
  return built.catch((err: unknown) => {
    if (!requireServices && /ENOENT|could not be started|required/.test(String(err))) ctx.skip();
    throw err;
  });
}

/** Polls until `ok` holds (the kit's until, patient with a server still starting): state changes in other processes. */
export function until<T>(read: () => Promise<T>, ok: (v: T) => boolean, what: string, ms = 60_000): Promise<T> {
  return kitUntil(read, ok, what, ms, { everyMs: 250, retryErrors: true });
}

/** A TCP port free on 127.0.0.1 right now. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = http.createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as AddressInfo;
      s.close(() => resolve(port));
    });
    s.on('error', reject);
  });
}
