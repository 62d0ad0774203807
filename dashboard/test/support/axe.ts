/** axe-core in a page of the browser suites. */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import type { Page } from 'playwright-core';

const AXE = createRequire(import.meta.url).resolve('axe-core/axe.min.js');

let axeSource: string | undefined;

interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: { target: string[]; failureSummary?: string }[];
}

/** axe-core's WCAG 2.1 A and AA rules over the page as it is now; the violations, described. */
export async function axeViolations(page: Page): Promise<string[]> {
  // Evaluated over the DevTools protocol, which the page's strict CSP does not govern (a script tag would be refused).
  await page.evaluate(axeSource ??= fs.readFileSync(AXE, 'utf8'));
  const violations = await page.evaluate<AxeViolation[]>(
    `axe.run(document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'] } }).then((r) => r.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map((n) => ({ target: n.target, failureSummary: n.failureSummary })) })))`,
  );
  return violations.map((v) => `${v.id} (${v.impact}): ${v.help}\n${v.nodes.map((n) => `  ${n.target.join(' ')}: ${n.failureSummary ?? ''}`).join('\n')}`);
}


/** Asserts axe finds the page clean in light and in dark, with a screenshot of each (`<shot>-light`, `<shot>-dark`); leaves it light. */
export async function assertAxeCleanInBothSchemes(page: Page, what: string, shot: string, save: (page: Page, name: string) => Promise<void>): Promise<void> {
  for (const scheme of ['light', 'dark'] as const) {
    await page.emulateMedia({ colorScheme: scheme });
    assert.deepEqual(await axeViolations(page), [], `${what} in ${scheme}`);
    await save(page, `${shot}-${scheme}`);
  }
  await page.emulateMedia({ colorScheme: 'light' });
}
