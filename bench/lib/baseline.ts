import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { REPO_ROOT } from './child.js';

/**
 * An older commit of orloj built from this repository's history into a
 * scratch directory, so a suite can measure it beside the current tree on the
 * same machine in the same run: `git worktree add` of the commit, `npm ci`
 * there, its own build. Kept after the run (a marker file records a finished
 * build), so later runs reuse it; `git worktree remove <dir>` deletes it.
 */
export interface BuiltTree {
  /** Full hash. */
  commit: string;
  short: string;
  root: string;
  /** How it was built, for reports. */
  how: string;
}

const ADDON = path.join('node_modules', 'better-sqlite3', 'build', 'Release', 'better_sqlite3.node');
const MARKER = '.orloj-bench-built';

function git(cwd: string, ...args: string[]): string {
  const r = spawnSync('git', args, { cwd, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`git ${args.join(' ')} failed: ${r.stderr.trim()}`);
  return r.stdout.trim();
}

/** Runs a build step with its output appended to `logFile`; rejects with the log's tail when it fails. */
function step(cwd: string, logFile: string, command: string, args: string[]): Promise<void> {
  fs.appendFileSync(logFile, `\n$ ${command} ${args.join(' ')}\n`);
  const out = fs.openSync(logFile, 'a');
  return new Promise<void>((resolve, reject) => {
    const child = spawn(command, args, { cwd, stdio: ['ignore', out, out] });
    fs.closeSync(out);
    child.on('error', reject);
    child.on('exit', (code) => {
      if (code === 0) resolve();
      else reject(new Error(`${command} ${args.join(' ')} in ${cwd} exited ${code}:\n${fs.readFileSync(logFile, 'utf8').slice(-3000)}`));
    });
  });
}

const versionOf = (root: string, pkg: string): string | undefined => {
  try {
    return (JSON.parse(fs.readFileSync(path.join(root, 'node_modules', pkg, 'package.json'), 'utf8')) as { version?: string }).version;
  } catch {
    return undefined;
  }
};

/**
 * Builds `commitish` into `dir` (default: <tmp>/orloj-bench-<short hash>),
 * or reuses an earlier build there. SQLite: when the commit locks the same
 * better-sqlite3 version as this tree, this tree's compiled addon is copied
 * in (npm ci runs without install scripts, as deploy/test/production-install
 * does: compiling SQLite takes minutes here); otherwise it is compiled.
 */
export async function buildFromHistory(commitish: string, dir: string | undefined, log: (m: string) => void): Promise<BuiltTree> {
  const commit = git(REPO_ROOT, 'rev-parse', '--verify', `${commitish}^{commit}`);
  const short = commit.slice(0, 7);
  const root = path.resolve(dir ?? path.join(os.tmpdir(), `orloj-bench-${short}`));
  const marker = path.join(root, MARKER);
  if (fs.existsSync(marker) && fs.readFileSync(marker, 'utf8').startsWith(commit)) {
    return { commit, short, root, how: fs.readFileSync(marker, 'utf8').slice(commit.length).trim() };
  }
  if (!fs.existsSync(root)) {
    log(`${short}: git worktree add ${root}`);
    git(REPO_ROOT, 'worktree', 'add', '--detach', root, commit);
  } else if (git(root, 'rev-parse', 'HEAD') !== commit) {
    throw new Error(`${root} exists and is not a checkout of ${short}: remove it or set BENCH_BASELINE_DIR`);
  }
  const logFile = path.join(root, '.orloj-bench-build.log');
  const started = performance.now();
  if (!fs.existsSync(path.join(root, 'node_modules', '.package-lock.json'))) {
    log(`${short}: npm ci (log in ${logFile})`);
    await step(root, logFile, 'npm', ['ci', '--ignore-scripts', '--prefer-offline', '--no-audit', '--no-fund']);
  }
  const ours = versionOf(REPO_ROOT, 'better-sqlite3');
  const theirs = versionOf(root, 'better-sqlite3');
  let sqlite: string;
  if (ours && ours === theirs && fs.existsSync(path.join(REPO_ROOT, ADDON))) {
    fs.mkdirSync(path.dirname(path.join(root, ADDON)), { recursive: true });
    fs.copyFileSync(path.join(REPO_ROOT, ADDON), path.join(root, ADDON));
    sqlite = `better-sqlite3 ${theirs}, the addon compiled in the current tree (same version)`;
  } else {
    log(`${short}: compiling better-sqlite3 ${theirs ?? '?'} (this tree has ${ours ?? 'none'})`);
    await step(root, logFile, 'npm', ['rebuild', 'better-sqlite3']);
    sqlite = `better-sqlite3 ${theirs ?? '?'}, compiled by its own install script`;
  }
  // The build a user's `npm start` runs at that commit.
  const script = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as { scripts?: Record<string, string> };
  log(`${short}: npm run build (${script.scripts?.build ?? '?'})`);
  await step(root, logFile, 'npm', ['run', 'build']);
  const how = `\`git worktree add\` of ${short} in a scratch directory, \`npm ci --ignore-scripts\`, ${sqlite}, \`npm run build\` (\`${script.scripts?.build ?? '?'}\`)`;
  fs.writeFileSync(marker, `${commit} ${how}\n`);
  log(`${short}: built in ${Math.round((performance.now() - started) / 1000)} s`);
  return { commit, short, root, how };
}
