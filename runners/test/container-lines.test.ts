import assert from 'node:assert/strict';
import {
  DockerFrameDemuxer,
  LineSplitter,
  MAX_LINE_BYTES,
  splitTimestampPrefix,
} from '../src/executors/line-splitter.js';

function frame(type: number, payload: string | Buffer): Buffer {
  const body = typeof payload === 'string' ? Buffer.from(payload, 'utf8') : payload;
  const head = Buffer.alloc(8);
  head[0] = type;
  head.writeUInt32BE(body.length, 4);
  return Buffer.concat([head, body]);
}

/** Feeds `input` to a fresh splitter in chunks of `size` bytes and returns the texts. */
function split(input: string | Buffer, size = Infinity, max = MAX_LINE_BYTES): string[] {
  const s = new LineSplitter<undefined>(max);
  const buf = typeof input === 'string' ? Buffer.from(input, 'utf8') : input;
  const out: string[] = [];
  const step = Number.isFinite(size) ? size : Math.max(buf.length, 1);
  for (let i = 0; i < buf.length; i += step) out.push(...s.push(buf.subarray(i, i + step), undefined).map((l) => l.text));
  out.push(...s.end().map((l) => l.text));
  return out;
}

describe('LineSplitter', () => {
  it('splits on \\n, strips a trailing \\r, keeps empty lines and a final line without newline', () => {
    assert.deepEqual(split('a\nb\r\n\n\r\nlast'), ['a', 'b', '', '', 'last']);
    assert.deepEqual(split('one\n'), ['one']);
    assert.deepEqual(split(''), []);
    assert.deepEqual(split('\n'), ['']);
    assert.deepEqual(split('mid\rdle\n'), ['mid\rdle']);
  });

  it('gives the same lines whatever the chunk boundaries (byte by byte included)', () => {
    const text = 'héllo wörld €\r\n😀 emoji\n\nx\r\ny';
    const whole = split(text);
    assert.deepEqual(whole, ['héllo wörld €', '😀 emoji', '', 'x', 'y']);
    for (const size of [1, 2, 3, 5, 7]) assert.deepEqual(split(text, size), whole, `chunk size ${size}`);
  });

  it('cuts a long line into 16 KiB pieces, never dropping a byte', () => {
    const line = 'a'.repeat(100 * 1024);
    for (const size of [Infinity, 8192, 1000, 16384]) {
      const pieces = split(`${line}\nnext\n`, size);
      assert.equal(pieces.length, 8, `chunk size ${size}`);
      assert.deepEqual(
        pieces.slice(0, 7).map((p) => p.length),
        [16384, 16384, 16384, 16384, 16384, 16384, 4096],
      );
      assert.equal(pieces.slice(0, 7).join(''), line);
      assert.equal(pieces[7], 'next');
    }
  });

  it('does not add an empty piece for a line of exactly the limit, with or without \\r', () => {
    const exact = 'b'.repeat(MAX_LINE_BYTES);
    for (const size of [Infinity, 4096, 1]) {
      assert.deepEqual(split(`${exact}\n`, size), [exact]);
      assert.deepEqual(split(`${exact}\r\n`, size), [exact]);
      assert.deepEqual(split(exact, size), [exact]);
    }
    assert.deepEqual(split(`${exact}c\n`), [exact, 'c']);
  });

  it('never cuts inside a UTF-8 character', () => {
    // 3-byte characters: 16384 is not a multiple of 3, so the cut backs off.
    const line = '€'.repeat(10_000);
    for (const size of [Infinity, 1, 4097]) {
      const pieces = split(line, size);
      assert.equal(pieces.join(''), line);
      for (const p of pieces) {
        assert.ok(Buffer.byteLength(p) <= MAX_LINE_BYTES);
        assert.ok(!p.includes('\uFFFD'));
      }
      assert.equal(Buffer.byteLength(pieces[0] ?? ''), 16383);
    }
    const emoji = '😀'.repeat(5000);
    assert.equal(split(emoji, 3).join(''), emoji);
  });

  it('tags each line with the meta of the chunk it began in', () => {
    const s = new LineSplitter<number>();
    assert.deepEqual(s.push(Buffer.from('ab'), 1), []);
    assert.deepEqual(s.push(Buffer.from('c\nd'), 2), [{ text: 'abc', meta: 1 }]);
    assert.deepEqual(s.push(Buffer.from('\ne\n'), 3), [
      { text: 'd', meta: 2 },
      { text: 'e', meta: 3 },
    ]);
    assert.deepEqual(s.push(Buffer.from('f'), 4), []);
    assert.deepEqual(s.end(), [{ text: 'f', meta: 4 }]);
    assert.deepEqual(s.end(), []);
  });
});

