import { request } from 'undici';
import type { TestClient } from './client.js';

/** How long a stream may take for what a test waits for: generous, as the machine runs three test lanes on two cores. */
const WAIT_MS = 30_000;

export interface SseEvent {
  event: string;
  id?: string;
  data: string;
  /** data parsed as JSON */
  json: any;
}

/**
 * A server-sent events reader over a real connection: parses the stream as
 * an EventSource would (event, id, data fields; comment lines counted), and
 * lets a test await what it needs with a deadline instead of sleeping.
 */
export class SseReader {
  readonly events: SseEvent[] = [];
  comments = 0;
  /** True once the server ended the stream (or the reader closed it). */
  ended = false;
  status = 0;
  headers: Record<string, string | string[] | undefined> = {};
  /** The body of a response that is not an event stream (a problem document). */
  text = '';
  private readonly abort = new AbortController();
  private waiters: (() => void)[] = [];

  static async open(c: TestClient, path: string, headers: Record<string, string> = {}): Promise<SseReader> {
    const reader = new SseReader();
    const cookie = c.cookieHeader();
    const res = await request(c.baseUrl + path, {
      method: 'GET',
      headers: { accept: 'text/event-stream', ...(cookie ? { cookie } : {}), ...headers },
      signal: reader.abort.signal,
    });
    reader.status = res.statusCode;
    reader.headers = res.headers;
    if (!String(res.headers['content-type'] ?? '').startsWith('text/event-stream')) {
      reader.text = await res.body.text();
      reader.ended = true;
      return reader;
    }
    void reader.consume(res.body);
    return reader;
  }

  private async consume(body: AsyncIterable<Buffer>): Promise<void> {
    const decoder = new TextDecoder();
    let buffer = '';
    try {
      for await (const chunk of body) {
        buffer += decoder.decode(chunk, { stream: true });
        let end: number;
        while ((end = buffer.indexOf('\n\n')) !== -1) {
          this.parse(buffer.slice(0, end));
          buffer = buffer.slice(end + 2);
        }
        this.notify();
      }
    } catch {
      // aborted by close()
    } finally {
      this.ended = true;
      this.notify();
    }
  }

  private parse(block: string): void {
    let event = 'message';
    let id: string | undefined;
    const data: string[] = [];
    let fields = 0;
    for (const line of block.split('\n')) {
      if (line.startsWith(':')) {
        this.comments++;
        continue;
      }
      const colon = line.indexOf(':');
      const name = colon === -1 ? line : line.slice(0, colon);
      const value = colon === -1 ? '' : line.slice(colon + 1).replace(/^ /, '');
      fields++;
      if (name === 'event') event = value;
      else if (name === 'id') id = value;
      else if (name === 'data') data.push(value);
    }
    if (fields === 0) return;
    const text = data.join('\n');
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      json = undefined;
    }
    this.events.push({ event, ...(id !== undefined ? { id } : {}), data: text, json });
  }

  private notify(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w();
  }

  /** Waits until `predicate` holds (checked on every chunk received), failing after `ms`. */
  async until(predicate: (r: SseReader) => boolean, what: string, ms = WAIT_MS): Promise<void> {
    await this.waitFor(predicate, what, ms, true);
  }

  /** Waits for the server to end the stream. */
  async closed(ms = WAIT_MS): Promise<void> {
    await this.waitFor((r) => r.ended, 'the stream to end', ms, false);
  }

  /** Sleeps until a chunk arrives or the stream ends, until `done` holds; `failOnEnd`: an end before it fails. */
  private async waitFor(done: (r: SseReader) => boolean, what: string, ms: number, failOnEnd: boolean): Promise<void> {
    const deadline = Date.now() + ms;
    while (!done(this)) {
      if (failOnEnd && this.ended) throw new Error(`the stream ended while waiting for ${what}; events: ${this.describe()}`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timed out after ${ms} ms waiting for ${what}; events: ${this.describe()}`);
      let timer: NodeJS.Timeout | undefined;
      await new Promise<void>((resolve) => {
        this.waiters.push(resolve);
        timer = setTimeout(resolve, left); // bounds the wait: a new event wakes it first
      });
      clearTimeout(timer);
    }
  }

  /**
   * Waits for `end`. The server holds the stream open after it (keep-alive
   * comments) until the client closes it, or LIVE_TAIL_HOLD_AFTER_END passes.
   */
  async endEvent(ms = WAIT_MS): Promise<void> {
    await this.until((r) => r.events.some((e) => e.event === 'end'), 'end', ms);
  }

  logs(): SseEvent[] {
    return this.events.filter((e) => e.event === 'log');
  }

  close(): void {
    this.abort.abort();
  }

  private describe(): string {
    const names = this.events.map((e) => (e.event === 'log' ? `log#${e.id}` : e.event));
    return names.length > 40 ? `${names.slice(0, 20).join(' ')} … ${names.slice(-20).join(' ')} (${names.length})` : names.join(' ') || '(none)';
  }
}
