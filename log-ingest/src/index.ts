export { isConnectionError } from '@orloj/common';
export { LogIngester, readLogBatch, type LogIngesterOptions, type LogIngesterMetrics } from './log-ingester.js';
