import assert from 'node:assert/strict';
import { sql } from 'kysely';
import { newId } from '@orloj/common/core';
import { foldCase, type LogLineInput } from '@orloj/common/store';
import { describeEachEngine } from './support/stores.js';
import { insertLogJob } from './support/fixtures.js';

/** The reference: the simple lowercase mapping of every code point on its own. */
function foldByCodePoint(s: string): string {
  let out = '';
  for (const ch of s) {
    const lower = ch.toLowerCase();
    out += [...lower].length === 1 ? lower : ch === '\u0130' ? 'i' : ch;
  }
  return out;
}

describe('foldCase (log search)', () => {
  it('is the simple lowercase mapping of each code point, and keeps every length', () => {
    for (let cp = 0; cp <= 0x10ffff; cp++) {
      if (cp >= 0xd800 && cp <= 0xdfff) continue;
      const ch = String.fromCodePoint(cp);
      const folded = foldCase(ch);
      if (folded !== foldByCodePoint(ch)) assert.fail(`U+${cp.toString(16)}: ${folded} != ${foldByCodePoint(ch)}`);
      if (folded.length !== ch.length) assert.fail(`U+${cp.toString(16)} changes length`);
    }
  });

  it('folds whole strings like each code point on its own (no context, no expansion)', () => {
    const samples = ['GRÜSSE', 'Grüße', 'İSTANBUL', 'ΟΔΟΣ ΣΊΣΥΦΟΣ', 'ẞ', 'Ǆ ǅ ǆ', 'ﬃ', 'Ω K Å', 'ABC-def_%\\*', '🌍 Ⓐ 𐐀'];
    for (const s of samples) assert.equal(foldCase(s), foldByCodePoint(s), s);
    assert.equal(foldCase('GRÜSSE'), 'grüsse');
    assert.equal(foldCase('Grüße'), 'grüße');
    assert.equal(foldCase('İstanbul'), 'istanbul');
    assert.equal(foldCase('ΟΔΟΣ'), 'οδοσ', 'a final capital sigma folds to σ, not ς');
    assert.equal(foldCase('ẞ'), 'ß');
  });
});

