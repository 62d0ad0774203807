/**
 * The reference project's own dashboard (../shared/reference-client/, a
 * Next.js app: see its README), built the way that README says for these
 * machines and served as a standalone Node server: the one other client of
 * orloj's API, driven by dashboard/test/reference-client.suite.ts.
 *
 * The build takes minutes, so it is kept outside the repository in a cache
 * directory keyed by the tarball's hash, the build recipe's version and the
 * API URL it is built for (Next.js bakes NEXT_PUBLIC_API_URL into the
 * bundle); later runs reuse it. A build runs in a directory of its own and is
 * renamed into place when complete, so concurrent runs never see half of one.
 */
import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { ROOT } from './orloj.js';

/** Bumped whenever the recipe below changes, so older cached builds are not reused. */
const RECIPE = 1;
const TARBALL = /^chronoverse-dashboard-.*\.tar\.gz$/;

/**
 * The tarball: ORLOJ_REFERENCE_CLIENT (the file or its folder), else the first
 * `shared/reference-client/` found beside the repository or above it (the
 * project's shared folder lies beside the checkout, in CI too).
 */
export function findReferenceTarball(): string | undefined {
  const given = process.env.ORLOJ_REFERENCE_CLIENT;
  const candidates = given ? [given] : [];
  for (let dir = ROOT; ; dir = path.dirname(dir)) {
    candidates.push(path.join(dir, 'shared', 'reference-client'));
    if (path.dirname(dir) === dir) break;
  }
  for (const c of candidates) {
    if (!fs.existsSync(c)) continue;
    if (fs.statSync(c).isFile()) return c;
    const name = fs.readdirSync(c).find((f) => TARBALL.test(f));
    if (name) return path.join(c, name);
  }
  return undefined;
}

export const cacheRoot = () => process.env.ORLOJ_REFERENCE_CLIENT_CACHE || path.join('/var/tmp', 'orloj-reference-client');

/** Runs a command, its output appended to `logFile`; rejects with the output's tail when it fails. */
function run(command: string, args: string[], cwd: string, env: Record<string, string>, logFile: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const out = fs.openSync(logFile, 'a');
    fs.writeSync(out, `\n$ ${command} ${args.join(' ')}\n`);
    const child = spawn(command, args, { cwd, env: { ...process.env, ...env }, stdio: ['ignore', out, out] });
    child.once('error', (err) => {
      fs.closeSync(out);
      reject(err);
    });
    child.once('exit', (code, signal) => {
      fs.closeSync(out);
      if (code === 0) return resolve();
      const tail = fs.readFileSync(logFile, 'utf8').split('\n').slice(-40).join('\n');
      reject(new Error(`${command} ${args.join(' ')} failed (${signal ?? code}) in ${cwd}:\n${tail}`));
    });
  });
}

/**
 * The README's offline changes, and nothing else: `@alwatr/parse-duration`
 * pinned to the one version the registry has (its lockfile entries, and its
 * dependency's, dropped so npm resolves them again), and the Google font
 * (fetched at build time) replaced by the system font.
 */
function patchForOffline(app: string): void {
  const pkgFile = path.join(app, 'package.json');
  const pkg = JSON.parse(fs.readFileSync(pkgFile, 'utf8')) as { dependencies: Record<string, string> };
  pkg.dependencies['@alwatr/parse-duration'] = '5.5.4';
  fs.writeFileSync(pkgFile, `${JSON.stringify(pkg, null, 2)}\n`);

  const lockFile = path.join(app, 'package-lock.json');
  const lock = JSON.parse(fs.readFileSync(lockFile, 'utf8')) as { packages: Record<string, { dependencies?: Record<string, string> }> };
  delete lock.packages['node_modules/@alwatr/parse-duration'];
  delete lock.packages['node_modules/@alwatr/is-number'];
  const root = lock.packages[''];
  if (root?.dependencies) root.dependencies['@alwatr/parse-duration'] = '5.5.4';
  fs.writeFileSync(lockFile, `${JSON.stringify(lock, null, 2)}\n`);

  const layoutFile = path.join(app, 'src', 'app', 'layout.tsx');
  let layout = fs.readFileSync(layoutFile, 'utf8');
  const before = layout;
  layout = layout.replace(/^import \{ Poppins as FontPoppins \} from 'next\/font\/google'\r?\n/m, '');
  layout = layout.replace(/const (fontSans|fontHeading) = FontPoppins\(\{[^}]*\}\)/g, "const $1 = { variable: '' }");
  if (layout === before || layout.includes('FontPoppins')) throw new Error(`${layoutFile} no longer looks as the offline recipe expects`);
  fs.writeFileSync(layoutFile, layout);
}

