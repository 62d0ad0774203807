import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { insertJob } from '@orloj/common/test-support';
import { describeApi } from './support/harness.js';
import type { HttpResponse, TestClient } from './support/client.js';
import { containerWorkflow, entry, heartbeatWorkflow, insertLines, lines, logsPath, type Line } from './support/logs.js';

type Json = Record<string, any>;

const HEX32 = /^[0-9a-f]{32}$/;
const fields = (res: HttpResponse) => ((res.json?.errors ?? []) as { field: string }[]).map((e) => e.field).sort();

/** Follows cursors from `path` to the end; returns every page. */
async function allPages(c: TestClient, path: string, from = ''): Promise<Json[]> {
  const pages: Json[] = [];
  let cursor = from;
  do {
    const sep = path.includes('?') ? '&' : '?';
    const res = await c.get(cursor ? `${path}${sep}cursor=${cursor}` : path);
    assert.equal(res.status, 200, res.text);
    pages.push(res.json as Json);
    cursor = res.json.cursor as string;
    assert.ok(pages.length < 1000, 'cursor loop');
  } while (cursor);
  return pages;
}

/** The markers a search result puts around each match, as the reference implementation does. */
const markers = (token: string) => ({ start: `__CV_HL_START_${token}__`, end: `__CV_HL_END_${token}__` });

/**
 * A search result message with the page's start and end markers replaced by
 * `|`, after checking that they pair up (start, match, end, never nested) and
 * that removing them gives back the stored message.
 */
function marked(message: string, token: string, original: string): string {
  const { start, end } = markers(token);
  let open = false;
  let out = '';
  let plain = '';
  for (const piece of message.split(new RegExp(`(${start}|${end})`))) {
    if (piece === start || piece === end) {
      assert.equal(open, piece === end, `${piece === start ? 'a start inside a match' : 'an end without its start'}: ${message}`);
      open = !open;
      out += '|';
    } else {
      out += piece;
      plain += piece;
    }
  }
  assert.ok(!open, `a start without its end: ${message}`);
  assert.equal(plain, original, 'highlights must only add markers');
  return out;
}