describeEachEngine('logs repo and log search', (db, engine) => {
  let jobId: string;

  function lines(from: number, to: number): LogLineInput[] {
    return Array.from({ length: to - from }, (_, i) => ({ sequence_num: from + i, stream: 'stdout' as const, message: `m${from + i}`, timestamp: from + i }));
  }

  before(async () => {
    jobId = (await insertLogJob(db().store)).jobId;
  });

  it('inserts a batch idempotently, in chunks of any size, returning the lines newly stored', async () => {
    const { store } = db();
    const id = (await insertLogJob(store)).jobId;
    assert.equal(await store.transaction((tx) => tx.logs.insertBatch(id, 1, lines(0, 1_500))), 1_500);
    assert.equal(await store.transaction((tx) => tx.logs.insertBatch(id, 1, lines(0, 1_500))), 0, 'a repeated batch inserts nothing');
    assert.equal(await store.transaction((tx) => tx.logs.insertBatch(id, 1, lines(1_000, 7_000))), 5_500, 'overlap: only the new lines');
    assert.equal(await store.transaction((tx) => tx.logs.insertBatch(id, 2, lines(0, 3))), 3, 'another attempt has its own sequence');
    assert.equal(await store.logs.insertBatch(id, 1, []), 0);
    const n = await store.db.selectFrom('job_logs').select((eb) => eb.fn.countAll<number | string>().as('n')).where('job_id', '=', id).executeTakeFirstOrThrow();
    assert.equal(Number(n.n), 7_003);
  });

  it('records the count as the highest sequence seen: monotonic and idempotent', async () => {
    const { store } = db();
    const id = (await insertLogJob(store)).jobId;
    const owner = await store.logs.jobOwner(id);
    assert.ok(owner);
    const record = (lines: number) => store.logs.recordCount({ jobId: id, attempt: 1, workflowId: owner.workflowId, userId: owner.userId, lines });
    await record(100);
    await record(100);
    await record(50);
    assert.equal(await store.logs.count(id, 1), 100);
    await record(250);
    assert.equal(await store.logs.count(id, 1), 250);
    assert.equal(await store.logs.count(id, 2), 0);
    assert.equal(await store.logs.jobOwner(newId()), undefined);
  });

  it('stores NUL as U+FFFD on both engines', async () => {
    const { store } = db();
    const id = (await insertLogJob(store)).jobId;
    await store.logs.insertBatch(id, 1, [{ sequence_num: 0, stream: 'stderr', message: 'a\u0000b', timestamp: 0 }]);
    const row = await store.db.selectFrom('job_logs').select('message').where('job_id', '=', id).executeTakeFirstOrThrow();
    assert.equal(row.message, 'a\ufffdb');
  });

  const MESSAGES = [
    'Grüße aus Köln',
    'GRÜSSE AUS KÖLN',
    'grüsse',
    'STRASSE',
    'Straße',
    'İstanbul',
    'ISTANBUL',
    'ΟΔΟΣ ΣΊΣΥΦΟΣ',
    'οδος',
    '100% done',
    '100 percent',
    'a_b',
    'axb',
    'back\\slash',
    'star*',
    'e\u0301 decomposed',
    'é composed',
    '🌍 emoji',
    'ǅ title case',
    'Ω ohm',
    '',
  ];
  const NEEDLES = ['GRÜSSE', 'grüße', 'GRÜẞE', 'ß', 'ẞ', 'ss', 'İ', 'i', 'ı', 'istanbul', 'σ', 'Σ', 'ς', 'ΟΣ', '%', '_', '\\', '*', '100%', 'a_b', 'é', 'e\u0301', '🌍', 'ǆ', 'Ǆ', 'ω', 'Ω', ' ', ''];

  it('containsFolded matches exactly what foldCase says, with pattern characters taken literally', async () => {
    const { store } = db();
    await store.logs.insertBatch(
      jobId,
      1,
      MESSAGES.map((message, i) => ({ sequence_num: i, stream: 'stdout', message, timestamp: i })),
    );
    for (const needle of NEEDLES) {
      const rows = await store.db
        .selectFrom('job_logs')
        .select('message')
        .where('job_id', '=', jobId)
        .where(({ ref }) => store.dialect.containsFolded(ref('message'), foldCase(needle)))
        .orderBy('sequence_num')
        .execute();
      const expected = MESSAGES.filter((m) => foldCase(m).includes(foldCase(needle)));
      assert.deepEqual(
        rows.map((r) => r.message),
        expected,
        `needle ${JSON.stringify(needle)} on ${engine}`,
      );
    }
  });

  it('documents the fold: case and Unicode letters match, ß is not ss, composed is not decomposed', () => {
    const matches = (m: string, q: string) => foldCase(m).includes(foldCase(q));
    assert.ok(matches('Grüße aus Köln', 'GRÜẞE'));
    assert.ok(!matches('Grüße aus Köln', 'GRÜSSE'));
    assert.ok(matches('İstanbul', 'istanbul') && matches('ISTANBUL', 'İ'));
    assert.ok(matches('ΟΔΟΣ', 'σ') && !matches('οδος', 'σ'));
    assert.ok(!matches('é composed', 'e\u0301'));
    assert.ok(matches('100% done', '100%') && !matches('100 percent', '100%'));
  });

  if (engine === 'postgres') {
    it("agrees with PostgreSQL's lower() on every code point PostgreSQL's Unicode tables know", async () => {
      const { store } = db();
      const differences: { ch: string; pg: string; js: string }[] = [];
      for (let start = 1; start <= 0x10ffff; start += 65_536) {
        const chars: string[] = [];
        for (let cp = start; cp < start + 65_536 && cp <= 0x10ffff; cp++) if (cp < 0xd800 || cp > 0xdfff) chars.push(String.fromCodePoint(cp));
        const { rows } = await sql<{ l: string }>`select lower(c) as l from unnest(${chars}::text[]) with ordinality as u(c, n) order by n`.execute(store.db);
        rows.forEach((r, i) => {
          const ch = chars[i]!;
          if (r.l !== foldCase(ch)) differences.push({ ch, pg: r.l, js: foldCase(ch) });
        });
      }
      const show = (d: { ch: string; pg: string; js: string }) => `U+${d.ch.codePointAt(0)!.toString(16)} ${d.ch}: lower()=${d.pg} foldCase=${d.js}`;
      // Letters newer than the server's Unicode tables (glibc 2.36 knows Unicode 14; about 55 code
      // points differ) are left unchanged by lower(); nothing else may differ. A database whose
      // LC_CTYPE is C (not a UTF-8 locale) folds ASCII only and fails here.
      assert.ok(differences.length <= 100, `lower() differs from foldCase on ${differences.length} code points (is the database's LC_CTYPE a UTF-8 locale?): ${differences.slice(0, 10).map(show).join(', ')}`);
      assert.deepEqual(differences.filter((d) => d.pg !== d.ch).map(show), [], 'lower() folds these differently');
    });
  }
});
