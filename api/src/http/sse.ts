import { PassThrough } from 'node:stream';
import type { Context } from 'koa';

/**
 * The text of one event; `data` is sent as one line of JSON (JSON.stringify
 * never emits a line break). Built once, it can be sent to many streams.
 */
export function sseFrame(name: string, data: unknown, id?: string): string {
  return `event: ${name}\n${id === undefined ? '' : `id: ${id}\n`}data: ${JSON.stringify(data)}\n\n`;
}

/**
 * A server-sent event stream as a Koa response body. Writes report
 * back-pressure (false: wait for `drained()` before writing more), and
 * `closed` resolves once the response is over, whichever side ended it.
 */
export class SseStream {
  readonly body = new PassThrough({ highWaterMark: 64 * 1024 });
  readonly closed: Promise<void>;
  private ended = false;

  constructor() {
    this.closed = new Promise((resolve) => {
      this.body.once('close', () => {
        this.ended = true;
        resolve();
      });
    });
    // A client that went away makes the pipeline destroy the body; nothing to report.
    this.body.on('error', () => undefined);
  }

  /** Turns the response into this stream (status 200, text/event-stream, never cached or buffered by a proxy). */
  respond(ctx: Context): void {
    ctx.status = 200;
    ctx.type = 'text/event-stream';
    ctx.set('Cache-Control', 'no-store');
    ctx.set('X-Accel-Buffering', 'no');
    ctx.body = this.body;
  }

  get isOpen(): boolean {
    return !this.ended && !this.body.writableEnded;
  }

  /** One event (see sseFrame). */
  event(name: string, data: unknown, id?: string): boolean {
    return this.send(sseFrame(name, data, id));
  }

  /** Events already serialised by `sseFrame` (one or several, concatenated; as text or UTF-8), in one write. */
  send(frames: string | Buffer): boolean {
    if (!this.isOpen) return true;
    return this.body.write(frames);
  }

  comment(text: string): void {
    if (this.isOpen) this.body.write(`: ${text}\n\n`);
  }

  /** Resolves when the buffer has drained, or the stream closed. */
  drained(): Promise<void> {
    if (!this.isOpen || !this.body.writableNeedDrain) return Promise.resolve();
    return Promise.race([new Promise<void>((resolve) => this.body.once('drain', () => resolve())), this.closed]);
  }

  end(): void {
    if (this.isOpen) this.body.end();
  }
}
