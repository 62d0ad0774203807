import { AsyncLocalStorage } from 'node:async_hooks';
import { destination, pino, type DestinationStream, type Logger, type LoggerOptions, type LevelWithSilent } from 'pino';

export type { Logger } from 'pino';

/**
 * The request a piece of work is done for, across awaits: the api runs each
 * request inside `run()`, and every line a logger made with this context
 * writes meanwhile carries the request's `reqId` — lines of the routes, the
 * store, the bus, whatever the request causes. One per process, made by the
 * composition root.
 */
export class RequestContext {
  private readonly storage = new AsyncLocalStorage<{ reqId: string }>();

  run<T>(reqId: string, fn: () => T): T {
    return this.storage.run({ reqId }, fn);
  }

  /** The request id of the request being handled now, if any (a message published now carries it). */
  current(): string | undefined {
    return this.storage.getStore()?.reqId;
  }

  /** The fields to add to a log line written now: `{ reqId }` inside a request, else none. */
  fields(): { reqId?: string } {
    const current = this.storage.getStore();
    return current ? { reqId: current.reqId } : {};
  }
}

/**
 * The root logger: one JSON object per line on stdout. Child loggers add
 * { role, workflowId, jobId }; with a RequestContext every line written for
 * a request carries its reqId (only the context writes that key, so no line
 * holds it twice).
 */
export function createLogger(options: { level?: LevelWithSilent; name?: string; context?: RequestContext; destination?: DestinationStream } = {}): Logger {
  const context = options.context;
  const settings: LoggerOptions = {
    name: options.name ?? 'orloj',
    level: options.level ?? 'info',
    ...(context ? { mixin: () => context.fields() } : {}),
    redact: {
      paths: [
        'req.headers.cookie',
        'req.headers.authorization',
        'res.headers["set-cookie"]',
        '*.password',
        '*.password_hash',
        '*.secret',
        'config.sessionSecret',
        'config.csrfSecret',
      ],
      censor: '[redacted]',
    },
  };
  return pino(settings, options.destination ?? stdoutDestination());
}

/**
 * stdout, written synchronously and never throwing. pino's own default
 * buffers lines and flushes them in an exit handler that retries a write
 * failing with EPIPE forever: a process whose output pipe was gone (a log
 * shipper that exited, `| tee` killed) hung in `process.exit` (issue 30).
 * Written synchronously, nothing is left to flush at exit; and a write that
 * fails turns the stream into a sink (pino's own handling of EPIPE) rather
 * than throwing into whatever logged — a signal handler, a shutdown path.
 */
export function stdoutDestination(): DestinationStream {
  const stream = destination({ dest: 1, sync: true });
  // pino handles EPIPE itself and re-emits any other error: swallowed here, a log line is never worth a crash.
  stream.on('error', () => undefined);
  return stream;
}

export const silentLogger: Logger = pino({ level: 'silent' });

type LogLevel = 'debug' | 'info' | 'warn' | 'error';

/** The logging methods hot paths use, for a logger made lazily. */
export interface LazyLogger {
  debug(obj: object, msg?: string): void;
  debug(msg: string): void;
  info(obj: object, msg?: string): void;
  info(msg: string): void;
  warn(obj: object, msg?: string): void;
  warn(msg: string): void;
  error(obj: object, msg?: string): void;
  error(msg: string): void;
}

/**
 * A child of `parent` with `bindings`, made only when a line at an enabled
 * level is written. pino serializes a child's bindings when the child is
 * made; a runner made two per job (the attempt's, the HTTP check's) and most
 * jobs write nothing at the usual levels.
 */
export function lazyChild(parent: Logger, bindings: Record<string, unknown>): LazyLogger {
  return new LazyChild(parent, bindings);
}

class LazyChild implements LazyLogger {
  private child: Logger | undefined;

  constructor(
    private readonly parent: Logger,
    private readonly bindings: Record<string, unknown>,
  ) {}

  debug(objOrMsg: object | string, msg?: string): void {
    this.write('debug', objOrMsg, msg);
  }
  info(objOrMsg: object | string, msg?: string): void {
    this.write('info', objOrMsg, msg);
  }
  warn(objOrMsg: object | string, msg?: string): void {
    this.write('warn', objOrMsg, msg);
  }
  error(objOrMsg: object | string, msg?: string): void {
    this.write('error', objOrMsg, msg);
  }

  private write(level: LogLevel, objOrMsg: object | string, msg: string | undefined): void {
    if (!this.parent.isLevelEnabled(level)) return;
    this.child ??= this.parent.child(this.bindings);
    if (typeof objOrMsg === 'string') this.child[level](objOrMsg);
    else this.child[level](objOrMsg, msg);
  }
}
