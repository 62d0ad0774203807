import type { Context, Middleware } from 'koa';
import { OrlojError } from '@orloj/common/core';
import { withHeaders } from './problem.js';

interface Waiter {
  userId: string;
  admit: (release: () => void) => void;
  timer: NodeJS.Timeout;
}

/**
 * The process's budget for heavy requests (issue 29): those that read and
 * send answers of megabytes — workflow pages and reads, log pages, searches
 * and downloads. Each holds a place from before its reads until its answer
 * has been sent, so the memory they hold together is at most `max` answers
 * (each bounded in bytes by its route) whatever mix of requests arrives; 16
 * parallel pages of 1-MiB payloads took 5 GiB and the process before. A user
 * holds at most `perUser` places, so one tenant with slow connections cannot
 * hold them all. The rest wait in arrival order (a request whose user is at
 * its share lets later ones of other users pass), and one that has waited
 * `waitMs` is answered 503 with Retry-After.
 */
export class HeavyRequests {
  private running = 0;
  private readonly perUserRunning = new Map<string, number>();
  private readonly queue: Waiter[] = [];
  private refusedCount = 0;

  constructor(private readonly o: { max: number; perUser: number; waitMs: number }) {}

  /** Places taken, requests waiting, and requests refused (503) since start. */
  metrics(): { running: number; waiting: number; refused: number } {
    return { running: this.running, waiting: this.queue.length, refused: this.refusedCount };
  }

  /**
   * Waits for a place for `userId`'s request; resolves with its release (call
   * once), or rejects: 503 `service_unavailable` after waitMs, or the abort
   * reason once `signal` aborts (the client went away while waiting).
   */
  acquire(userId: string, signal?: AbortSignal): Promise<() => void> {
    // Every waiter lacks room (each release admits those that have it): a request with room passes them.
    if (this.hasRoom(userId)) return Promise.resolve(this.take(userId));
    return new Promise((resolve, reject) => {
      const leave = () => {
        clearTimeout(waiter.timer);
        signal?.removeEventListener('abort', abort);
        const at = this.queue.indexOf(waiter);
        if (at !== -1) this.queue.splice(at, 1);
      };
      const abort = () => {
        leave();
        reject(signal?.reason instanceof Error ? signal.reason : new Error('the request went away while it waited'));
      };
      const waiter: Waiter = {
        userId,
        admit: (release) => {
          leave();
          resolve(release);
        },
        timer: setTimeout(() => {
          leave();
          this.refusedCount++;
          reject(withHeaders(new OrlojError('service_unavailable', 'The server is busy with other large answers; try again in a moment.', { kind: 'operational' }), { 'Retry-After': '1' }));
        }, this.o.waitMs),
      };
      signal?.addEventListener('abort', abort, { once: true });
      this.queue.push(waiter);
    });
  }

  private hasRoom(userId: string): boolean {
    return this.running < this.o.max && (this.perUserRunning.get(userId) ?? 0) < this.o.perUser;
  }

  private take(userId: string): () => void {
    this.running++;
    this.perUserRunning.set(userId, (this.perUserRunning.get(userId) ?? 0) + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.running--;
      const left = (this.perUserRunning.get(userId) ?? 1) - 1;
      if (left <= 0) this.perUserRunning.delete(userId);
      else this.perUserRunning.set(userId, left);
      this.admitWaiting();
    };
  }

  /** Admits the waiting requests that now have room, oldest first. */
  private admitWaiting(): void {
    for (let i = 0; i < this.queue.length && this.running < this.o.max; ) {
      const waiter = this.queue[i]!;
      if (!this.hasRoom(waiter.userId)) {
        i++;
        continue;
      }
      waiter.admit(this.take(waiter.userId));
    }
  }
}

/**
 * Waits for a place in `heavy` for the request's user (after the session
 * check) and keeps it until the response has been sent or the connection has
 * closed.
 */
export async function holdHeavyPlace(heavy: HeavyRequests, ctx: Context): Promise<void> {
  const gone = new AbortController();
  const abort = () => gone.abort();
  ctx.res.once('close', abort);
  const release = await heavy.acquire(ctx.state.session.userId as string, gone.signal);
  ctx.res.off('close', abort);
  // Closed before it waited (no 'close' is coming): nothing will be sent, the place goes back at once.
  if (ctx.res.closed) release();
  else ctx.res.once('close', release);
}

/** Route middleware (after the session's): the route's requests are heavy (holdHeavyPlace). */
export function heavyRequest(heavy: HeavyRequests): Middleware {
  return async (ctx, next) => {
    await holdHeavyPlace(heavy, ctx);
    await next();
  };
}
