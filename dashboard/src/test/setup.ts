import { format } from 'node:util';
import { cleanup, configure } from '@testing-library/react';
import { afterAll, afterEach } from 'vitest';
import { installFakeApi } from './fake-api';

installFakeApi();

// findBy… and waitFor wait for what the page shows; 1 s (the default) runs out on a busy machine.
configure({ asyncUtilTimeout: 15_000 });

/**
 * React reports misuse (an update outside act, flushSync while rendering, a missing key, …)
 * on console.error and console.warn: a test during which anything is written there fails,
 * naming what was written, as the browser suites fail on any console error. Checked after
 * cleanup (after-hooks run last registered first), so an unmount's reports count too; what
 * comes after the last test of a file fails the file.
 */
const reported: string[] = [];
for (const level of ['error', 'warn'] as const) {
  console[level] = (...args: unknown[]) => {
    reported.push(`console.${level}: ${format(...args)}`);
  };
}
function failOnReports(): void {
  if (reported.length === 0) return;
  const all = reported.splice(0);
  throw new Error(`${all.length} console report(s) during the test:\n${all.join('\n')}`);
}
afterEach(failOnReports);
afterAll(failOnReports);

afterEach(cleanup);
