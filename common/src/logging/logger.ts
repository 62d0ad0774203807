import { pino, type Logger, type LevelWithSilent } from 'pino';

export type { Logger } from 'pino';

/** The root logger. Child loggers add { role, workflowId, jobId, reqId }. */
export function createLogger(options: { level?: LevelWithSilent; name?: string } = {}): Logger {
  return pino({
    name: options.name ?? 'orloj',
    level: options.level ?? 'info',
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
  });
}

export const silentLogger: Logger = pino({ level: 'silent' });
