export { isConnectionError } from '@orloj/common/store';
export { LogIngester, type LogIngesterOptions, type LogIngesterMetrics } from './log-ingester.js';
