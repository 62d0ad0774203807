import { isUuid } from '../core/ids.js';
import { decoded, unusable, type Decoded } from './table.js';
import { isRecord } from './read.js';

/** Log lines on the bus: runners → log-ingest (log.batch), log-ingest → api replicas (log.live). */

export interface LogLineMessage {
  sequence_num: number;
  stream: 'stdout' | 'stderr';
  message: string;
  /** ms since the epoch */
  timestamp: number;
}

/**
 * runners → log-ingest: consecutive lines of one job attempt. A line's
 * event_id is `<job_id>:<attempt>:<sequence_num>`, so a redelivered batch is
 * recognised line by line.
 */
export interface LogBatchMessage {
  job_id: string;
  workflow_id: string;
  attempt: number;
  /** Whether the workflow keeps its lines (they are counted either way). */
  retain: boolean;
  /** Consecutive lines in sequence_num order; empty in a count-only batch and when `columns` carries them. */
  lines: LogLineMessage[];
  /**
   * The lines packed by column, as runners send them: far cheaper to sign,
   * verify and encode than one object per line (a third of the CPU of a
   * batch). When present, `lines` is empty.
   */
  columns?: LogColumns;
  /**
   * Lines the attempt has produced so far (its last sequence_num + 1). Runners
   * send a job without retention as count-only batches: `retain: false`,
   * `lines: []` and this count. log-ingest counts the larger of this and the
   * last line's sequence_num + 1.
   */
  line_count?: number;
}

/** Consecutive lines of one attempt, by column. */
export interface LogColumns {
  /** sequence_num of the first line; the others follow one by one */
  first: number;
  /** One character per line: `o` stdout, `e` stderr. */
  streams: string;
  messages: string[];
  /** ms since the epoch, one per line */
  timestamps: number[];
}

/**
 * Validity of a log.batch envelope: the longest a verifier accepts (1 h), so
 * batches survive a log-ingest outage of up to an hour on a durable queue.
 */
export const LOG_BATCH_TTL_MS = 60 * 60_000;

/**
 * log-ingest → every api replica: lines just stored, for live tails (retained
 * lines only). Best effort and at least once: a subscriber may miss a message
 * (not connected, broker restart) or see lines again (a redelivered batch is
 * broadcast again), so it drops sequence_nums it has already sent and fills a
 * gap from the store. One log-ingest process broadcasts the batches of one
 * attempt in sequence order.
 */
export interface LiveLogsMessage {
  job_id: string;
  workflow_id: string;
  attempt: number;
  /** Empty on the wire when `columns` carries the lines; the decoder fills it. */
  lines: LogLineMessage[];
  /** The lines packed by column, as log-ingest sends consecutive lines (as in LogBatchMessage); absent once decoded. */
  columns?: LogColumns;
}

/** Consecutive lines packed by column, or undefined when they are not consecutive (they then travel as `lines`). */
export function packLines(lines: readonly LogLineMessage[]): LogColumns | undefined {
  const first = lines[0]?.sequence_num ?? 0;
  const messages = new Array<string>(lines.length);
  const timestamps = new Array<number>(lines.length);
  let streams = '';
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (line.sequence_num !== first + i) return undefined;
    messages[i] = line.message;
    timestamps[i] = line.timestamp;
    streams += line.stream === 'stderr' ? 'e' : 'o';
  }
  return { first, streams, messages, timestamps };
}

export function logEventId(jobId: string, attempt: number, sequenceNum: number): string {
  return `${jobId}:${attempt}:${sequenceNum}`;
}

/**
 * Checks a log.live body leniently: the lines a tail can use are kept, any
 * other line is left out (the tail fills a gap from the store).
 */
export function decodeLiveLogs(body: unknown): Decoded<LiveLogsMessage> {
  if (!isRecord(body)) return unusable('the body is not an object');
  const { job_id, workflow_id, attempt, lines, columns } = body;
  if (typeof job_id !== 'string' || typeof attempt !== 'number' || !Array.isArray(lines)) return unusable('a log.live needs job_id, attempt and lines');
  const head = { job_id, workflow_id: typeof workflow_id === 'string' ? workflow_id : '', attempt };
  if (columns !== undefined) {
    const unpacked = readColumns(columns);
    return typeof unpacked === 'string' ? unusable(unpacked) : decoded({ ...head, lines: unpacked });
  }
  const kept: LogLineMessage[] = [];
  for (const l of lines as unknown[]) {
    if (!isRecord(l)) continue;
    const { sequence_num, stream, message, timestamp } = l;
    if (typeof sequence_num !== 'number' || typeof message !== 'string' || typeof timestamp !== 'number') continue;
    if (stream !== 'stdout' && stream !== 'stderr') continue;
    kept.push({ sequence_num, stream, message, timestamp });
  }
  return decoded({ ...head, lines: kept });
}

