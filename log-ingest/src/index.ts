export { isConnectionError } from '@orloj/common/store';
export { LogIngester, readLogBatch, type LogIngesterOptions, type LogIngesterMetrics } from './log-ingester.js';
