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