/**
 * Checks a log.batch body (the envelope proves who sent it, not its shape)
 * and normalises it: NUL characters, which PostgreSQL cannot store, become
 * U+FFFD, as stored; lines packed by column are unpacked (`columns` is absent
 * from what it returns).
 */
export function decodeLogBatch(body: unknown): Decoded<LogBatchMessage> {
  const read = readLogBatch(body);
  return typeof read === 'string' ? unusable(read) : decoded(read);
}

function readLogBatch(body: unknown): LogBatchMessage | string {
  if (!isRecord(body)) return 'the body is not an object';
  const { job_id, workflow_id, attempt, retain, lines, line_count, columns } = body;
  if (!isUuid(job_id)) return 'job_id must be a UUID';
  if (!isUuid(workflow_id)) return 'workflow_id must be a UUID';
  if (!Number.isSafeInteger(attempt) || (attempt as number) < 1) return 'attempt must be a positive integer';
  if (typeof retain !== 'boolean') return 'retain must be a boolean';
  if (!Array.isArray(lines)) return 'lines must be an array';
  if (line_count !== undefined && (!Number.isSafeInteger(line_count) || (line_count as number) < 0)) return 'line_count must be a non-negative integer';
  let out: LogLineMessage[];
  if (columns !== undefined) {
    if (lines.length > 0) return 'a batch carries either lines or columns';
    const unpacked = readColumns(columns);
    if (typeof unpacked === 'string') return unpacked;
    out = unpacked;
  } else {
    const read = readLines(lines);
    if (typeof read === 'string') return read;
    out = read;
  }
  return {
    job_id,
    workflow_id,
    attempt: attempt as number,
    retain,
    lines: out,
    ...(line_count === undefined ? {} : { line_count: line_count as number }),
  };
}

const MAX_SEQUENCE = 2_147_483_647;

function withoutNul(message: string): string {
  return message.includes('\u0000') ? message.replaceAll('\u0000', '\ufffd') : message;
}

function readColumns(columns: unknown): LogLineMessage[] | string {
  if (!isRecord(columns)) return 'columns must be an object';
  const { first, streams, messages, timestamps } = columns;
  if (!Array.isArray(messages) || !Array.isArray(timestamps) || typeof streams !== 'string') return 'columns must hold streams, messages and timestamps';
  const n = messages.length;
  if (timestamps.length !== n || streams.length !== n) return 'columns must all have one entry per line';
  if (!Number.isSafeInteger(first) || (first as number) < 0 || (first as number) + n - 1 > MAX_SEQUENCE) {
    return 'columns.first must be an integer from 0 to 2^31-1';
  }
  const out = new Array<LogLineMessage>(n);
  for (let i = 0; i < n; i++) {
    const message: unknown = messages[i];
    const timestamp: unknown = timestamps[i];
    const s = streams.charCodeAt(i);
    if (typeof message !== 'string') return `columns.messages[${i}] must be a string`;
    if (!Number.isSafeInteger(timestamp)) return `columns.timestamps[${i}] must be an integer`;
    if (s !== 0x6f && s !== 0x65) return `columns.streams[${i}] must be o or e`;
    out[i] = { sequence_num: (first as number) + i, stream: s === 0x65 ? 'stderr' : 'stdout', message: withoutNul(message), timestamp: timestamp as number };
  }
  return out;
}

function readLines(lines: unknown[]): LogLineMessage[] | string {
  const out: LogLineMessage[] = new Array<LogLineMessage>(lines.length);
  for (let i = 0; i < lines.length; i++) {
    const l: unknown = lines[i];
    if (!isRecord(l)) return `lines[${i}] is not an object`;
    const { sequence_num, stream, message, timestamp } = l;
    if (!Number.isSafeInteger(sequence_num) || (sequence_num as number) < 0 || (sequence_num as number) > MAX_SEQUENCE) {
      return `lines[${i}].sequence_num must be an integer from 0 to 2^31-1`;
    }
    if (stream !== 'stdout' && stream !== 'stderr') return `lines[${i}].stream must be stdout or stderr`;
    if (typeof message !== 'string') return `lines[${i}].message must be a string`;
    if (!Number.isSafeInteger(timestamp)) return `lines[${i}].timestamp must be an integer`;
    out[i] = { sequence_num: sequence_num as number, stream, message: withoutNul(message), timestamp: timestamp as number };
  }
  return out;
}

