/**
 * Preloaded (`--import`) into an `orloj` process by runners-process.test.ts: at exit
 * it writes the CommonJS modules the process loaded to ORLOJ_LOADED_MODULES_FILE.
 * better-sqlite3 and pg are CommonJS, so an ESM `import` of either lands in this
 * cache too; reading it at exit needs no timing.
 */
import fs from 'node:fs';
import { createRequire } from 'node:module';

const file = process.env.ORLOJ_LOADED_MODULES_FILE;
if (file) {
  const cache = createRequire(import.meta.url).cache;
  process.on('exit', () => fs.writeFileSync(file, JSON.stringify(Object.keys(cache))));
}
