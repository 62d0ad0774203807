export { isConnectionError } from '@orloj/common';
export { LogIngester, type LogIngesterOptions, type LogIngesterMetrics } from './log-ingester.js';
