/**
 * The Idempotency-Key rules (contract: valid UTF-8, 1 to 255 bytes after trimming
 * outer U+0020 only, no Unicode control characters, sent once) as a property
 * against a model of them, plus every boundary by name: a 1-byte key, the
 * 255/256-byte edge in 1-, 2-, 3- and 4-byte characters, a tab or a no-break
 * space at the edges. The HTTP path is in workflows.test.ts ("Idempotency-Key").
 */
import assert from 'node:assert/strict';
import type { Context } from 'koa';
import fc from 'fast-check';
import { readIdempotencyKey } from '../src/http/idempotency.js';

/** What the header's bytes mean for the key: the key, or the reason it is refused. */
function model(bytes: Buffer): string | { invalid: true } {
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    return { invalid: true };
  }
  const key = text.replace(/^ +| +$/g, '');
  const size = Buffer.byteLength(key);
  if (size < 1 || size > 255 || /\p{Cc}/u.test(key)) return { invalid: true };
  return key;
}

/** The header as Node hands it to the app: each byte one latin1 character. */
function read(...values: Buffer[]): string | { invalid: true } {
  const ctx = { req: { rawHeaders: values.flatMap((v) => ['Idempotency-Key', v.toString('latin1')]) } } as unknown as Context;
  try {
    return readIdempotencyKey(ctx);
  } catch (err) {
    assert.equal((err as { code?: string }).code, 'idempotency_key_invalid');
    return { invalid: true };
  }
}

const utf8 = (s: string) => Buffer.from(s, 'utf8');

describe('Idempotency-Key rules', () => {
  it('accepts exactly the keys the contract allows, trimmed of outer spaces only (property)', () => {
    const text = fc.oneof(
      fc.string({ unit: 'grapheme', maxLength: 300 }),
      fc.string({ unit: fc.constantFrom(' ', '\t', '\u00a0', 'a', 'é', '€', '😀', '\u0085', '\u007f'), maxLength: 300 }),
    );
    fc.assert(fc.property(text, (s) => assert.deepEqual(read(utf8(s)), model(utf8(s)))));
    fc.assert(fc.property(fc.uint8Array({ maxLength: 300 }), (b) => assert.deepEqual(read(Buffer.from(b)), model(Buffer.from(b)))));
  });

  it('accepts a 1-byte key and refuses an empty or all-space one', () => {
    assert.equal(read(utf8('k')), 'k');
    assert.equal(read(utf8('  k  ')), 'k');
    assert.deepEqual(read(utf8('')), { invalid: true });
    assert.deepEqual(read(utf8('     ')), { invalid: true });
  });

  it('draws the 255/256-byte line in bytes, whatever the width of the characters', () => {
    for (const ch of ['a', 'é', '€', '😀']) {
      const width = utf8(ch).length;
      const fits = ch.repeat(Math.floor(255 / width));
      const key255 = fits + 'a'.repeat(255 - utf8(fits).length);
      assert.equal(utf8(key255).length, 255);
      assert.equal(read(utf8(key255)), key255, `255 bytes of ${ch}`);
      assert.deepEqual(read(utf8(key255 + 'a')), { invalid: true }, `256 bytes of ${ch}`);
      // A multi-byte character across the line is refused whole, never cut to fit.
      if (width > 1) assert.deepEqual(read(utf8(fits.slice(0, -ch.length) + 'a'.repeat(255 - utf8(fits).length + 1) + ch)), { invalid: true });
      // Outer spaces do not count.
      assert.equal(read(utf8(`   ${key255}   `)), key255);
    }
  });

  it('keeps a no-break space at the edges as part of the key, and refuses a tab there (a control character)', () => {
    assert.equal(read(utf8('\u00a0k\u00a0')), '\u00a0k\u00a0');
    assert.notEqual(read(utf8('\u00a0k')), read(utf8('k')));
    for (const value of ['\tk', 'k\t', ' \tk ', 'k\u0085']) assert.deepEqual(read(utf8(value)), { invalid: true }, JSON.stringify(value));
  });

  it('refuses the header sent twice, even with one value', () => {
    assert.deepEqual(read(utf8('a'), utf8('a')), { invalid: true });
  });
});
