import assert from 'node:assert/strict';
import fc from 'fast-check';
import { newId } from '@orloj/common/core';
import { foldCase, type LogLine, type LogLineInput, type Store } from '@orloj/common/store';
import { BLOCK_LINES, BLOOM_BYTES, addLine, bloomLacks, needleProbes } from '../src/store/log-blocks.js';
import { describeEachEngine } from './support/stores.js';
import { insertLogJob } from './support/fixtures.js';

// Pieces of random lines: case variants, letters whose fold is not ASCII, astral
// characters, pattern characters, NUL and lone surrogates (stored as U+FFFD).
const PIECES = ['needle', 'NEEDLE', 'NeEdLe', 'grüße', 'GRÜSSE', 'İstanbul', 'ΣΊΣΥΦΟΣ', 'σίσυφοσ', '🌍x', 'ab', 'b', ' ', '%_\\', 'x', 'zq', '\u0000', '\ud800', '\udc00y', 'ẞ', 'ß'];
// Needles: present on many lines, on few, on none, across pieces, and shorter than a trigram.
const NEEDLES = ['needle', 'NEEDLE', 'edl', 'grüße', 'ÜSS', 'istan', 'σίσ', 'ΣΥΦ', '🌍', '🌍x', 'le n', 'ab b', 'zqzq', 'absent-term', 'x', 'ab', '%_\\', '\ufffd', '\ufffdy', 'ßẞ', 'needle needle'];

/** A seeded generator of integers in [0, n). */
function mulberry32(seed: number): (n: number) => number {
  let a = seed >>> 0;
  return (n) => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return Math.floor((((t ^ (t >>> 14)) >>> 0) / 4294967296) * n);
  };
}

const lineArb = fc.array(fc.constantFrom(...PIECES), { minLength: 0, maxLength: 8 }).map((p) => p.join(''));

describe('log block filters', () => {
  it('never lack the trigrams of a substring of a line they were given, in any case', () => {
    fc.assert(
      fc.property(fc.array(lineArb, { minLength: 1, maxLength: 20 }), fc.nat(), fc.nat(), fc.nat(), fc.boolean(), (lines, which, at, len, upper) => {
        const bloom = new Uint8Array(BLOOM_BYTES);
        for (const line of lines) addLine(bloom, line);
        const line = lines[which % lines.length]!;
        const start = at % (line.length + 1);
        const sub = line.slice(start, start + 3 + (len % 6));
        const probes = needleProbes(foldCase(upper ? sub.toUpperCase() : sub));
        // a substring that still folds to a substring of the folded line (ß → SS does not), not
        // cut through a surrogate pair (a lone half is searched, and stored, as U+FFFD)
        const wellFormed = Buffer.from(sub).toString() === sub;
        if (probes && wellFormed && foldCase(line).includes(foldCase(upper ? sub.toUpperCase() : sub))) assert.equal(bloomLacks(bloom, probes), false);
      }),
      { numRuns: 500 },
    );
  });

  it('skip nothing for needles shorter than a trigram', () => {
    assert.equal(needleProbes('ab'), undefined);
    assert.equal(needleProbes('🌍'), undefined);
    assert.ok(needleProbes('abc'));
  });
});

