/**
 * The build: run by `npm start` before the server, by `npm run build`, and,
 * with --install, by the root postinstall at the end of `npm ci`. Its parts:
 *
 * - native: better-sqlite3's addon (SQLite), when it is missing. npm does not
 *   run that package's install script (allowScripts in package.json): this
 *   does what it does (prebuild-install's download, else node-gyp), so that
 *   the compile, a minute or more of one core where no prebuilt binary can be
 *   downloaded, runs beside the two parts below instead of before them. SQLite
 *   is compiled at -O2, its own makefile's default: as fast here as
 *   better-sqlite3's -O3 and a quarter quicker to compile (docs/operations.md).
 *   An addon built or downloaded once is kept outside the tree, in
 *   ~/.cache/orloj/better-sqlite3 (XDG_CACHE_HOME), keyed by the package's
 *   version, Node's ABI, the platform, the CPU and the C library, so the next
 *   install on the machine (a fresh clone, CI) copies it instead of compiling
 *   SQLite again; a copy that does not load is removed and the addon built.
 * - packages: `tsc -b`. Incremental by itself (a change in one package
 *   recompiles that package, and those that use it only when its declarations
 *   changed), but even a build with nothing to do reads every source and
 *   build-info file: seconds on a busy two-core machine. A SHA-256 of its
 *   inputs and of the build-info files it left, kept in
 *   node_modules/.cache/orloj/tsc-inputs, skips it when nothing changed.
 * - dashboard: Vite's build of dashboard/ into dashboard/dist, skipped when a
 *   SHA-256 of what goes into the bundle matches dist/.inputs-sha256 (Vite
 *   clears dist/ on each build, so the record never outlives what it describes).
 *
 *   node scripts/build.mjs [--install] [--dashboard] [--force]
 *
 * --install (postinstall): parts whose sources are not there yet are skipped
 * (the Containerfile installs before it copies them), and a failed packages or
 * dashboard build only warns: `npm start` and `npm test` build again and stop
 * there. --dashboard: the dashboard alone (its package's build script).
 * --force: build whatever the records say.
 *
 * Plain JavaScript and only the build tools that are dependencies (typescript,
 * vite): a production install (`npm ci --omit=dev`) runs it.
 */
/* global process, console, performance */
import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const dashboard = path.join(root, 'dashboard');
const tscRecord = path.join(root, 'node_modules/.cache/orloj/tsc-inputs');
const dashboardRecord = path.join(dashboard, 'dist/.inputs-sha256');
const args = new Set(process.argv.slice(2));
const force = args.has('--force');
const install = args.has('--install');

const seconds = (since) => `${((performance.now() - since) / 1000).toFixed(1)} s`;
const exists = (file) => fs.existsSync(path.join(root, file));
const read = (file) => (fs.existsSync(file) ? fs.readFileSync(file, 'utf8').trim() : '');

/** Runs a command; resolves to its exit code. quiet: output kept, and printed only if it fails. */
function run(command, argv, { cwd = root, env = process.env, quiet = false } = {}) {
  return new Promise((resolve) => {
    const child = spawn(command, argv, { cwd, env, stdio: quiet ? ['ignore', 'pipe', 'pipe'] : 'inherit' });
    let output = '';
    const keep = (chunk) => (output = (output + chunk).slice(-20_000));
    child.stdout?.on('data', keep);
    child.stderr?.on('data', keep);
    child.on('error', (err) => keep(`${err.message}\n`));
    child.on('close', (code) => {
      if (code !== 0 && quiet) process.stderr.write(output);
      resolve(code ?? 1);
    });
  });
}

/** Files below dir (relative to root), sorted. */
function walk(dir) {
  if (!exists(dir)) return [];
  return fs
    .readdirSync(path.join(root, dir), { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => path.relative(root, path.join(e.parentPath, e.name)))
    .sort();
}

function sha256(files) {
  const hash = crypto.createHash('sha256');
  for (const file of files) hash.update(`${file}\0`).update(exists(file) ? fs.readFileSync(path.join(root, file)) : '-').update('\0');
  return hash.digest('hex');
}

/** Where an addon built for exactly this package version and runtime is kept across installs. */
function addonCache(dir) {
  const { version } = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8'));
  const libc = process.report?.getReport().header.glibcVersionRuntime ?? 'other';
  const base = process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache');
  return path.join(base, 'orloj/better-sqlite3', `${version}-abi${process.versions.modules}-${process.platform}-${process.arch}-glibc${libc}`, 'better_sqlite3.node');
}

/** Whether the addon in dir opens a database (a cached copy may not, whatever its key says). */
function loads(dir) {
  const probe = "new (require('./'))(':memory:').prepare('select sqlite_version()').get()";
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['-e', probe], { cwd: dir, stdio: 'ignore' });
    child.on('error', () => resolve(false));
    child.on('close', (code) => resolve(code === 0));
  });
}

/** Keeps the addon just made for the next install; a cache that cannot be written only costs that one its compile. */
function keep(addon, cached) {
  try {
    fs.mkdirSync(path.dirname(cached), { recursive: true });
    const tmp = `${cached}.${process.pid}`;
    fs.copyFileSync(addon, tmp);
    fs.renameSync(tmp, cached); // whole or not at all, for an install running beside this one
  } catch (err) {
    console.log(`[build] better-sqlite3: not kept in ${path.dirname(cached)}: ${err.message}`);
  }
}

