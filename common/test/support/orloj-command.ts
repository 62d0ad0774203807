import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');

/**
 * The `node` arguments that run the `orloj` command in a child process (before its own
 * arguments). From the sources through tsx, so a suite tests the tree as it is without a
 * build; with ORLOJ_TEST_BUILT=1 from server/dist, which scripts/test.sh sets once its
 * `tsc -b` has built every package from those same sources. A built process starts on
 * half the CPU (about 1 s instead of 2.2 s here), and the system tiers start hundreds of
 * them (docs/testing.md, "Where the CPU goes").
 */
export function orlojNodeArgs(): string[] {
  if (process.env.ORLOJ_TEST_BUILT === '1') return [path.join(ROOT, 'server/dist/bin.js')];
  return ['--import', 'tsx', '--conditions=orloj-src', path.join(ROOT, 'server/src/bin.ts')];
}
