import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/**
 * A fresh folder under the system's temp folder for the suite that calls this (made in a
 * `before` hook, removed in `after`), or for each of its tests (`{ each: true }`:
 * `beforeEach`/`afterEach`). Returns a reader of its path, valid once the hook has run.
 */
export function tempDir(prefix: string, options: { each?: boolean } = {}): () => string {
  let dir: string | undefined;
  const make = () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  };
  const remove = () => {
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
    dir = undefined;
  };
  if (options.each) {
    beforeEach(make);
    afterEach(remove);
  } else {
    before(make);
    after(remove);
  }
  return () => {
    if (!dir) throw new Error(`tempDir(${prefix}): read outside the hooks that make it`);
    return dir;
  };
}