describeEachEngine('log search with the skip index', (db) => {
  /** Every page of a search, newest first, through ownedPage (which uses the skip index). */
  async function searchAll(store: Store, j: { jobId: string; userId: string; workflowId: string }, needle: string, limit: number, stream?: 'stdout' | 'stderr'): Promise<number[]> {
    const match = store.logQueries.matcher(needle);
    const out: number[] = [];
    let before: number | undefined;
    for (;;) {
      const page = await store.logQueries.ownedPage(
        { userId: j.userId, workflowId: j.workflowId },
        { jobId: j.jobId, match, limit, ...(stream ? { stream } : {}), ...(before !== undefined ? { before } : {}) },
      );
      if (!page) return out;
      assert.ok(page.lines.length <= limit);
      out.push(...page.lines.map((l) => l.sequenceNum));
      if (page.lines.length < limit) return out;
      before = page.lines[page.lines.length - 1]!.sequenceNum;
    }
  }

  /** The plain scan: every matching line by the old statement (no index), newest first. */
  async function scanAll(store: Store, jobId: string, needle: string, stream?: 'stdout' | 'stderr'): Promise<number[]> {
    const lines: LogLine[] = [];
    for await (const batch of store.logQueries.scan({ jobId, attempt: 1, match: store.logQueries.matcher(needle), ...(stream ? { stream } : {}) }, 5000)) lines.push(...batch);
    return lines.map((l) => l.sequenceNum).reverse();
  }

  it('returns exactly the plain scan, page by page, while the job runs and after (random texts)', async function () {
    // A bound, not an assertion: a few seconds on a quiet machine, and over two minutes in CI at a load of 19.
    this.timeout(600_000);
    const { store } = db();
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.integer({ min: 1, max: 900 }), { minLength: 1, maxLength: 6 }),
        fc.integer({ min: 0, max: 2 ** 31 - 1 }),
        fc.integer({ min: 1, max: 60 }),
        async (batchSizes, seed, limit) => {
          const j = await insertLogJob(store, { job: { attempts: 1 } });
          const rand = mulberry32(seed);
          let seq = 0;
          for (const size of batchSizes) {
            const batch: LogLineInput[] = [];
            for (let i = 0; i < size; i++, seq++) {
              const pieces = Array.from({ length: rand(9) }, () => PIECES[rand(PIECES.length)]!);
              // some needles only on the lines around a block boundary
              if (seq % BLOCK_LINES === 0 || seq % BLOCK_LINES === BLOCK_LINES - 1) pieces.push('zqzq');
              batch.push({ sequence_num: seq, stream: rand(4) === 0 ? 'stderr' : 'stdout', message: pieces.join(''), timestamp: seq });
            }
            await store.transaction((tx) => tx.logs.insertBatch(j.jobId, 1, batch));
            // searched while it runs: the tail block is partly filled
            for (const needle of NEEDLES.slice(0, 4)) assert.deepEqual(await searchAll(store, j, needle, limit), await scanAll(store, j.jobId, needle), needle);
          }
          for (const needle of NEEDLES) {
            assert.deepEqual(await searchAll(store, j, needle, limit), await scanAll(store, j.jobId, needle), needle);
            assert.deepEqual(await searchAll(store, j, needle, limit, 'stderr'), await scanAll(store, j.jobId, needle, 'stderr'), `${needle} (stderr)`);
          }
        },
      ),
      { numRuns: 6 },
    );
  });

  it('skips the blocks that cannot match, finds needles across block boundaries, and indexes nothing twice on redelivery', async () => {
    const { store } = db();
    const j = await insertLogJob(store, { job: { attempts: 1 } });
    const total = BLOCK_LINES * 5 + 17;
    const message = (i: number) => (i === BLOCK_LINES * 3 - 1 ? 'Rare Needle here' : i % 7 === 0 ? 'common TIMEOUT' : `line ${i} of the job`);
    const all: LogLineInput[] = Array.from({ length: total }, (_, i) => ({ sequence_num: i, stream: 'stdout', message: message(i), timestamp: i }));
    for (let from = 0; from < total; from += 700) await store.transaction((tx) => tx.logs.insertBatch(j.jobId, 1, all.slice(from, from + 700)));
    // a redelivered batch stores nothing and changes no block
    const before = await store.db.selectFrom('job_log_blocks').selectAll().where('job_id', '=', j.jobId).orderBy('block_num').execute();
    assert.equal(await store.transaction((tx) => tx.logs.insertBatch(j.jobId, 1, all.slice(1400, 2100))), 0);
    const after = await store.db.selectFrom('job_log_blocks').selectAll().where('job_id', '=', j.jobId).orderBy('block_num').execute();
    assert.deepEqual(after, before);
    assert.deepEqual(
      before.map((b) => [b.block_num, b.seq_from, b.seq_to]),
      Array.from({ length: 6 }, (_, b) => [b, b * BLOCK_LINES, Math.min(total - 1, (b + 1) * BLOCK_LINES - 1)]),
      'one block per BLOCK_LINES sequence numbers, the running tail included',
    );
    const rare = store.logQueries.matcher('rare NEEDLE');
    const skipped = before.filter((b) => bloomLacks(b.bloom, rare.probes!)).length;
    assert.equal(skipped, 5, 'every block but the needle\'s is ruled out');
    assert.deepEqual(await searchAll(store, j, 'rare NEEDLE', 100), [BLOCK_LINES * 3 - 1]);
    assert.deepEqual(await searchAll(store, j, 'here', 100), [BLOCK_LINES * 3 - 1]);
    assert.deepEqual(await searchAll(store, j, 'nowhere at all', 100), []);
    assert.deepEqual(await searchAll(store, j, 'timeout', 50), await scanAll(store, j.jobId, 'timeout'));
  });

  it('walks many blocks in growing chunks, a page at a time, exactly as the plain scan', async function () {
    this.timeout(60_000);
    const { store } = db();
    const j = await insertLogJob(store, { job: { attempts: 1 } });
    const total = BLOCK_LINES * 75 + 5;
    const hits = new Set([3, BLOCK_LINES * 9 + 1, BLOCK_LINES * 9 + 2, BLOCK_LINES * 64 - 1, BLOCK_LINES * 64, BLOCK_LINES * 70 + 7, total - 1]);
    const all: LogLineInput[] = Array.from({ length: total }, (_, i) => ({ sequence_num: i, stream: i % 3 ? 'stdout' : 'stderr', message: hits.has(i) ? `x Needle ${i}` : `l ${i % 97}`, timestamp: i }));
    for (let from = 0; from < total; from += 5000) await store.transaction((tx) => tx.logs.insertBatch(j.jobId, 1, all.slice(from, from + 5000)));
    // a stretch without blocks in the middle, as if indexed by nobody
    await store.db.deleteFrom('job_log_blocks').where('job_id', '=', j.jobId).where('block_num', 'in', [20, 21, 40]).execute();
    for (const [needle, limits] of [['needle', [1, 2, 3, 100]], ['x needle', [1, 100]], ['absent!', [1]], ['l 96', [70, 100]]] as const) {
      const expected = await scanAll(store, j.jobId, needle);
      for (const limit of limits) assert.deepEqual(await searchAll(store, j, needle, limit), expected, `${needle} / ${limit}`);
      assert.deepEqual(await searchAll(store, j, needle, limits[0], 'stderr'), await scanAll(store, j.jobId, needle, 'stderr'), `${needle} stderr`);
    }
  });

  it('scans lines stored without blocks (before the migration) as before', async () => {
    const { store } = db();
    const j = await insertLogJob(store, { job: { attempts: 1 } });
    const all: LogLineInput[] = Array.from({ length: 3000 }, (_, i) => ({ sequence_num: i, stream: 'stdout', message: i === 10 ? 'old needle' : i === 2999 ? 'new needle' : `line ${i}`, timestamp: i }));
    await store.transaction((tx) => tx.logs.insertBatch(j.jobId, 1, all.slice(0, 1500)));
    await store.db.deleteFrom('job_log_blocks').where('job_id', '=', j.jobId).execute(); // as if logged before 0013
    await store.transaction((tx) => tx.logs.insertBatch(j.jobId, 1, all.slice(1500)));
    const rows = await store.db.selectFrom('job_log_blocks').select(['block_num', 'seq_from', 'seq_to']).where('job_id', '=', j.jobId).orderBy('block_num').execute();
    assert.deepEqual(rows, [
      { block_num: 1, seq_from: 1500, seq_to: 2047 },
      { block_num: 2, seq_from: 2048, seq_to: 2999 },
    ]);
    assert.deepEqual(await searchAll(store, j, 'needle', 100), [2999, 10]);
    assert.deepEqual(await searchAll(store, j, 'needle', 1), [2999, 10]);
  });

  it('finds nothing, like the plain scan, in a job that is not the caller\'s', async () => {
    const { store } = db();
    const j = await insertLogJob(store, { job: { attempts: 1 } });
    await store.transaction((tx) => tx.logs.insertBatch(j.jobId, 1, Array.from({ length: 2000 }, (_, i) => ({ sequence_num: i, stream: 'stdout' as const, message: `line ${i}`, timestamp: i }))));
    assert.equal(await store.logQueries.ownedPage({ userId: newId(), workflowId: j.workflowId }, { jobId: j.jobId, match: store.logQueries.matcher('line 5'), limit: 10 }), undefined);
    assert.equal((await store.logQueries.ownedPage(j, { jobId: j.jobId, match: store.logQueries.matcher('line 5'), limit: 10 }))?.lines.length, 10);
  });
});
