import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const DOC = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../docs/operations.md');

export interface SignalSection {
  heading: string;
  body: string;
  /** The names it covers: the heading's words and the metric names in its heading or its **Signal:** line. */
  names: Set<string>;
}

/** The `####` sections of docs/operations.md, "Signals: what they mean and what to do". */
export function signalSections(): SignalSection[] {
  const doc = fs.readFileSync(DOC, 'utf8');
  const start = doc.indexOf('### Signals: what they mean and what to do');
  if (start === -1) throw new Error('docs/operations.md has no "Signals" section');
  const end = doc.indexOf('\n## ', start);
  return doc
    .slice(start, end === -1 ? undefined : end)
    .split(/^#### /m)
    .slice(1)
    .map((part) => {
      const [heading = '', ...rest] = part.split('\n');
      const body = rest.join('\n');
      const signal = /\*\*Signal:\*\*([\s\S]*?)(?=\*\*Means|$)/.exec(body)?.[1] ?? '';
      const names = new Set([...heading.split(/\s+/), ...[...`${heading} ${signal}`.matchAll(/\b(?:orloj|nodejs|process)_[a-z0-9_]+/g)].map((m) => m[0])]);
      return { heading: heading.trim(), body, names };
    });
}

/** The section that covers `name`, checked to say what it means and what to do. */
export function signalSection(name: string): SignalSection {
  const found = signalSections().find((s) => s.names.has(name));
  if (!found) throw new Error(`docs/operations.md, "Signals", has no section for ${name}`);
  for (const part of ['**Signal:**', '**Means', '**Do']) {
    if (!found.body.includes(part)) throw new Error(`the section "${found.heading}" (for ${name}) lacks ${part}`);
  }
  return found;
}