describe('DockerFrameDemuxer', () => {
  it('parses stdout and stderr frames across arbitrary chunk boundaries', () => {
    const bytes = Buffer.concat([frame(1, 'out 1\n'), frame(2, 'err 1\n'), frame(1, ''), frame(1, 'é€😀\n')]);
    for (const size of [1, 3, 8, 9, bytes.length]) {
      const d = new DockerFrameDemuxer();
      const got: string[] = [];
      for (let i = 0; i < bytes.length; i += size) {
        for (const f of d.push(bytes.subarray(i, i + size))) got.push(`${f.stream}:${f.payload.toString('utf8')}`);
      }
      assert.deepEqual(got, ['stdout:out 1\n', 'stderr:err 1\n', 'stdout:', 'stdout:é€😀\n'], `chunk size ${size}`);
      assert.equal(d.leftover, 0);
    }
  });

  it("keeps the runtime's errors (type 3) out of the output, skips unknown types and reports a truncated frame", () => {
    const d = new DockerFrameDemuxer();
    const frames = d.push(
      Buffer.concat([frame(3, 'read unixpacket @->/run/podman/x: read: connection reset by peer\n'), frame(7, '?'), frame(2, 'x'), frame(1, 'partial').subarray(0, 10)]),
    );
    assert.deepEqual(
      frames.map((f) => f.stream),
      ['stderr'],
    );
    assert.deepEqual(d.runtimeErrors, ['read unixpacket @->/run/podman/x: read: connection reset by peer']);
    assert.equal(d.unknownFrames, 1);
    assert.equal(d.leftover, 10);
  });
});

describe('splitTimestampPrefix', () => {
  it('parses Podman (whole seconds) and Docker (nanoseconds) prefixes', () => {
    const p = splitTimestampPrefix(Buffer.from('2026-01-02T03:04:05Z hello\n'));
    assert.ok(p);
    assert.equal(p.ms, Date.UTC(2026, 0, 2, 3, 4, 5));
    assert.equal(p.subSecond, false);
    assert.equal(p.rest.toString(), 'hello\n');

    const d = splitTimestampPrefix(Buffer.from('2026-01-02T03:04:05.123456789Z x'));
    assert.ok(d);
    assert.equal(d.ms, Date.UTC(2026, 0, 2, 3, 4, 5, 123));
    assert.equal(d.subSecond, true);
    assert.equal(d.rest.toString(), 'x');

    const z = splitTimestampPrefix(Buffer.from('2026-01-02T05:04:05.5+02:00 '));
    assert.ok(z);
    assert.equal(z.ms, Date.UTC(2026, 0, 2, 3, 4, 5, 500));
    assert.equal(z.rest.length, 0);
  });

  it('leaves a payload without a prefix alone', () => {
    assert.equal(splitTimestampPrefix(Buffer.from('hello 2026-01-02T03:04:05Z')), undefined);
    assert.equal(splitTimestampPrefix(Buffer.from('2026-01-02T03:04:05Z')), undefined);
    assert.equal(splitTimestampPrefix(Buffer.alloc(0)), undefined);
  });
});
