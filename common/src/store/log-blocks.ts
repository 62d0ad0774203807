import type { Kysely } from 'kysely';
import type { Database } from './schema.js';
import { foldCase, type DialectHelpers } from './dialect.js';

/**
 * The skip index of log search (docs/adr/0007-log-search-skip-index.md).
 *
 * An attempt's sequence numbers are cut into blocks of BLOCK_LINES; a block's
 * row in `job_log_blocks` holds a bloom filter of every trigram (three UTF-16
 * units) of the folded text of exactly the stored lines `seq_from … seq_to`.
 * A needle of three or more units occurs in a line only if all its trigrams
 * do, so a block whose filter lacks one of them cannot hold a match and search
 * skips its rows; every line outside a block's range (the lines of jobs logged
 * before migration 0013, and anything the indexer could not cover) is scanned
 * as before. A filter can only say "maybe": results stay exact.
 *
 * Text is taken as the database stores and compares it: folded with
 * {@link foldCase} (what both engines' search applies), NUL and lone
 * surrogates as U+FFFD (what log-ingest and the drivers' UTF-8 encoding store).
 */

/** Sequence numbers per block: block b holds b·BLOCK_LINES … (b+1)·BLOCK_LINES − 1. */
export const BLOCK_LINES = 1024;
/** Bytes of a block's filter (a power of two). */
export const BLOOM_BYTES = 2048;
/*
 * One bit per trigram (k = 1): a needle has as many trigrams as characters
 * less two, and every one of them must be present, so the false positive
 * rate of a block falls with the needle's length anyway; one hash keeps the
 * ingest hook at a few nanoseconds a character (docs/adr/0007, "Measurement").
 */

/** The UTF-16 unit at `i` of `s` as stored: NUL and lone surrogates read back as U+FFFD. */
function storedUnit(s: string, i: number): number {
  const c = s.charCodeAt(i);
  if (c === 0) return 0xfffd;
  if (c < 0xd800 || c > 0xdfff) return c;
  if (c <= 0xdbff) {
    const next = s.charCodeAt(i + 1);
    return next >= 0xdc00 && next <= 0xdfff ? c : 0xfffd;
  }
  const prev = s.charCodeAt(i - 1);
  return prev >= 0xd800 && prev <= 0xdbff ? c : 0xfffd;
}

/** The hash of the trigram (a, b, c) of UTF-16 units: a multiply-xorshift, whose low bits pick the bit. */
function trigramHash(a: number, b: number, c: number): number {
  let h = Math.imul(Math.imul(a, 0x9e3779b1) ^ Math.imul(b, 0x85ebca77) ^ c, 0xc2b2ae3d);
  h ^= h >>> 15;
  h = Math.imul(h, 0x2c1b3c6d);
  h ^= h >>> 12;
  return h >>> 0;
}

/**
 * Adds the trigrams of one stored line to a filter. The hot loop of the
 * ingest hook, so written out: an ASCII line (most log lines) is folded as it
 * is read, without building its lowercase copy; any other line is folded
 * whole by foldCase first (bits set twice for an ASCII prefix do no harm).
 */
export function addLine(bloom: Uint8Array, message: string): void {
  const mask = bloom.length * 8 - 1;
  let a = -1;
  let b = -1;
  for (let i = 0; i < message.length; i++) {
    let c = message.charCodeAt(i);
    if (c >= 0x80) {
      addFolded(bloom, foldCase(message), mask);
      return;
    }
    if (c >= 0x41 && c <= 0x5a) c += 0x20;
    else if (c === 0) c = 0xfffd;
    if (a >= 0) {
      const bit = trigramHash(a, b, c) & mask;
      bloom[bit >>> 3]! |= 1 << (bit & 7);
    }
    a = b;
    b = c;
  }
}

function addFolded(bloom: Uint8Array, text: string, mask: number): void {
  let a = -1;
  let b = -1;
  for (let i = 0; i < text.length; i++) {
    let c = text.charCodeAt(i);
    if (c === 0 || (c >= 0xd800 && c <= 0xdfff)) c = storedUnit(text, i);
    if (a >= 0) {
      const bit = trigramHash(a, b, c) & mask;
      bloom[bit >>> 3]! |= 1 << (bit & 7);
    }
    a = b;
    b = c;
  }
}

/**
 * The hash values a filter must hold for a block to possibly contain the
 * (already folded) needle, or undefined when the needle is shorter than a
 * trigram and no block can be skipped.
 */
export function needleProbes(folded: string): number[] | undefined {
  if (folded.length < 3) return undefined;
  const probes = new Set<number>();
  for (let i = 2; i < folded.length; i++) probes.add(trigramHash(storedUnit(folded, i - 2), storedUnit(folded, i - 1), storedUnit(folded, i)));
  return [...probes];
}

