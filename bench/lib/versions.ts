import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { REPO_ROOT } from './child.js';

/** The installed version of a root dependency, for reports. */
export function installedVersion(pkg: string): string {
  try {
    const json = JSON.parse(fs.readFileSync(path.join(REPO_ROOT, 'node_modules', pkg, 'package.json'), 'utf8')) as { version?: string };
    return json.version ?? '?';
  } catch {
    return '?';
  }
}

/** The commit the benchmarked code is at (`abc1234`, plus a note when the tree has uncommitted changes), for reports. */
export function codeVersion(): string {
  const git = (...args: string[]) => spawnSync('git', args, { cwd: REPO_ROOT, encoding: 'utf8' });
  const head = git('rev-parse', '--short', 'HEAD');
  if (head.status !== 0) return 'unknown (no git)';
  const dirty = git('status', '--porcelain', '--untracked-files=no');
  return `commit ${head.stdout.trim()}${dirty.status === 0 && dirty.stdout.trim() ? ' with uncommitted changes' : ''}`;
}
