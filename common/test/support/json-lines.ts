/**
 * The keys that occur more than once in the top-level object of a JSON text
 * (JSON.parse keeps the last one silently, so a log line saying `"role"`
 * twice would pass a parse). A small scanner: strings and nesting only.
 */
export function duplicateKeys(text: string): string[] {
  const seen = new Set<string>();
  const duplicates: string[] = [];
  let depth = 0;
  let expectKey = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '"') {
      let j = i + 1;
      while (text[j] !== '"') j += text[j] === '\\' ? 2 : 1;
      if (depth === 1 && expectKey) {
        const key = JSON.parse(text.slice(i, j + 1)) as string;
        if (seen.has(key)) duplicates.push(key);
        seen.add(key);
        expectKey = false;
      }
      i = j;
    } else if (c === '{' || c === '[') {
      depth += 1;
      if (depth === 1) expectKey = true;
    } else if (c === '}' || c === ']') depth -= 1;
    else if (c === ',' && depth === 1) expectKey = true;
  }
  return duplicates;
}

/** Every non-empty line of `output` is a JSON object with no key twice; returns them parsed. */
export function jsonLines(output: string): Record<string, unknown>[] {
  return output
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => {
      let parsed: unknown;
      try {
        parsed = JSON.parse(l);
      } catch {
        throw new Error(`not a JSON line on stdout: ${l}`);
      }
      if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new Error(`not a JSON object on stdout: ${l}`);
      const dup = duplicateKeys(l);
      if (dup.length) throw new Error(`duplicate keys ${dup.join(', ')} in: ${l}`);
      return parsed as Record<string, unknown>;
    });
}
