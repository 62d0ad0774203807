import { EventEmitter } from 'node:events';

/**
 * An AbortController for hot paths. Making an AbortSignal, and aborting it
 * (an Event dispatched through an EventTarget), cost a few percent of the CPU
 * of a runner doing thousands of jobs a second, with three per job. This is
 * an EventEmitter that emits 'abort' once: undici takes it as a request's
 * signal, and `onAbort` and the clocks' `sleep` listen to it. Whatever needs
 * a real AbortSignal (dockerode, `AbortSignal.any`) gets one from `signal`,
 * made at first use.
 */
export class Cancellation extends EventEmitter {
  aborted = false;
  private controller: AbortController | undefined;

  abort(): void {
    if (this.aborted) return;
    this.aborted = true;
    this.controller?.abort(CANCELED);
    this.emit('abort');
  }

  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.aborted) this.controller.abort(CANCELED);
    }
    return this.controller.signal;
  }
}

/** The reason of a Cancellation's AbortSignal: a fixed value (abort() without one builds a DOMException and its stack). */
const CANCELED = Object.freeze({ name: 'Canceled', message: 'canceled' });

/** What can tell that work should stop: an AbortSignal, or a Cancellation. */
export type AbortLike = AbortSignal | Cancellation;

/**
 * Calls `listener` once when `source` aborts (not if it already has: check
 * `aborted` first); returns the function that stops listening.
 */
export function onAbort(source: AbortLike, listener: () => void): () => void {
  if (source instanceof Cancellation) {
    source.once('abort', listener);
    return () => source.removeListener('abort', listener);
  }
  source.addEventListener('abort', listener, { once: true });
  return () => source.removeEventListener('abort', listener);
}
