/**
 * Pure helpers that turn a container's log byte stream into log lines:
 * - {@link DockerFrameDemuxer}: Docker's multiplexed stream format (8-byte frame
 *   header: stream type, 3 zero bytes, big-endian payload length).
 * - {@link splitTimestampPrefix}: the RFC 3339 prefix that `timestamps=1` adds
 *   to every log record (one record = one frame). Unused by the executor since
 *   it attaches instead of following logs (docs/container-runtime.md).
 * - {@link LineSplitter}: bytes → lines on `\n` (a trailing `\r` stripped), lines
 *   longer than {@link MAX_LINE_BYTES} cut into pieces of at most that many
 *   UTF-8 bytes (never inside a character), never dropped.
 */

/** A log line longer than this many UTF-8 bytes is cut into pieces of at most this size. */
export const MAX_LINE_BYTES = 16 * 1024;

const NL = 0x0a;
const CR = 0x0d;

export interface SplitLine<T> {
  text: string;
  /** The meta value of the chunk in which this line (or piece) began. */
  meta: T;
}

/**
 * Splits one stream's bytes into lines. Works on bytes, so a multi-byte UTF-8
 * character split across chunks is decoded correctly. Each line carries the
 * `meta` of the chunk its first byte arrived in (used for timestamps).
 */
export class LineSplitter<T = undefined> {
  private pending: Buffer = Buffer.alloc(0);
  private pendingMeta: T | undefined;
  private hasPending = false;

  constructor(private readonly maxBytes: number = MAX_LINE_BYTES) {
    if (!Number.isInteger(maxBytes) || maxBytes < 4) throw new RangeError('maxBytes must be an integer >= 4');
  }

  /** Feeds a chunk; returns the lines completed by it (possibly none). */
  push(chunk: Uint8Array, meta: T): SplitLine<T>[] {
    const out: SplitLine<T>[] = [];
    if (chunk.length === 0) return out;
    if (!this.hasPending) {
      this.pendingMeta = meta;
      this.hasPending = true;
    }
    let buf = this.pending.length === 0 ? Buffer.from(chunk) : Buffer.concat([this.pending, chunk]);
    let start = 0;
    for (;;) {
      const nl = buf.indexOf(NL, start);
      if (nl === -1) break;
      let end = nl;
      if (end > start && buf[end - 1] === CR) end--;
      this.emit(buf.subarray(start, end), out, true);
      start = nl + 1;
      // The next line begins in this chunk.
      this.pendingMeta = meta;
    }
    buf = buf.subarray(start);
    // Cut an over-long unfinished line now, so memory stays bounded. A trailing
    // `\r` may still turn out to be part of a `\r\n`, so it does not count.
    while (effectiveLength(buf) > this.maxBytes) {
      const cut = cutPoint(buf, this.maxBytes);
      out.push({ text: buf.subarray(0, cut).toString('utf8'), meta: this.pendingMeta as T });
      buf = buf.subarray(cut);
      this.pendingMeta = meta;
    }
    this.pending = Buffer.from(buf);
    this.hasPending = this.pending.length > 0;
    return out;
  }

  /** Ends the stream: returns the final line that had no newline, if any. */
  end(): SplitLine<T>[] {
    const out: SplitLine<T>[] = [];
    if (this.pending.length > 0) {
      let end = this.pending.length;
      if (this.pending[end - 1] === CR) end--;
      this.emit(this.pending.subarray(0, end), out, false);
    }
    this.pending = Buffer.alloc(0);
    this.hasPending = false;
    this.pendingMeta = undefined;
    return out;
  }

  private emit(line: Buffer, out: SplitLine<T>[], allowEmpty: boolean): void {
    const meta = this.pendingMeta as T;
    if (line.length === 0) {
      if (allowEmpty) out.push({ text: '', meta });
      return;
    }
    let rest = line;
    while (rest.length > this.maxBytes) {
      const cut = cutPoint(rest, this.maxBytes);
      out.push({ text: rest.subarray(0, cut).toString('utf8'), meta });
      rest = rest.subarray(cut);
    }
    if (rest.length > 0) out.push({ text: rest.toString('utf8'), meta });
  }
}

function effectiveLength(buf: Buffer): number {
  return buf.length > 0 && buf[buf.length - 1] === CR ? buf.length - 1 : buf.length;
}

/** The largest index <= max that does not fall inside a UTF-8 sequence. */
function cutPoint(buf: Buffer, max: number): number {
  let i = max;
  // Back off over continuation bytes (10xxxxxx); at most 3 for valid UTF-8.
  while (i > max - 4 && i > 0 && ((buf[i] ?? 0) & 0xc0) === 0x80) i--;
  return i > max - 4 && i > 0 ? i : max;
}

export type StreamName = 'stdout' | 'stderr';

export interface DockerFrame {
  stream: StreamName;
  payload: Buffer;
}

/**
 * Parses Docker's multiplexed attach/logs format incrementally. Frames of type
 * 0 (stdin) and 1 are stdout, 2 is stderr. Type 3 is the runtime's own error
 * ("systemerr", e.g. a broken connection inside the daemon): never the job's
 * output, it is kept in `runtimeErrors` (the last few, for the runner's log).
 * Anything else is counted in `unknownFrames` and skipped.
 */
export class DockerFrameDemuxer {
  private buf: Buffer = Buffer.alloc(0);
  unknownFrames = 0;
  readonly runtimeErrors: string[] = [];

  push(chunk: Uint8Array): DockerFrame[] {
    const frames: DockerFrame[] = [];
    this.buf = this.buf.length === 0 ? Buffer.from(chunk) : Buffer.concat([this.buf, chunk]);
    let off = 0;
    while (this.buf.length - off >= 8) {
      const type = this.buf[off] ?? 0;
      const size = this.buf.readUInt32BE(off + 4);
      if (this.buf.length - off - 8 < size) break;
      const payload = this.buf.subarray(off + 8, off + 8 + size);
      off += 8 + size;
      if (type === 0 || type === 1) frames.push({ stream: 'stdout', payload });
      else if (type === 2) frames.push({ stream: 'stderr', payload });
      else if (type === 3) {
        if (this.runtimeErrors.length < 10) this.runtimeErrors.push(payload.toString('utf8', 0, Math.min(payload.length, 1000)).trim());
      } else this.unknownFrames++;
    }
    this.buf = off === 0 ? this.buf : Buffer.from(this.buf.subarray(off));
    return frames;
  }

  /** Bytes of an incomplete frame left over (non-zero at the end means a truncated stream). */
  get leftover(): number {
    return this.buf.length;
  }
}

const TS_RE = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d) /;

export interface TimestampPrefix {
  /** Milliseconds since the epoch. */
  ms: number;
  /** False when the runtime only gave whole seconds (Podman 4 does). */
  subSecond: boolean;
  /** The payload without the prefix. */
  rest: Buffer;
}

/** Splits the `timestamps=1` RFC 3339 prefix ("<time> ") off a log record. */
export function splitTimestampPrefix(payload: Buffer): TimestampPrefix | undefined {
  const head = payload.subarray(0, 40).toString('latin1');
  const m = TS_RE.exec(head);
  if (!m) return undefined;
  const [whole, base, frac, zone] = m;
  const millis = frac ? frac.slice(0, 4).padEnd(4, '0') : '';
  const ms = Date.parse(`${base}${millis}${zone}`);
  if (Number.isNaN(ms)) return undefined;
  return { ms, subSecond: frac !== undefined, rest: payload.subarray(whole.length) };
}