/** Where Next.js put the standalone server (nested when it takes a parent folder for the workspace root). */
function findServer(standalone: string): string {
  const direct = path.join(standalone, 'server.js');
  if (fs.existsSync(direct)) return standalone;
  for (const entry of fs.readdirSync(standalone, { recursive: true, withFileTypes: true })) {
    if (entry.isFile() && entry.name === 'server.js' && !entry.parentPath.includes('node_modules')) return entry.parentPath;
  }
  throw new Error(`no server.js in ${standalone}`);
}

/**
 * The standalone build for `apiUrl`, from the cache or built now (minutes):
 * a folder holding server.js, .next/static and public. `log` reports progress.
 */
export async function buildReferenceClient(tarball: string, apiUrl: string, log: (line: string) => void): Promise<string> {
  const hash = crypto.createHash('sha256').update(fs.readFileSync(tarball)).update(`\0recipe ${RECIPE}\0${apiUrl}`).digest('hex').slice(0, 24);
  const root = cacheRoot();
  const done = path.join(root, hash);
  if (fs.existsSync(path.join(done, '.complete'))) return done;

  fs.mkdirSync(root, { recursive: true });
  const work = fs.mkdtempSync(path.join(root, `building-${hash}-`));
  const logFile = path.join(work, 'build.log');
  try {
    log(`building the reference dashboard for ${apiUrl} in ${work} (npm install and next build: minutes; reused later from ${done})`);
    await run('tar', ['-xzf', tarball, '-C', work], work, {}, logFile);
    const app = findApp(work);
    patchForOffline(app);
    await run('npm', ['install', '--no-audit', '--no-fund', '--loglevel=error'], app, {}, logFile);
    const env = { NEXT_TELEMETRY_DISABLED: '1', NEXT_PUBLIC_API_URL: apiUrl, NODE_ENV: 'production' };
    await run(process.execPath, [path.join(app, 'node_modules', 'next', 'dist', 'bin', 'next'), 'build'], app, env, logFile);
    const server = findServer(path.join(app, '.next', 'standalone'));
    fs.cpSync(path.join(app, '.next', 'static'), path.join(server, '.next', 'static'), { recursive: true });
    if (fs.existsSync(path.join(app, 'public'))) fs.cpSync(path.join(app, 'public'), path.join(server, 'public'), { recursive: true });
    fs.writeFileSync(path.join(server, '.complete'), `${new Date().toISOString()} ${apiUrl}\n`);
    try {
      fs.renameSync(server, done);
    } catch (err) {
      // Another run finished the same build first: use that one.
      if (!fs.existsSync(path.join(done, '.complete'))) throw err;
    }
    return done;
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
}

/** The folder holding the app's package.json inside the unpacked tarball. */
function findApp(work: string): string {
  for (const candidate of [path.join(work, 'chronoverse', 'dashboard'), path.join(work, 'dashboard'), work]) {
    if (fs.existsSync(path.join(candidate, 'package.json'))) return candidate;
  }
  throw new Error(`no dashboard package.json in the unpacked tarball (${work})`);
}

export interface ServedClient {
  /** The dashboard's origin, at `localhost`: its middleware builds redirects from its own host name. */
  readonly url: string;
  output(): string;
  stop(): Promise<void>;
}

/** Starts the standalone server of a build on `port` and resolves once it says it is ready. */
export async function serveReferenceClient(dir: string, port: number): Promise<ServedClient> {
  const child = spawn(process.execPath, [path.join(dir, 'server.js')], {
    cwd: dir,
    env: { PATH: process.env.PATH ?? '', HOSTNAME: '127.0.0.1', PORT: String(port), NODE_ENV: 'production', NEXT_TELEMETRY_DISABLED: '1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  await new Promise<void>((resolve, reject) => {
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      if (/Ready in/.test(out)) resolve();
    });
    child.once('exit', (code) => reject(new Error(`the reference dashboard exited with ${code} before it was ready:\n${out}`)));
  });
  return {
    url: `http://localhost:${port}`,
    output: () => out,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await exited;
    },
  };
}