/** better-sqlite3's addon, built the way its install script builds it, when it is missing. */
async function native() {
  let dir;
  try {
    dir = path.dirname(createRequire(path.join(root, 'common/package.json')).resolve('better-sqlite3/package.json'));
  } catch {
    return true; // not installed: nothing to build
  }
  const addon = path.join(dir, 'build/Release/better_sqlite3.node');
  if (fs.existsSync(addon)) return true;
  const started = performance.now();
  const cached = addonCache(dir);
  if (fs.existsSync(cached)) {
    fs.mkdirSync(path.dirname(addon), { recursive: true });
    fs.copyFileSync(cached, addon);
    if (await loads(dir)) {
      console.log(`[build] better-sqlite3: the addon built before, copied from ${path.dirname(cached)}`);
      return true;
    }
    console.log(`[build] better-sqlite3: the addon in ${path.dirname(cached)} does not load; building it again`);
    fs.rmSync(addon);
  }
  const prebuilt = createRequire(path.join(dir, 'package.json')).resolve('prebuild-install/bin.js');
  if ((await run(process.execPath, [prebuilt], { cwd: dir, quiet: true })) === 0) {
    console.log(`[build] better-sqlite3: prebuilt binary downloaded in ${seconds(started)}`);
    keep(addon, cached);
    return true;
  }
  console.log('[build] better-sqlite3: no prebuilt binary for this machine; compiling SQLite (a minute or more, beside the rest of the build)');
  // npm names its own node-gyp to every script it runs; outside npm, one on PATH.
  const gyp = process.env.npm_config_node_gyp;
  const [command, argv] = gyp ? [process.execPath, [gyp]] : ['node-gyp', []];
  const env = { ...process.env, JOBS: 'max', CFLAGS: '-O2' };
  if ((await run(command, [...argv, 'rebuild', '--release'], { cwd: dir, env, quiet: true })) !== 0) {
    console.error('[build] better-sqlite3: the compile failed (output above); it needs python3, make and a C++ compiler');
    return false;
  }
  console.log(`[build] better-sqlite3: compiled in ${seconds(started)}`);
  keep(addon, cached);
  return true;
}

/** The projects tsconfig.json builds, in its order. */
function projects() {
  return JSON.parse(fs.readFileSync(path.join(root, 'tsconfig.json'), 'utf8')).references.map((r) => r.path);
}

/** What tsc -b left: each project's build-info file (size, time), or that there is none. */
function tscOutputs() {
  return projects()
    .map((p) => {
      const info = path.join(root, p, 'tsconfig.tsbuildinfo');
      if (!fs.existsSync(info) || !exists(`${p}/dist`)) return `${p}:none`;
      const { size, mtimeMs } = fs.statSync(info);
      return `${p}:${size}:${mtimeMs}`;
    })
    .join(' ');
}

/** tsc -b unless its record matches; resolves to 'built', 'unchanged' or 'failed'. */
async function packages() {
  const inputs = sha256([
    'tsconfig.json',
    'tsconfig.base.json',
    'package-lock.json',
    ...projects().flatMap((p) => [`${p}/tsconfig.json`, `${p}/package.json`, ...walk(`${p}/src`)]),
  ]);
  if (!force && read(tscRecord) === `${inputs} ${tscOutputs()}`) {
    console.log('[build] server packages: up to date');
    return 'unchanged';
  }
  const started = performance.now();
  const tsc = createRequire(path.join(root, 'common/package.json')).resolve('typescript/bin/tsc');
  if ((await run(process.execPath, [tsc, '-b', ...(force ? ['--force'] : [])])) !== 0) {
    console.error('[build] server packages: tsc -b failed');
    return 'failed';
  }
  // The inputs as they were before tsc ran: a file edited meanwhile builds again next time.
  fs.mkdirSync(path.dirname(tscRecord), { recursive: true });
  fs.writeFileSync(tscRecord, `${inputs} ${tscOutputs()}\n`);
  console.log(`[build] server packages: built in ${seconds(started)}`);
  return 'built';
}

/**
 * What the bundle is made of. Tests and the type-only schema.gen.ts are left
 * out: they never reach it, and a change to them needs no new one.
 */
function dashboardInputs() {
  const bundled = walk('dashboard/src').filter((f) => !/\/test\/|\.test\.tsx?$|schema\.gen\.ts$/.test(f));
  return [...bundled, ...walk('dashboard/public'), 'dashboard/index.html', 'dashboard/vite.config.ts', 'dashboard/package.json', 'package-lock.json'];
}

/** The dashboard's Vite build unless its record matches; resolves to whether it succeeded. */
async function dashboardBuild() {
  const inputs = sha256(dashboardInputs());
  if (!force && exists('dashboard/dist/index.html') && read(dashboardRecord) === inputs) {
    console.log('[build] dashboard: up to date');
    return true;
  }
  const started = performance.now();
  try {
    const { build } = await import(createRequire(path.join(dashboard, 'package.json')).resolve('vite'));
    await build({ root: dashboard, logLevel: 'warn' });
  } catch (err) {
    console.error(`[build] dashboard: the Vite build failed: ${err instanceof Error ? err.message : err}`);
    return false;
  }
  fs.writeFileSync(dashboardRecord, `${inputs}\n`);
  console.log(`[build] dashboard: built in ${seconds(started)}`);
  return true;
}

async function sources() {
  if (args.has('--dashboard')) return dashboardBuild();
  const built = await packages();
  return built !== 'failed' && (await dashboardBuild());
}

// Sources are not there yet when the Containerfile installs its dependencies.
const haveSources = exists('tsconfig.json') && exists('dashboard/index.html');
const [nativeOk, sourcesOk] = await Promise.all([args.has('--dashboard') || native(), haveSources ? sources() : install || sources()]);
if (!nativeOk) process.exit(1);
if (!sourcesOk) {
  if (!install) process.exit(1);
  console.error('[build] the build failed (above); npm start and npm test will try again');
}
