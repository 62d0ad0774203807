const CONNECTION_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  // PostgreSQL: connection exceptions, shutdown, cannot connect now, too many connections
  '08000',
  '08001',
  '08003',
  '08004',
  '08006',
  '57P01',
  '57P02',
  '57P03',
  '53300',
  // SQLite: another process holds the write lock beyond busy_timeout
  'SQLITE_BUSY',
  'SQLITE_LOCKED',
]);

/** A failure of the connection to the store, not of the work: worth waiting out. */
export function isConnectionError(err: unknown): boolean {
  const e = err as { code?: unknown; message?: unknown } | null;
  if (typeof e?.code === 'string' && CONNECTION_CODES.has(e.code)) return true;
  const message = typeof e?.message === 'string' ? e.message : '';
  return /Connection terminated|connection error|timeout exceeded when trying to connect|Client was closed|terminating connection/i.test(message);
}
