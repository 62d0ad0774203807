import { Writable } from 'node:stream';
import { pino, type Logger } from 'pino';

/** A log line as pino writes it: `msg`, the numeric `level`, and the fields logged with it. */
export type LoggedLine = Record<string, unknown> & { msg?: string; level?: number };

/**
 * A pino logger at `level` that keeps every line it writes, parsed, in `lines`: what a test
 * reads to see that something was (or was not) logged — an event, not a wait.
 */
export function recordingLogger(level = 'debug'): { logger: Logger; lines: LoggedLine[] } {
  const lines: LoggedLine[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const l of chunk.toString('utf8').split('\n')) if (l) lines.push(JSON.parse(l) as LoggedLine);
      done();
    },
  });
  return { logger: pino({ level }, sink), lines };
}