/** Whether the filter lacks one of the probes: its block cannot contain the needle. */
export function bloomLacks(bloom: Uint8Array, probes: readonly number[]): boolean {
  const mask = bloom.length * 8 - 1;
  for (const h of probes) {
    const bit = h & mask;
    if ((bloom[bit >>> 3]! & (1 << (bit & 7))) === 0) return true;
  }
  return false;
}

let lastProbeText = '';
let lastProbes: number[] = [];
/** `orloj_bloom_lacks(bloom, probes)` for SQLite connections: 1 when the block cannot match. */
export function sqliteBloomLacks(bloom: unknown, probes: unknown): number {
  if (!(bloom instanceof Uint8Array) || typeof probes !== 'string') return 0;
  if (probes !== lastProbeText) {
    lastProbes = probes === '' ? [] : probes.split(',').map(Number);
    lastProbeText = probes;
  }
  return bloomLacks(bloom, lastProbes) ? 1 : 0;
}

interface BlockRow {
  block_num: number;
  seq_from: number;
  seq_to: number;
  bloom: Uint8Array;
}

/**
 * The ingest hook: after a batch of an attempt's lines is stored, adds them to
 * their blocks' filters in the same transaction. A block's row grows while its
 * lines arrive (the tail block of a running job is indexed too) and always
 * describes a contiguous range of stored lines: lines that would leave a gap
 * in a block's range (they never should: an attempt's stored lines are a
 * prefix, docs/logs.md) stay outside every range and are scanned.
 */
export async function indexLogBlocks(
  db: Kysely<Database>,
  dialect: DialectHelpers,
  jobId: string,
  attempt: number,
  lines: readonly { sequence_num: number; message: string }[],
): Promise<void> {
  if (lines.length === 0) return;
  let sorted = lines;
  for (let i = 1; i < lines.length; i++) {
    if (lines[i]!.sequence_num <= lines[i - 1]!.sequence_num) {
      sorted = [...lines].sort((x, y) => x.sequence_num - y.sequence_num);
      break;
    }
  }
  const first = Math.floor(sorted[0]!.sequence_num / BLOCK_LINES);
  const last = Math.floor(sorted[sorted.length - 1]!.sequence_num / BLOCK_LINES);
  let q = db
    .selectFrom('job_log_blocks')
    .select(['block_num', 'seq_from', 'seq_to', 'bloom'])
    .where('job_id', '=', jobId)
    .where('attempt', '=', attempt)
    .where('block_num', '>=', first)
    .where('block_num', '<=', last);
  if (dialect.rowLocks) q = q.forUpdate();
  const existing = new Map<number, BlockRow>();
  for (const row of (await q.execute()) as BlockRow[]) existing.set(row.block_num, row);

  const rows: { job_id: string; attempt: number; block_num: number; seq_from: number; seq_to: number; bloom: Buffer }[] = [];
  for (let i = 0; i < sorted.length; ) {
    const block = Math.floor(sorted[i]!.sequence_num / BLOCK_LINES);
    const from = sorted[i]!.sequence_num;
    let j = i + 1;
    let contiguous = true;
    while (j < sorted.length && Math.floor(sorted[j]!.sequence_num / BLOCK_LINES) === block) {
      if (sorted[j]!.sequence_num !== sorted[j - 1]!.sequence_num + 1) contiguous = false;
      j++;
    }
    const to = sorted[j - 1]!.sequence_num;
    const old = existing.get(block);
    // The union of two ranges is one range only when they touch.
    const mergeable = !old || (old.bloom.length === BLOOM_BYTES && from <= old.seq_to + 1 && to >= old.seq_from - 1);
    if (contiguous && mergeable) {
      const bloom = Buffer.alloc(BLOOM_BYTES);
      if (old) bloom.set(old.bloom);
      for (let k = i; k < j; k++) addLine(bloom, sorted[k]!.message);
      rows.push({
        job_id: jobId,
        attempt,
        block_num: block,
        seq_from: old ? Math.min(old.seq_from, from) : from,
        seq_to: old ? Math.max(old.seq_to, to) : to,
        bloom,
      });
    }
    i = j;
  }
  if (rows.length === 0) return;
  await db
    .insertInto('job_log_blocks')
    .values(rows)
    .onConflict((oc) =>
      oc.columns(['job_id', 'attempt', 'block_num']).doUpdateSet((eb) => ({
        seq_from: eb.ref('excluded.seq_from'),
        seq_to: eb.ref('excluded.seq_to'),
        bloom: eb.ref('excluded.bloom'),
      })),
    )
    .execute();
}
