export { LogIngester, readLogBatch, isConnectionError, type LogIngesterOptions, type LogIngesterMetrics } from './log-ingester.js';
