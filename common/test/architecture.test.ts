import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

// ARCHITECTURE.md's "Following the two main paths" lists the files a reader opens, each with
// the symbol to look for. This keeps the lists true to the code: every listed file exists and
// holds the symbol named beside it, and each path's stated counts are the list's own.
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

interface Step {
  kind: 'step' | 'jump' | 'plumbing';
  file: string;
  symbol: string;
  line: string;
}

interface PathList {
  title: string;
  files: number;
  jumps: number;
  steps: Step[];
}

/** The section's paths: each `- **title (N files, M jumps back):**` followed by its items. */
function readPaths(): PathList[] {
  const text = fs.readFileSync(path.join(root, 'ARCHITECTURE.md'), 'utf8');
  const start = text.indexOf('## Following the two main paths');
  assert.ok(start >= 0, 'ARCHITECTURE.md has the section "Following the two main paths"');
  const end = text.indexOf('\n## ', start + 3);
  const section = text.slice(start, end < 0 ? undefined : end);
  const paths: PathList[] = [];
  // One item per numbered line or sub-bullet; an item's text runs on over its indented lines.
  const items: string[] = [];
  for (const line of section.split('\n')) {
    const heading = /^- \*\*(.+) \((\d+) files, (\d+) jumps? back\):\*\*$/.exec(line);
    if (heading) {
      items.length = 0;
      paths.push({ title: heading[1]!, files: Number(heading[2]), jumps: Number(heading[3]), steps: [] });
      continue;
    }
    const current = paths.at(-1);
    if (!current) continue;
    if (/^\s+(\d+\.|-) /.test(line)) items.push(line.trim());
    else if (/^\s+\S/.test(line) && items.length > 0) items[items.length - 1] += ` ${line.trim()}`;
    else continue;
    current.steps = items.map(parseItem);
  }
  return paths;
}

function parseItem(item: string): Step {
  const m = /`([\w./-]+\.ts)` — `([\w.]+)`/.exec(item);
  assert.ok(m, `a listed step names a file and, after " — ", its symbol: ${item}`);
  const kind = /^\d+\. /.test(item) ? 'step' : item.startsWith('- ⤺') ? 'jump' : item.startsWith('- (plumbing)') ? 'plumbing' : undefined;
  assert.ok(kind, `a listed item is a numbered step, a "- ⤺ N" jump back or a "- (plumbing)" crossing: ${item}`);
  return { kind, file: m[1]!, symbol: m[2]!, line: item };
}

describe("ARCHITECTURE.md's two main paths", () => {
  const paths = readPaths();

  it('lists both paths', () => {
    assert.deepEqual(
      paths.map((p) => p.title.split(',')[0]),
      ['A manual job', 'A container log line'],
    );
  });

  it('names files that exist, each holding the symbol named beside it', () => {
    for (const p of paths) {
      for (const step of p.steps) {
        const file = path.join(root, step.file);
        assert.ok(fs.existsSync(file), `${p.title}: ${step.file} exists`);
        const source = fs.readFileSync(file, 'utf8');
        for (const part of step.symbol.split('.')) {
          assert.match(source, new RegExp(`\\b${part}\\b`), `${p.title}: ${step.file} holds ${part}`);
        }
      }
    }
  });

  it("states each path's counts as its list has them: numbered steps in distinct files, jumps back into files read earlier", () => {
    for (const p of paths) {
      const counted = p.steps.filter((s) => s.kind === 'step');
      assert.equal(counted.length, p.files, `${p.title}: ${p.files} files`);
      assert.equal(new Set(counted.map((s) => s.file)).size, counted.length, `${p.title}: each counted file once`);
      counted.forEach((s, i) => assert.ok(s.line.startsWith(`${i + 1}. `), `${p.title}: steps numbered in order (${s.line})`));
      const jumps = p.steps.filter((s) => s.kind === 'jump');
      assert.equal(jumps.length, p.jumps, `${p.title}: ${p.jumps} jumps back`);
      jumps.forEach((jump, i) => {
        assert.ok(jump.line.startsWith(`- ⤺ ${i + 1} `), `${p.title}: jumps back numbered in order (${jump.line})`);
        const before = p.steps.slice(0, p.steps.indexOf(jump)).filter((s) => s.kind === 'step');
        assert.ok(before.some((s) => s.file === jump.file), `${p.title}: a jump back reopens a file read at an earlier step (${jump.file})`);
      });
      for (const s of p.steps.filter((s) => s.kind === 'plumbing')) {
        assert.ok(!counted.some((c) => c.file === s.file), `${p.title}: ${s.file} is either plumbing or a counted step`);
      }
    }
  });

  it('keeps the paths within their bounds (issue 23: 15 files and 2 jumps back for the manual job, 12 files for the log line)', () => {
    const [job, line] = paths;
    assert.ok(job!.files <= 15, `the manual job: ${job!.files} files`);
    assert.ok(job!.jumps <= 2, `the manual job: ${job!.jumps} jumps back`);
    assert.ok(line!.files <= 12, `the log line: ${line!.files} files`);
  });
});