describeApi('job logs', (h) => {
  const store = () => h().db.store;

  /** A user, a retaining CONTAINER workflow and a job in `status` with these lines on its attempt. */
  async function jobWithLines(messages: readonly string[], status: 'RUNNING' | 'COMPLETED' = 'COMPLETED', stream?: (i: number) => 'stdout' | 'stderr') {
    const c = await h().user();
    const wid = await containerWorkflow(c);
    const job = await insertJob(store(), wid, status);
    const rows = lines(messages, 0, stream);
    await insertLines(h(), job.id, job.attempts, rows);
    return { c, wid, job, rows };
  }

  describe('GET /workflows/{workflow_id}/jobs/{job_id}/logs', () => {
    it('pages newest first through every line of the current attempt, with no gap and no repeat', async () => {
      const c = await h().user();
      const wid = await containerWorkflow(c);
      const job = await insertJob(store(), wid, 'RUNNING', { attempts: 2 });
      // An earlier attempt's lines are not the job's lines any more.
      await insertLines(h(), job.id, 1, lines(Array.from({ length: 50 }, (_, i) => `old ${i}`)));
      const rows = lines(Array.from({ length: 250 }, (_, i) => `line ${i}`));
      await insertLines(h(), job.id, 2, rows);
      const expected = [...rows].reverse().map((l) => entry(job.id, 2, l));

      const pages = await allPages(c, logsPath(wid, job.id));
      assert.deepEqual(
        pages.map((p) => p.logs.length),
        [100, 100, 50],
      );
      for (const p of pages) {
        assert.deepEqual(Object.keys(p).sort(), ['cursor', 'highlight_token', 'id', 'logs', 'workflow_id']);
        assert.equal(p.id, job.id);
        assert.equal(p.workflow_id, wid);
        assert.match(p.highlight_token as string, HEX32);
      }
      assert.deepEqual(
        pages.flatMap((p) => p.logs),
        expected,
      );
      assert.equal(new Set(pages.map((p) => p.highlight_token)).size, pages.length, 'a fresh token per response');

      const small = await allPages(c, `${logsPath(wid, job.id)}?limit=7`);
      assert.equal(small.length, 36);
      assert.deepEqual(
        small.flatMap((p) => p.logs),
        expected,
      );
      const all = await c.get(`${logsPath(wid, job.id)}?limit=1000`);
      assert.equal(all.json.logs.length, 250);
      assert.equal(all.json.cursor, '');
      const api = await c.get(`/api${logsPath(wid, job.id)}?limit=1`);
      assert.deepEqual(api.json.logs, [expected[0]]);
    });

    it('keeps paging stable while new lines arrive (they are above the cursor)', async () => {
      const { c, wid, job, rows } = await jobWithLines(Array.from({ length: 30 }, (_, i) => `l${i}`), 'RUNNING');
      const first = await c.get(`${logsPath(wid, job.id)}?limit=10`);
      await insertLines(h(), job.id, job.attempts, lines(['late 30', 'late 31'], 30));
      const rest = await allPages(c, `${logsPath(wid, job.id)}?limit=10`, first.json.cursor as string);
      assert.deepEqual(
        [...first.json.logs, ...rest.flatMap((p) => p.logs)].map((e: Json) => e.sequence_num),
        rows.map((l) => l.sequence_num).reverse(),
      );
    });

    it('answers an empty page for a job without lines', async () => {
      const c = await h().user();
      const wid = await containerWorkflow(c);
      const job = await insertJob(store(), wid, 'PENDING');
      const res = await c.get(logsPath(wid, job.id));
      assert.equal(res.status, 200);
      assert.deepEqual({ ...res.json, highlight_token: 'x' }, { id: job.id, workflow_id: wid, logs: [], cursor: '', highlight_token: 'x' });
    });

    it('answers 400 for a bad limit, cursor or path parameter', async () => {
      const { c, wid, job } = await jobWithLines(['a', 'b', 'c']);
      const other = await jobWithLines(['x', 'y']);
      const otherCursor = (await other.c.get(`${logsPath(other.wid, other.job.id)}?limit=1`)).json.cursor as string;
      const jobsCursor = Buffer.from(JSON.stringify({ l: `jobs:${wid}`, k: 1, i: job.id })).toString('base64url');
      for (const [q, field] of [
        ['?limit=0', 'limit'],
        ['?limit=1001', 'limit'],
        ['?limit=ten', 'limit'],
        ['?limit=1&limit=2', 'limit'],
        ['?cursor=%%%', 'cursor'],
        [`?cursor=${otherCursor}`, 'cursor'],
        [`?cursor=${jobsCursor}`, 'cursor'],
      ] as const) {
        const res = await c.get(`${logsPath(wid, job.id)}${q}`);
        assert.equal(res.status, 400, q);
        assert.equal(res.headers['content-type'], 'application/problem+json');
        assert.deepEqual(fields(res), [field], q);
      }
      const both = await c.get(logsPath('nope', 'nada'));
      assert.equal(both.status, 400);
      assert.deepEqual(fields(both), ['job_id', 'workflow_id']);
      assert.deepEqual(fields(await c.get(logsPath(wid, 'nada'))), ['job_id']);
    });

    it('refuses a cursor once the job moved to another attempt (a retry starts a new list)', async () => {
      const { c, wid, job } = await jobWithLines(['a', 'b', 'c'], 'RUNNING');
      const cursor = (await c.get(`${logsPath(wid, job.id)}?limit=1`)).json.cursor as string;
      assert.ok(cursor);
      await h().db.handle.db.updateTable('jobs').set({ attempts: 2 }).where('id', '=', job.id).execute();
      const res = await c.get(`${logsPath(wid, job.id)}?limit=1&cursor=${cursor}`);
      assert.equal(res.status, 400);
      assert.deepEqual(fields(res), ['cursor']);
      assert.deepEqual((await c.get(logsPath(wid, job.id))).json.logs, []);
      // the same once the new attempt has lines of its own
      await insertLines(h(), job.id, 2, lines(['d', 'e']));
      for (const path of [`${logsPath(wid, job.id)}?`, `${logsPath(wid, job.id, '/search')}?q=d&`]) {
        const again = await c.get(`${path}limit=1&cursor=${cursor}`);
        assert.equal(again.status, 400, path);
        assert.deepEqual(fields(again), ['cursor']);
      }
      assert.deepEqual(((await c.get(logsPath(wid, job.id))).json.logs as Json[]).map((e) => e.message), ['e', 'd']);
    });

    it("answers 404 for another user's job, a job of another workflow and an unknown job; 401 signed out", async () => {
      const { c, wid, job } = await jobWithLines(['secret']);
      const wid2 = await containerWorkflow(c);
      const stranger = await h().user();
      for (const [client, path] of [
        [stranger, logsPath(wid, job.id)],
        [c, logsPath(wid2, job.id)],
        [c, logsPath(wid, crypto.randomUUID())],
        [c, logsPath(crypto.randomUUID(), job.id)],
      ] as const) {
        for (const suffix of ['', '/search?q=secret', '/raw']) {
          const res = await client.get(path + suffix);
          assert.equal(res.status, 404, path + suffix);
          assert.equal(res.json.code, 'not_found');
          assert.doesNotMatch(res.text, /secret/);
        }
      }
      const anonymous = await h().client().get(logsPath(wid, job.id));
      assert.equal(anonymous.status, 401);
    });

    it('answers 412 log_retention_disabled for a CONTAINER workflow without retention and for HEARTBEAT', async () => {
      const c = await h().user();
      for (const wid of [await containerWorkflow(c, { logRetention: false }), await heartbeatWorkflow(c)]) {
        const job = await insertJob(store(), wid, 'COMPLETED');
        // lines kept while retention was on do not change the answer
        await insertLines(h(), job.id, job.attempts, lines(['kept x']));
        for (const suffix of ['', '/search?q=x', '/raw', '/raw?format=json']) {
          const res = await c.get(logsPath(wid, job.id) + suffix);
          assert.equal(res.status, 412, suffix);
          assert.equal(res.headers['content-type'], 'application/problem+json');
          assert.equal(res.json.code, 'log_retention_disabled');
          assert.equal(res.json.status, 412);
        }
      }
    });
  });

  describe('GET /workflows/{workflow_id}/jobs/{job_id}/logs/search', () => {
    const messages = [
      'Grüße aus MÜNCHEN und münchen', // 0
      'ЖУРНАЛ: ошибка в журнале', // 1
      'İSTANBUL istanbul Istanbul', // 2
      'Temperature 300 \u212a, not 300 C', // 3 (Kelvin sign)
      'nothing to see here', // 4
      '🚀 Launch LAUNCH launch 🚀', // 5
      'ΟΔΥΣΣΕΥΣ', // 6
      'ÅNGSTRÖM and ångström', // 7
    ];

    async function search(c: TestClient, wid: string, jobId: string, q: string, extra = ''): Promise<Json> {
      const res = await c.get(`${logsPath(wid, jobId, '/search')}?q=${encodeURIComponent(q)}${extra}`);
      assert.equal(res.status, 200, res.text);
      assert.match(res.json.highlight_token as string, HEX32);
      return res.json as Json;
    }

    it('matches case-insensitively across Unicode and marks exactly every match', async () => {
      const { c, wid, job, rows } = await jobWithLines(messages);
      const cases: [string, Record<number, string>][] = [
        ['münchen', { 0: 'Grüße aus |MÜNCHEN| und |münchen|' }],
        ['MÜNCHEN', { 0: 'Grüße aus |MÜNCHEN| und |münchen|' }],
        ['GRÜSSE', {}],
        ['журнал', { 1: '|ЖУРНАЛ|: ошибка в |журнал|е' }],
        ['istanbul', { 2: '|İSTANBUL| |istanbul| |Istanbul|' }],
        ['300 k', { 3: 'Temperature |300 \u212a|, not 300 C' }],
        ['🚀', { 5: '|🚀| Launch LAUNCH launch |🚀|' }],
        ['launch', { 5: '🚀 |Launch| |LAUNCH| |launch| 🚀' }],
        ['σσ', { 6: 'ΟΔΥ|ΣΣ|ΕΥΣ' }],
        ['ångström', { 7: '|ÅNGSTRÖM| and |ångström|' }],
        ['e', { 0: 'Grüß|e| aus MÜNCH|E|N und münch|e|n', 3: 'T|e|mp|e|ratur|e| 300 \u212a, not 300 C', 4: 'nothing to s|e||e| h|e|r|e|' }],
      ];
      for (const [q, expected] of cases) {
        const page = await search(c, wid, job.id, q);
        const token = page.highlight_token as string;
        assert.deepEqual(
          page.logs.map((e: Json) => e.sequence_num),
          Object.keys(expected).map(Number).sort((a, b) => b - a),
          q,
        );
        for (const e of page.logs as Json[]) {
          const row = rows[e.sequence_num as number]!;
          assert.deepEqual({ ...e, message: row.message }, entry(job.id, job.attempts, row), q);
          assert.equal(marked(e.message as string, token, row.message), expected[e.sequence_num as number], q);
        }
      }
    });

    it("wraps each match in the reference implementation's markers: __CV_HL_START_<token>__ and __CV_HL_END_<token>__", async () => {
      const { c, wid, job } = await jobWithLines(['Error: disk ERROR', 'no match', 'an __CV_HL_START_ lookalike error']);
      const page = await search(c, wid, job.id, 'error');
      const t = page.highlight_token as string;
      assert.deepEqual(
        page.logs.map((e: Json) => e.message),
        [`an __CV_HL_START_ lookalike __CV_HL_START_${t}__error__CV_HL_END_${t}__`, `__CV_HL_START_${t}__Error__CV_HL_END_${t}__: disk __CV_HL_START_${t}__ERROR__CV_HL_END_${t}__`],
      );
    });

    it('takes % _ \\ * and quotes literally', async () => {
      const { c, wid, job } = await jobWithLines([
        '100% done', // 0
        '100 percent', // 1
        'a_b', // 2
        'axb', // 3
        'C:\\temp\\x', // 4
        'C:temp', // 5
        'glob *.txt', // 6
        'glob a.txt', // 7
        "it's \"quoted\"", // 8
        '50%_off\\*', // 9
        '[abc] (x|y) ^$ .+?', // 10
      ]);
      const cases: [string, number[]][] = [
        ['%', [9, 0]],
        ['_', [9, 2]],
        ['\\', [9, 4]],
        ['*', [9, 6]],
        ['%_', [9]],
        ['\\*', [9]],
        ['a%', []],
        ['a_b', [2]],
        ['*.txt', [6]],
        ["'", [8]],
        ['"quoted"', [8]],
        ['[abc]', [10]],
        ['(x|y)', [10]],
        ['^$ .+?', [10]],
        ['.', [10, 7, 6]],
      ];
      for (const [q, expected] of cases) {
        const page = await search(c, wid, job.id, q);
        assert.deepEqual(
          page.logs.map((e: Json) => e.sequence_num),
          expected,
          q,
        );
        for (const e of page.logs as Json[]) {
          const { start, end } = markers(page.highlight_token as string);
          assert.ok((e.message as string).includes(`${start}${q}${end}`), q);
        }
      }
    });

    it('marks overlapping candidates left to right without overlap', async () => {
      const { c, wid, job, rows } = await jobWithLines(['aaa', 'aaaa', 'abababa', 'AaAaA']);
      const cases: [string, string[]][] = [
        // newest first: 'AaAaA', 'aaaa', 'aaa'
        ['aa', ['|Aa||Aa|A', '|aa||aa|', '|aa|a']],
        ['aba', ['|aba|b|aba|']],
      ];
      for (const [q, expected] of cases) {
        const page = await search(c, wid, job.id, q);
        assert.deepEqual(
          page.logs.map((e: Json) => marked(e.message as string, page.highlight_token as string, rows[e.sequence_num as number]!.message)),
          expected,
          q,
        );
      }
    });

    it('filters by stream exactly, with or without q', async () => {
      const { c, wid, job, rows } = await jobWithLines(
        Array.from({ length: 20 }, (_, i) => (i % 4 === 0 ? `ERROR ${i}` : `info ${i}`)),
        'COMPLETED',
        (i) => (i % 2 === 0 ? 'stderr' : 'stdout'),
      );
      const stderr = await search(c, wid, job.id, 'error', '&stream=stderr');
      assert.deepEqual(
        stderr.logs.map((e: Json) => e.sequence_num),
        [16, 12, 8, 4, 0],
      );
      const stdoutErrors = await search(c, wid, job.id, 'error', '&stream=stdout');
      assert.deepEqual(stdoutErrors.logs, []);
      const onlyStream = await c.get(`${logsPath(wid, job.id, '/search')}?stream=stdout`);
      assert.equal(onlyStream.status, 200);
      assert.deepEqual(
        onlyStream.json.logs,
        rows
          .filter((l) => l.stream === 'stdout')
          .reverse()
          .map((l) => entry(job.id, job.attempts, l)),
      );
      const everything = await c.get(logsPath(wid, job.id, '/search'));
      assert.equal(everything.json.logs.length, 20);
    });

    it('pages matches with a stable cursor and a fresh token per page', async () => {
      const { c, wid, job, rows } = await jobWithLines(Array.from({ length: 300 }, (_, i) => (i % 2 ? `x NeEdLe ${i}` : `hay ${i}`)));
      const pages = await allPages(c, `${logsPath(wid, job.id, '/search')}?q=needle&limit=40`);
      assert.deepEqual(
        pages.map((p) => p.logs.length),
        [40, 40, 40, 30],
      );
      const got = pages.flatMap((p) => p.logs.map((e: Json) => ({ ...e, message: marked(e.message as string, p.highlight_token as string, rows[e.sequence_num as number]!.message) })));
      assert.deepEqual(
        got,
        rows
          .filter((l) => l.sequence_num % 2)
          .reverse()
          .map((l) => entry(job.id, job.attempts, l, `x |NeEdLe| ${l.sequence_num}`)),
      );
      assert.equal(new Set(pages.map((p) => p.highlight_token)).size, pages.length);
    });

    it('answers 400 for an empty or too long q, a bad stream, a repeated parameter', async () => {
      const { c, wid, job } = await jobWithLines(['x'.repeat(1000)]);
      const path = logsPath(wid, job.id, '/search');
      for (const [q, field] of [
        ['?q=', 'q'],
        [`?q=${'x'.repeat(1001)}`, 'q'],
        ['?q=a&q=b', 'q'],
        ['?stream=STDOUT', 'stream'],
        ['?stream=both', 'stream'],
        ['?q=%00', 'q'],
        ['?limit=1001', 'limit'],
      ] as const) {
        const res = await c.get(path + q);
        assert.equal(res.status, 400, q);
        assert.deepEqual(fields(res), [field], q);
      }
      const longest = await c.get(`${path}?q=${'X'.repeat(1000)}`);
      assert.equal(longest.status, 200);
      assert.equal(longest.json.logs.length, 1);
    });
  });

  describe('GET /workflows/{workflow_id}/jobs/{job_id}/logs/raw', () => {
    const special = [
      '{"level":"info","msg":"started","n":1}',
      '',
      'plain text line',
      '[1,2,3]',
      '"a json string"',
      '42',
      'null',
      'true',
      '12345678901234567890',
      ' {"spaced" : [ 1 , 2 ] } ',
      '{"broken": ',
      'ünïcödé ✓ 日本語 🚀 ΟΔΥΣΣΕΥΣ',
      'y'.repeat(100 * 1024),
      '\t tabbed',
      'quote " and backslash \\ and \u2028 separator',
      '{}',
      '1e400',
      'INFO: done',
      '',
    ];

    const isJson = (m: string) => {
      try {
        JSON.parse(m);
        return true;
      } catch {
        return false;
      }
    };
    /** The download entry text: keys in the contract's order, message_json as the message's own JSON text. */
    const entryText = (jobId: string, attempt: number, l: Line) =>
      `{"timestamp":${JSON.stringify(new Date(l.timestamp).toISOString())},"sequence_num":${l.sequence_num},"stream":"${l.stream}",` +
      `"event_id":"${jobId}:${attempt}:${l.sequence_num}","message_raw":${JSON.stringify(l.message)}` +
      `${isJson(l.message) ? `,"message_json":${l.message}` : ''}}`;

    it('downloads txt, jsonl and json byte for byte, oldest first, as an attachment', async () => {
      const { c, wid, job, rows } = await jobWithLines(special);
      // Lines of an older attempt are not part of the job's log.
      await insertLines(h(), job.id, job.attempts + 1, lines(['future attempt']));
      const path = logsPath(wid, job.id, '/raw');

      const txt = await c.get(path);
      assert.equal(txt.status, 200);
      assert.equal(txt.headers['content-type'], 'text/plain; charset=utf-8');
      assert.equal(txt.headers['content-disposition'], `attachment; filename="${job.id}.txt"`);
      assert.equal(txt.text, special.map((m) => `${m}\n`).join(''));
      assert.deepEqual(await c.get(`${path}?format=txt`).then((r) => r.text), txt.text);

      const jsonl = await c.get(`${path}?format=jsonl`);
      assert.equal(jsonl.status, 200);
      assert.equal(jsonl.headers['content-type'], 'application/x-ndjson; charset=utf-8');
      assert.equal(jsonl.headers['content-disposition'], `attachment; filename="${job.id}.jsonl"`);
      assert.equal(jsonl.text, rows.map((l) => `${entryText(job.id, job.attempts, l)}\n`).join(''));
      const parsed = jsonl.text
        .split('\n')
        .slice(0, -1)
        .map((t) => JSON.parse(t) as Json);
      assert.equal(parsed.length, special.length);
      parsed.forEach((e, i) => {
        const m = special[i]!;
        assert.equal(e.message_raw, m);
        if (isJson(m)) assert.deepEqual(e.message_json, JSON.parse(m), m);
        else assert.ok(!('message_json' in e), m);
      });
      assert.equal(parsed[6]!.message_json, null, 'null is a JSON value: present');

      const json = await c.get(`${path}?format=json`);
      assert.equal(json.status, 200);
      assert.equal(json.headers['content-type'], 'application/json; charset=utf-8');
      assert.equal(json.headers['content-disposition'], `attachment; filename="${job.id}.json"`);
      assert.equal(
        json.text,
        `{"id":"${job.id}","workflow_id":"${wid}","filters":{"q":"","stream":"all"},"logs":[${rows.map((l) => entryText(job.id, job.attempts, l)).join(',')}]}`,
      );
      assert.deepEqual(json.json.logs, parsed);
    });

    it('filters by stream and q (the search match, without highlights) and names the filters', async () => {
      const { c, wid, job, rows } = await jobWithLines(['INFO start', 'warn: disk', 'info: 100% _done_', 'Info end', 'debug'], 'COMPLETED', (i) =>
        i % 2 ? 'stderr' : 'stdout',
      );
      const path = logsPath(wid, job.id, '/raw');
      const pick = (...n: number[]) => n.map((i) => rows[i]!);
      assert.equal((await c.get(`${path}?q=info`)).text, 'INFO start\ninfo: 100% _done_\nInfo end\n');
      assert.equal((await c.get(`${path}?q=INFO&stream=stderr`)).text, 'Info end\n');
      assert.equal((await c.get(`${path}?stream=stderr`)).text, 'warn: disk\nInfo end\n');
      assert.equal((await c.get(`${path}?q=%25%20_`)).text, 'info: 100% _done_\n');
      assert.equal((await c.get(`${path}?q=nothing`)).text, '');
      const jsonl = await c.get(`${path}?format=jsonl&q=info&stream=stdout`);
      assert.equal(jsonl.text, pick(0, 2).map((l) => `${entryText(job.id, job.attempts, l)}\n`).join(''));
      const json = await c.get(`${path}?format=json&q=Info&stream=stdout`);
      assert.equal(
        json.text,
        `{"id":"${job.id}","workflow_id":"${wid}","filters":{"q":"Info","stream":"stdout"},"logs":[${pick(0, 2)
          .map((l) => entryText(job.id, job.attempts, l))
          .join(',')}]}`,
      );
      const streamOnly = await c.get(`${path}?format=json&stream=stderr`);
      assert.deepEqual(streamOnly.json.filters, { q: '', stream: 'stderr' });
    });

    it('downloads an empty log in each format', async () => {
      const { c, wid, job } = await jobWithLines([]);
      const path = logsPath(wid, job.id, '/raw');
      assert.equal((await c.get(path)).text, '');
      assert.equal((await c.get(`${path}?format=jsonl`)).text, '');
      assert.equal((await c.get(`${path}?format=json`)).text, `{"id":"${job.id}","workflow_id":"${wid}","filters":{"q":"","stream":"all"},"logs":[]}`);
    });

    it('answers 400 job_not_terminal until the job is terminal, and for a bad format, stream or q', async () => {
      const c = await h().user();
      const wid = await containerWorkflow(c);
      for (const status of ['PENDING', 'QUEUED', 'RUNNING'] as const) {
        // At most one QUEUED or RUNNING job per workflow.
        const own = await containerWorkflow(c);
        const job = await insertJob(store(), own, status);
        const res = await c.get(logsPath(own, job.id, '/raw'));
        assert.equal(res.status, 400, status);
        assert.equal(res.json.code, 'job_not_terminal');
        assert.match(res.json.detail as string, new RegExp(status));
      }
      for (const status of ['FAILED', 'CANCELED'] as const) {
        const job = await insertJob(store(), wid, status);
        assert.equal((await c.get(logsPath(wid, job.id, '/raw'))).status, 200, status);
      }
      const done = await insertJob(store(), wid, 'COMPLETED');
      for (const [q, field] of [
        ['?format=xml', 'format'],
        ['?format=TXT', 'format'],
        ['?format=txt&format=json', 'format'],
        ['?stream=all', 'stream'],
        ['?q=', 'q'],
        [`?q=${'z'.repeat(1001)}`, 'q'],
      ] as const) {
        const res = await c.get(logsPath(wid, done.id, '/raw') + q);
        assert.equal(res.status, 400, q);
        assert.deepEqual(fields(res), [field], q);
      }
    });

    it('streams a 50,000-line log completely, in order, in every format', async () => {
      const count = 50_000;
      const messages = Array.from({ length: count }, (_, i) => `line ${String(i).padStart(6, '0')} ${i % 7 === 0 ? '{"k":' + i + '}' : 'text'}`);
      const { c, wid, job } = await jobWithLines(messages);
      const path = logsPath(wid, job.id, '/raw');
      const txt = await c.get(path);
      assert.equal(txt.status, 200);
      assert.equal(txt.headers['content-length'], undefined, 'streamed (chunked), not buffered');
      assert.equal(txt.text, messages.map((m) => `${m}\n`).join(''));
      const jsonl = await c.get(`${path}?format=jsonl`);
      const entries = jsonl.text.split('\n');
      assert.equal(entries.length, count + 1);
      assert.equal(JSON.parse(entries[count - 1]!).sequence_num, count - 1);
      const json = await c.get(`${path}?format=json`);
      assert.equal(json.json.logs.length, count);
      assert.deepEqual(
        json.json.logs.map((e: Json) => e.sequence_num).filter((n: number, i: number) => n !== i),
        [],
      );
    });
  });

  describe('GET /workflows/{workflow_id}/jobs/{job_id}/logs/lines', () => {
    it('reads lines by position, oldest first, with the stored count, on the current attempt only', async () => {
      const c = await h().user();
      const wid = await containerWorkflow(c);
      const job = await insertJob(store(), wid, 'RUNNING', { attempts: 2 });
      await insertLines(h(), job.id, 1, lines(Array.from({ length: 400 }, (_, i) => `old ${i}`)));
      const rows = lines(Array.from({ length: 250 }, (_, i) => `line ${i}`), 0, (i) => (i % 3 ? 'stdout' : 'stderr'));
      await insertLines(h(), job.id, 2, rows);
      const expected = rows.map((l) => entry(job.id, 2, l));
      const path = logsPath(wid, job.id, '/lines');

      const first = await c.get(path);
      assert.equal(first.status, 200, first.text);
      assert.deepEqual(first.json, { id: job.id, workflow_id: wid, from: 0, total: 250, logs: expected.slice(0, 100) });
      const middle = await c.get(`${path}?from=120&limit=30`);
      assert.deepEqual(middle.json.logs, expected.slice(120, 150));
      assert.equal(middle.json.total, 250);
      const end = await c.get(`${path}?from=200&limit=1000`);
      assert.deepEqual(end.json.logs, expected.slice(200));
      const past = await c.get(`${path}?from=250`);
      assert.deepEqual({ ...past.json }, { id: job.id, workflow_id: wid, from: 250, total: 250, logs: [] });
      const api = await c.get(`/api${path}?from=249&limit=5`);
      assert.deepEqual(api.json.logs, [expected[249]]);

      // Lines arriving while the job runs raise the count.
      await insertLines(h(), job.id, 2, lines(['late 250', 'late 251'], 250));
      const later = await c.get(`${path}?from=249&limit=5`);
      assert.equal(later.json.total, 252);
      assert.deepEqual(
        later.json.logs.map((e: Json) => e.message),
        ['line 249', 'late 250', 'late 251'],
      );
    });

    it('answers total 0 and no lines for a job without output', async () => {
      const c = await h().user();
      const wid = await containerWorkflow(c);
      const job = await insertJob(store(), wid, 'PENDING');
      const res = await c.get(`${logsPath(wid, job.id, '/lines')}?from=10`);
      assert.equal(res.status, 200);
      assert.deepEqual(res.json, { id: job.id, workflow_id: wid, from: 10, total: 0, logs: [] });
    });

    it('answers 400 naming the parameter, 404 for a job not yours, 412 without retention', async () => {
      const { c, wid, job } = await jobWithLines(['a', 'b', 'c']);
      for (const [q, field] of [
        ['?from=-1', 'from'],
        ['?from=x', 'from'],
        ['?from=2147483648', 'from'],
        ['?from=1&from=2', 'from'],
        ['?limit=0', 'limit'],
        ['?limit=1001', 'limit'],
      ] as const) {
        const res = await c.get(logsPath(wid, job.id, '/lines') + q);
        assert.equal(res.status, 400, q);
        assert.deepEqual(fields(res), [field], q);
      }
      const stranger = await h().user();
      assert.equal((await stranger.get(logsPath(wid, job.id, '/lines'))).status, 404);
      assert.equal((await c.get(logsPath(wid, crypto.randomUUID(), '/lines'))).status, 404);
      const off = await containerWorkflow(c, { logRetention: false });
      const offJob = await insertJob(store(), off, 'COMPLETED');
      const refused = await c.get(logsPath(off, offJob.id, '/lines'));
      assert.equal(refused.status, 412);
      assert.equal(refused.json.code, 'log_retention_disabled');
    });
  });
});
